/* The example program of man/tipfs_hint.3, built with the tests so that it keeps compiling.
 * Reads files of a tipfs mount in a known order after disclosing that order. */
#define _POSIX_C_SOURCE 200809L /* openat, O_DIRECTORY under cc -std=c99 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <tipfs/hint.h>
#include <unistd.h>

int main(int argc, char **argv) {
  static char buffer[1 << 17];
  unsigned long long total = 0;
  struct tipfs_query q;
  int mount_fd, i;

  if (argc < 3) {
    fprintf(stderr, "usage: %s MOUNTPOINT FILE...   (FILEs relative to MOUNTPOINT)\n", argv[0]);
    return 2;
  }
  mount_fd = open(argv[1], O_RDONLY | O_DIRECTORY);
  if (mount_fd < 0) {
    perror(argv[1]);
    return 1;
  }
  /* Disclose every file, whole, in the order it will be read. Hints are advice: if they are
   * refused (not a tipfs mount, over the cap, ...) the program works the same, only slower. */
  if (tipfs_hint_files(mount_fd, (const char *const *)(argv + 2), (size_t)(argc - 2),
                       TIPFS_SOURCE_MANUAL) != 0) {
    fprintf(stderr, "hints not taken: %s\n", strerror(errno));
  }
  for (i = 2; i < argc; ++i) {
    ssize_t n;
    int fd = openat(mount_fd, argv[i], O_RDONLY);
    if (fd < 0) {
      perror(argv[i]);
      continue;
    }
    while ((n = read(fd, buffer, sizeof(buffer))) > 0) total += (unsigned long long)n;
    close(fd);
  }
  if (tipfs_hint_query(mount_fd, TIPFS_STREAM_SELF, &q) == 0) {
    printf("%llu bytes read; %llu hinted blocks prefetched, %llu of them used; stalled %.3f s\n",
           total, (unsigned long long)q.hinted_prefetched, (unsigned long long)q.hinted_used,
           (double)q.stall_nanos / 1e9);
  }
  close(mount_fd);
  return 0;
}
