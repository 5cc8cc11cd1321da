// See raw_syscall.h. The trampoline is written in assembly so that exactly one `syscall`
// instruction exists and its address is a symbol.
#include "speculate/raw_syscall.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include <cerrno>

#if !defined(__x86_64__)
#error "libtipspec supports x86-64 only (the seccomp filter checks x86-64 system call numbers)"
#endif

// SysV x86-64: nr in rdi, a1..a5 in rsi, rdx, rcx, r8, r9, a6 on the stack. The kernel wants the
// number in rax and arguments in rdi, rsi, rdx, r10, r8, r9.
asm(R"(
  .text
  .globl tipspec_raw_syscall
  .hidden tipspec_raw_syscall
  .type tipspec_raw_syscall, @function
tipspec_raw_syscall:
  movq %rdi, %rax
  movq %rsi, %rdi
  movq %rdx, %rsi
  movq %rcx, %rdx
  movq %r8, %r10
  movq %r9, %r8
  movq 8(%rsp), %r9
  syscall
  .globl tipspec_raw_syscall_return
  .hidden tipspec_raw_syscall_return
tipspec_raw_syscall_return:
  ret
  .size tipspec_raw_syscall, .-tipspec_raw_syscall
)");

extern "C" char tipspec_raw_syscall_return[];

namespace tipfs::spec {

long RawStatWithoutAtime(int dirfd, const char* path, int flags, struct stat* st) {
  struct statx stx;
  const long got = RawSyscall(SYS_statx, dirfd, reinterpret_cast<long>(path), flags,
                              STATX_BASIC_STATS & ~STATX_ATIME, reinterpret_cast<long>(&stx));
  if (got == -ENOSYS) {
    return RawSyscall(SYS_newfstatat, dirfd, reinterpret_cast<long>(path),
                      reinterpret_cast<long>(st), flags);
  }
  if (got != 0) return got;
  *st = {};
  st->st_dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
  st->st_ino = stx.stx_ino;
  st->st_mode = stx.stx_mode;
  st->st_nlink = stx.stx_nlink;
  st->st_uid = stx.stx_uid;
  st->st_gid = stx.stx_gid;
  st->st_rdev = makedev(stx.stx_rdev_major, stx.stx_rdev_minor);
  st->st_size = static_cast<off_t>(stx.stx_size);
  st->st_blksize = static_cast<blksize_t>(stx.stx_blksize);
  st->st_blocks = static_cast<blkcnt_t>(stx.stx_blocks);
  st->st_atim = {stx.stx_atime.tv_sec, stx.stx_atime.tv_nsec};
  st->st_mtim = {stx.stx_mtime.tv_sec, stx.stx_mtime.tv_nsec};
  st->st_ctim = {stx.stx_ctime.tv_sec, stx.stx_ctime.tv_nsec};
  return 0;
}

long RawFstatWithoutAtime(int fd, struct stat* st) {
  static const char kEmpty[] = "";
  return RawStatWithoutAtime(fd, kEmpty, AT_EMPTY_PATH, st);
}

uint64_t RawSyscallReturnAddress() {
  return reinterpret_cast<uint64_t>(&tipspec_raw_syscall_return[0]);
}

}  // namespace tipfs::spec
