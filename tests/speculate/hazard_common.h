// Shared helpers of the hazard programs that spec_hazard_test runs with and without libtipspec.
// Each program prints what it observed; the test compares the two outputs byte for byte.
// Speculating() is true only in a speculating child (whose getpid differs from the program's),
// so a program can put code on a path that only the run-ahead takes: if the sandbox or the
// shadow offsets failed, that code would change what the program itself later sees.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

}  // namespace hazard
