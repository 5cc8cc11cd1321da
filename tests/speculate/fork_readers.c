/* A program whose reads happen in the children it forks (a build driver, a parallel scanner):
 *
 *   fork_readers [--underscore-exit] N FILE...
 *
 * The parent reads the first FILE, forks N children (child i reads FILE i+1, i+1+N, ... in
 * 4 KiB reads to the end, and ends with exit(3), or with _exit(2) given --underscore-exit),
 * waits for them and prints the bytes each read, in child order. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static long long read_file(const char* path) {
  char buffer[4096];
  long long total = 0;
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) break;
    total += n;
  }
  close(fd);
  return total;
}

int main(int argc, char** argv) {
  int first = 1, underscore_exit = 0;
  if (first < argc && strcmp(argv[first], "--underscore-exit") == 0) {
    underscore_exit = 1;
    ++first;
  }
  if (argc - first < 2) {
    fprintf(stderr, "usage: %s [--underscore-exit] N FILE...\n", argv[0]);
    return 2;
  }
  const int n = atoi(argv[first]);
  char** files = argv + first + 1;
  const int count = argc - first - 1;
  printf("parent %lld\n", read_file(files[0]));
  fflush(stdout);
  int pipes[64][2];
  if (n < 1 || n > 64) return 2;
  for (int i = 0; i < n; ++i) {
    if (pipe(pipes[i]) != 0) return 1;
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      long long total = 0;
      for (int f = 1 + i; f < count; f += n) total += read_file(files[f]);
      (void)!write(pipes[i][1], &total, sizeof(total));
      if (underscore_exit) _exit(0);
      exit(0);
    }
    close(pipes[i][1]);
  }
  for (int i = 0; i < n; ++i) {
    long long total = -1;
    if (read(pipes[i][0], &total, sizeof(total)) != sizeof(total)) total = -1;
    printf("child %d %lld\n", i, total);
  }
  int status;
  while (wait(&status) > 0) {
  }
  return 0;
}
