// The speculating child's sandbox: a seccomp-BPF allow-list, built once in the program (before
// any fork) and installed by each child before it runs ahead.
//
// Three classes of system calls, decided by the kernel on every call:
// - made by the program (any instruction pointer but RawSyscall's): calls that only affect the
//   child itself (brk, fstat, clock_gettime, futex, ...) run; everything else, including every
//   read, lseek, getdents, write, open and close, traps with SIGSYS to the child's handler, which
//   emulates it safely (shadow offsets, hints, suppressed writes) or ends speculation;
// - made by libtipspec through RawSyscall: a second, short allow-list of what the handler needs;
//   write only to the hint log descriptor, openat only read-only; anything else kills the child;
// - another ABI (x32, i386): kills the child.
// Not thread-safe to build; the built program is immutable and shared by every child.
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <vector>

#include "util/status.h"

namespace tipfs::spec {

struct SandboxFilter {
  std::vector<sock_filter> program;
};

// `trampoline_ip`: RawSyscallReturnAddress(). `log_fd`: the only descriptor RawSyscall may write
// to (-1: none).
Result<SandboxFilter> BuildSandboxFilter(uint64_t trampoline_ip, int log_fd);

// Installs `filter` on the calling thread (no_new_privs first). Async-signal-safe; returns 0 or
// a negative errno.
long InstallSandboxFilter(const SandboxFilter& filter);

}  // namespace tipfs::spec
