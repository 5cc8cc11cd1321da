// Raw system calls issued from one known instruction inside libtipspec.
//
// The speculating child's seccomp filter lets a system call through only when its instruction
// pointer is the one right after the `syscall` instruction of RawSyscall; every other call site
// (the program, libc's internal reads, stdio) is trapped to the SIGSYS handler. This file owns
// that instruction. RawSyscall never touches errno and is async-signal-safe: it returns the
// kernel's result, a negative errno on failure. x86-64 only.
#pragma once

#include <sys/stat.h>

#include <cstdint>

namespace tipfs::spec {

extern "C" long tipspec_raw_syscall(long nr, long a1, long a2, long a3, long a4, long a5, long a6);

inline long RawSyscall(long nr, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0, long a5 = 0,
                       long a6 = 0) {
  return tipspec_raw_syscall(nr, a1, a2, a3, a4, a5, a6);
}

// fstat(2) through RawSyscall, except that atime may be the one the kernel holds: statx(2) with
// every basic field but atime. A FUSE kernel marks a file's atime stale after each read it sends
// to the daemon (an O_DIRECT read of a speculating child included), and fstat then waits for a
// GETATTR round trip to the daemon (on tipfs also a Stat of the file's disks for st_blocks);
// without atime in the mask the attributes the kernel holds answer while they are valid. Nothing
// here reads atime. Falls back to fstat where the kernel has no statx. 0 or a negative errno.
long RawFstatWithoutAtime(int fd, struct stat* st);
// The same for `path` relative to `dirfd`, as fstatat(2) with `flags` (AT_EMPTY_PATH and "": the
// descriptor itself).
long RawStatWithoutAtime(int dirfd, const char* path, int flags, struct stat* st);

// The address the kernel reports as seccomp_data.instruction_pointer for calls made through
// RawSyscall (the instruction after `syscall`).
uint64_t RawSyscallReturnAddress();

}  // namespace tipfs::spec
