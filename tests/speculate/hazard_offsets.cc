// Hazard 1, shared open file descriptions: reads in pieces with read/readv/pread and lseek,
// directory traversal with readdir (getdents64), fcntl(F_SETFL) and flock, while the run-ahead
// path moves every one of those on the descriptions it shares with the program.
// usage: hazard_offsets WATCHED_FILE WATCHED_BIG_DIR LOCK_FILE (a text file off the mount)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/uio.h>

#include "tests/speculate/hazard_common.h"

using hazard::Fnv;
using hazard::Speculating;

namespace {

void ReadPiece(int fd, size_t length, const char* label) {
  char buffer[8192];
  off_t before = lseek(fd, 0, SEEK_CUR);
  ssize_t n = read(fd, buffer, length);
  if (n < 0) hazard::Die("read");
  printf("%s at=%lld got=%zd hash=%016llx\n", label, (long long)before, n,
         (unsigned long long)Fnv(buffer, static_cast<size_t>(n)));
}

// What the run-ahead does with the shared descriptions; none of it may reach the program.
// Reads of the watched file come last: the first one the program does not make itself sends
// speculation off track, and the program then ends the child.
void DisturbSharedState(int fd, DIR* dir, int lock_fd) {
  while (readdir(dir) != nullptr) {
  }
  fcntl(fd, F_SETFL, O_APPEND | O_NONBLOCK);
  flock(lock_fd, LOCK_UN);
  char buffer[65536];
  lseek(lock_fd, 0, SEEK_SET);  // the lock file is not on the mount: its reads are not hinted
  while (read(lock_fd, buffer, sizeof(buffer)) > 0) {
  }
  lseek(fd, 7, SEEK_END);
  lseek(fd, 0, SEEK_SET);
  while (read(fd, buffer, sizeof(buffer)) > 0) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  hazard::RememberProgramPid();
  int fd = open(argv[1], O_RDONLY);
  int lock_fd = open(argv[3], O_RDONLY);
  DIR* dir = opendir(argv[2]);
  if (fd < 0 || lock_fd < 0 || dir == nullptr) hazard::Die("open");
  if (flock(lock_fd, LOCK_EX) != 0) hazard::Die("flock");
  uint64_t names = 0;
  for (int i = 0; i < 10; ++i) {
    struct dirent* entry = readdir(dir);
    if (entry == nullptr) break;
    names = Fnv(entry->d_name, strlen(entry->d_name), names);
  }

  ReadPiece(lock_fd, 300, "plain");
  ReadPiece(fd, 100, "first");  // the first read of the mount: a child is forked here
  if (Speculating()) DisturbSharedState(fd, dir, lock_fd);
  ReadPiece(fd, 1000, "second");
  ReadPiece(lock_fd, 300, "plain");
  lseek(fd, 5000, SEEK_SET);
  ReadPiece(fd, 3000, "after-seek-set");
  lseek(fd, -2000, SEEK_CUR);
  ReadPiece(fd, 4096, "after-seek-back");
  if (Speculating()) DisturbSharedState(fd, dir, lock_fd);
  char a[300], b[700];
  struct iovec iov[2] = {{a, sizeof(a)}, {b, sizeof(b)}};
  off_t before = lseek(fd, 0, SEEK_CUR);
  ssize_t n = readv(fd, iov, 2);
  printf("readv at=%lld got=%zd hash=%016llx\n", (long long)before, n,
         (unsigned long long)Fnv(b, sizeof(b), Fnv(a, sizeof(a))));
  char c[512];
  ssize_t p = pread(fd, c, sizeof(c), 100);
  printf("pread got=%zd hash=%016llx offset-now=%lld\n", p, (unsigned long long)Fnv(c, sizeof(c)),
         (long long)lseek(fd, 0, SEEK_CUR));
  lseek(fd, -100, SEEK_END);
  ReadPiece(fd, 4096, "tail");
  if (Speculating()) DisturbSharedState(fd, dir, lock_fd);
  ReadPiece(fd, 4096, "at-eof");
  ReadPiece(lock_fd, 300, "plain");

  hazard::PrintSharedState(dir, 10, names, fd, argv[3]);
  return 0;
}
