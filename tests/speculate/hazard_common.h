// Shared helpers of the hazard programs that spec_hazard_test runs with and without libtipspec.
// Each program prints what it observed; the test compares the two outputs byte for byte.
// Speculating() is true only in a speculating child (whose getpid differs from the program's),
// so a program can put code on a path that only the run-ahead takes: if the sandbox or the
// shadow offsets failed, that code would change what the program itself later sees.
#pragma once

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <string>

namespace hazard {

inline pid_t g_program_pid = 0;

inline void RememberProgramPid() { g_program_pid = getpid(); }
inline bool Speculating() { return getpid() != g_program_pid; }

inline uint64_t Fnv(const void* data, size_t length, uint64_t hash = 1469598103934665603ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < length; ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  return hash;
}

[[noreturn]] inline void Die(const char* what) {
  perror(what);
  exit(2);
}

// The end of a program whose run-ahead disturbed what it shares: reads the rest of `dir`
// (`entries` names already seen, hashed into `names`), and prints the directory as the program
// saw it, fd's status flags and whether the program's flock on lock_path still holds.
inline void PrintSharedState(DIR* dir, long entries, uint64_t names, int fd,
                             const char* lock_path) {
  while (struct dirent* entry = readdir(dir)) {
    names = Fnv(entry->d_name, strlen(entry->d_name), names);
    ++entries;
  }
  printf("directory entries=%ld hash=%016llx\n", entries, (unsigned long long)names);
  int flags = fcntl(fd, F_GETFL);
  printf("status flags append=%d nonblock=%d\n", (flags & O_APPEND) != 0,
         (flags & O_NONBLOCK) != 0);
  int other = open(lock_path, O_RDONLY);
  int locked = flock(other, LOCK_EX | LOCK_NB);
  printf("lock still held by us: %s\n", locked != 0 && errno == EWOULDBLOCK ? "yes" : "no");
}

}  // namespace hazard
