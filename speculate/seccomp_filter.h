// The speculating child's sandbox: a seccomp-BPF allow-list, built once in the program (before
// any fork) and installed by each child before it runs ahead.
//
// Three classes of system calls, decided by the kernel on every call:
// - made by the program (any instruction pointer but RawSyscall's): calls that only affect the
//   child itself (brk, fstat, clock_gettime, private futex operations, ...) run; everything
//   else, including a futex operation on shared memory and every
//   read, lseek, getdents, write, open and close, traps with SIGSYS to the child's handler, which
//   emulates it safely (shadow offsets, hints, suppressed writes) or ends speculation;
// - made by libtipspec through RawSyscall: a second, short allow-list of what the handler needs,
//   with the arguments checked wherever a call could reach state the program shares: write only
//   to the hint log descriptor, openat only read-only, lseek and getdents64 only on the child's
//   private descriptors (so no file offset or directory position of the program can move, even
//   through a bug in the handler), fcntl and ioctl only with commands that read, signals and
//   prlimit64 only to the child itself, futex on shared memory only to wait and wake (the hint
//   log); anything else kills the child. (The inherited shared mappings are sealed at startup
//   where the kernel has mseal(2), so no mprotect from anywhere makes them writable again.)
// - another ABI (x32, i386): kills the child.
// Not thread-safe to build; the built program is immutable and shared by every child.
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "util/status.h"

namespace tipfs::spec {

struct SandboxFilter {
  static constexpr size_t kMaxInstructions = 1024;
  std::vector<sock_filter> program;
  // Instructions whose constant each child fills in for itself when it installs the filter.
  std::vector<uint32_t> self_pid_slots;
  std::vector<uint32_t> private_fd_base_slots;
};

// `trampoline_ip`: RawSyscallReturnAddress(). `log_fd`: the only descriptor RawSyscall may write
// to (-1: none).
Result<SandboxFilter> BuildSandboxFilter(uint64_t trampoline_ip, int log_fd);

// Installs `filter` on the calling thread (no_new_privs first), completed with the child's pid
// (the only target of its signals) and the lowest descriptor RawSyscall may lseek or getdents64.
// Async-signal-safe (patches a static copy: call from one thread at a time); returns 0 or a
// negative errno.
long InstallSandboxFilter(const SandboxFilter& filter, pid_t self_pid, int private_fd_base);

}  // namespace tipfs::spec
