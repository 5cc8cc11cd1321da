// See raw_syscall.h. The trampoline is written in assembly so that exactly one `syscall`
// instruction exists and its address is a symbol.
#include "speculate/raw_syscall.h"

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

uint64_t RawSyscallReturnAddress() {
  return reinterpret_cast<uint64_t>(&tipspec_raw_syscall_return[0]);
}

}  // namespace tipfs::spec
