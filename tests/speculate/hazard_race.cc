// Hazard 1 while the run-ahead races the program: every read of the mount forks a fresh child
// (TIPSPEC_STALL_USEC=0), and the child's run-ahead path first hammers every description it
// shares with the program (seeks of the file and of a stdio stream over it, directory reads and
// rewinds, status flags, the lock) before it reaches its own first read of the mount. In
// lockstep mode that whole hammering happens between the program's look at its offset and its
// read (the program waits for the child's next logged read); without lockstep the child runs
// on the other core at the same time as the program's reads. The program checks every piece
// against pread at the offset it believes it is at and prints what it saw: the output must be
// the same with and without speculation.
// usage: hazard_race WATCHED_FILE WATCHED_DIR LOCK_FILE ROUNDS
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "tests/speculate/hazard_common.h"

using hazard::Fnv;
using hazard::Speculating;

namespace {

// The run-ahead path: everything here would change what the program sees next, if it reached
// the descriptions the program uses.
void Hammer(int fd, FILE* stream, DIR* dir, int lock_fd, off_t size) {
  char buffer[4096];
  for (int i = 0; i < 400; ++i) {
    lseek(fd, (i * 7919) % size, SEEK_SET);
    fcntl(fd, F_SETFL, (i & 1) != 0 ? O_APPEND | O_NONBLOCK : 0);
    flock(lock_fd, LOCK_UN);
    fseek(stream, (i * 104729) % size, SEEK_SET);
    if (i % 100 == 0) {
      rewinddir(dir);
      while (readdir(dir) != nullptr) {
      }
    }
  }
  lseek(fd, 0, SEEK_SET);
  rewind(stream);
  // Its first read of the mount: in lockstep the program has waited for this one.
  while (read(fd, buffer, sizeof(buffer)) > 0) {
  }
}

// Reads `length` bytes where `fd` stands and checks them against pread at that offset.
void CheckedRead(int fd, size_t length, int round) {
  char piece[8192];
  char expected[8192];
  off_t at = lseek(fd, 0, SEEK_CUR);
  ssize_t n = read(fd, piece, length);
  off_t after = lseek(fd, 0, SEEK_CUR);
  ssize_t m = n > 0 ? pread(fd, expected, static_cast<size_t>(n), at) : n;
  bool same = n == m && (n <= 0 || memcmp(piece, expected, static_cast<size_t>(n)) == 0);
  printf("%d read at=%lld got=%zd next=%lld %s hash=%016llx\n", round, (long long)at, n,
         (long long)after, same && after == at + (n > 0 ? n : 0) ? "ok" : "WRONG",
         (unsigned long long)Fnv(piece, n > 0 ? static_cast<size_t>(n) : 0));
}

void CheckedStreamRead(FILE* stream, int fd, size_t length, int round) {
  char piece[8192];
  char expected[8192];
  long at = ftell(stream);
  size_t n = fread(piece, 1, length, stream);
  long after = ftell(stream);
  ssize_t m = pread(fd, expected, n, at);
  bool same = m == static_cast<ssize_t>(n) && memcmp(piece, expected, n) == 0;
  printf("%d fread at=%ld got=%zu next=%ld %s hash=%016llx\n", round, at, n, after,
         same && after == at + static_cast<long>(n) ? "ok" : "WRONG",
         (unsigned long long)Fnv(piece, n));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  hazard::RememberProgramPid();
  int rounds = atoi(argv[4]);
  int fd = open(argv[1], O_RDONLY);
  FILE* stream = fopen(argv[1], "r");
  DIR* dir = opendir(argv[2]);
  int lock_fd = open(argv[3], O_RDONLY);
  if (fd < 0 || stream == nullptr || dir == nullptr || lock_fd < 0) hazard::Die("open");
  if (flock(lock_fd, LOCK_EX) != 0) hazard::Die("flock");
  struct stat st;
  if (fstat(fd, &st) != 0) hazard::Die("fstat");

  uint64_t names = 0;
  long entries = 0;
  for (int round = 0; round < rounds; ++round) {
    CheckedRead(fd, 1000 + 317 * (round % 11), round);  // a child is forked at each read
    if (Speculating()) Hammer(fd, stream, dir, lock_fd, st.st_size);
    CheckedStreamRead(stream, fd, 700 + 211 * (round % 7), round);
    if (Speculating()) Hammer(fd, stream, dir, lock_fd, st.st_size);
    if (struct dirent* entry = readdir(dir)) {
      names = Fnv(entry->d_name, strlen(entry->d_name), names);
      ++entries;
    }
    if (round % 9 == 8) {  // jump about, and start again near the end
      lseek(fd, (round * 1009) % (st.st_size / 2), SEEK_SET);
      fseek(stream, (round * 2003) % (st.st_size / 2), SEEK_SET);
    }
  }
  hazard::PrintSharedState(dir, entries, names, fd, argv[3]);
  return 0;
}
