#include "speculate/seccomp_filter.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/fs.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <string>

#include "speculate/raw_syscall.h"
#include "tipfs/hint.h"

namespace tipfs::spec {

namespace {

// System calls the program may make in the child without our involvement: they read state or
// change only the child's own process (its memory, its signal mask, its timers, its cwd).
constexpr int kProgramAllowed[] = {
    SYS_brk,
    SYS_munmap,
    SYS_madvise,
    SYS_mincore,
    SYS_msync,
    SYS_fstat,
    SYS_newfstatat,
    SYS_stat,
    SYS_lstat,
    SYS_statx,
    SYS_access,
    SYS_faccessat,
    SYS_faccessat2,
    SYS_readlink,
    SYS_readlinkat,
    SYS_getcwd,
    SYS_chdir,
    SYS_fchdir,
    SYS_statfs,
    SYS_fstatfs,
    SYS_getxattr,
    SYS_lgetxattr,
    SYS_fgetxattr,
    SYS_listxattr,
    SYS_llistxattr,
    SYS_flistxattr,
    SYS_getpid,
    SYS_getppid,
    SYS_gettid,
    SYS_getuid,
    SYS_geteuid,
    SYS_getgid,
    SYS_getegid,
    SYS_getgroups,
    SYS_getresuid,
    SYS_getresgid,
    SYS_getpgrp,
    SYS_getpgid,
    SYS_getsid,
    SYS_uname,
    SYS_sysinfo,
    SYS_getrlimit,
    SYS_getrusage,
    SYS_times,
    SYS_clock_gettime,
    SYS_clock_getres,
    SYS_gettimeofday,
    SYS_time,
    SYS_nanosleep,
    SYS_clock_nanosleep,
    SYS_sched_yield,
    SYS_sched_getaffinity,
    SYS_sched_getparam,
    SYS_sched_getscheduler,
    SYS_getpriority,
    SYS_getrandom,
    SYS_rt_sigprocmask,
    SYS_rt_sigreturn,
    SYS_sigaltstack,
    SYS_rt_sigpending,
    SYS_rt_sigtimedwait,
    SYS_rt_sigsuspend,
    SYS_pause,
    SYS_set_robust_list,
    SYS_set_tid_address,
    SYS_arch_prctl,
    SYS_rseq,
    SYS_membarrier,
    SYS_poll,
    SYS_ppoll,
    SYS_select,
    SYS_pselect6,
    SYS_pipe,
    SYS_pipe2,
    SYS_eventfd2,
    SYS_umask,
    SYS_alarm,
    SYS_setitimer,
    SYS_getitimer,
    SYS_getcpu,
    SYS_timer_create,
    SYS_timer_settime,
    SYS_timer_gettime,
    SYS_timer_delete,
    SYS_mlock,
    SYS_munlock,
};

// What libtipspec's own runtime (the SIGSYS handler and the child's startup) issues with any
// arguments: calls that touch only the child (its memory, its descriptor table, its signal
// handlers) or read. pread64/preadv read at an explicit offset and never move one.
constexpr int kTrampolineAllowed[] = {
    SYS_pread64,     SYS_preadv,        SYS_close,        SYS_fstat,          SYS_newfstatat,
    SYS_readlinkat,  SYS_exit_group,    SYS_exit,         SYS_mmap,           SYS_munmap,
    SYS_mprotect,    SYS_mremap,        SYS_rt_sigaction, SYS_rt_sigprocmask, SYS_getpid,
    SYS_gettid,      SYS_getppid,       SYS_dup,          SYS_dup3,           SYS_getrandom,
    SYS_sched_yield, SYS_clock_gettime, SYS_statx,
};

// Futex operations the runtime may issue on shared memory (the hint log's words): waiting and
// waking only. Requeue, wake-op and the priority-inheritance operations could move the
// program's waiters or change its lock words; on private memory (FUTEX_PRIVATE_FLAG) every
// operation concerns the child alone.
constexpr uint32_t kTrampolineSharedFutex[] = {FUTEX_WAIT, FUTEX_WAKE, FUTEX_WAIT_BITSET,
                                               FUTEX_WAKE_BITSET};

// fcntl commands the runtime may issue: they read, or change only the child's descriptor table.
constexpr uint32_t kTrampolineFcntl[] = {
    F_GETFD,      F_SETFD,     F_GETFL,    F_GETLK,     F_OFD_GETLK, F_GETOWN,        F_GETSIG,
    F_GETPIPE_SZ, F_GET_SEALS, F_GETLEASE, F_GETOWN_EX, F_DUPFD,     F_DUPFD_CLOEXEC,
};

// ioctl requests the runtime may issue: on the program's behalf only ones that read; for itself
// the speculation attach, which changes nothing but how the mount treats this child's own reads
// (it re-attaches without waiting after the read it was forked at, which it must get right).
constexpr uint32_t kTrampolineIoctl[] = {
    TCGETS,
    TIOCGWINSZ,
    TIOCGPGRP,
    FIONREAD,
    static_cast<uint32_t>(FS_IOC_GETFLAGS),
    static_cast<uint32_t>(TIPFS_IOC_SPEC_ATTACH),
};

// Placeholders the child replaces (SandboxFilter::*_slots) before installing the filter.
constexpr uint32_t kSelfPidPlaceholder = 0xfffffff0u;
constexpr uint32_t kPrivateFdBasePlaceholder = 0xfffffff1u;

constexpr uint32_t kOffsetNr = offsetof(struct seccomp_data, nr);
constexpr uint32_t kOffsetArch = offsetof(struct seccomp_data, arch);
constexpr uint32_t kOffsetIpLow = offsetof(struct seccomp_data, instruction_pointer);
constexpr uint32_t kOffsetIpHigh = kOffsetIpLow + 4;
constexpr uint32_t ArgLow(int i) { return offsetof(struct seccomp_data, args) + 8 * i; }

// A classic-BPF assembler with forward labels (jumps are 8-bit forward offsets).
class BpfAssembler {
 public:
  using Label = int;
  static constexpr Label kNext = -1;

  Label NewLabel() {
    targets_.push_back(-1);
    return static_cast<Label>(targets_.size() - 1);
  }
  void Bind(Label label) { targets_[label] = static_cast<int>(code_.size()); }
  void Load(uint32_t offset) { Emit(BPF_LD | BPF_W | BPF_ABS, offset, kNext, kNext); }
  void JumpIfEqual(uint32_t k, Label yes, Label no = kNext) {
    Emit(BPF_JMP | BPF_JEQ | BPF_K, k, yes, no);
  }
  void JumpIfAnySet(uint32_t k, Label yes, Label no = kNext) {
    Emit(BPF_JMP | BPF_JSET | BPF_K, k, yes, no);
  }
  void JumpIfAtLeast(uint32_t k, Label yes, Label no = kNext) {
    Emit(BPF_JMP | BPF_JGE | BPF_K, k, yes, no);
  }
  void And(uint32_t k) { Emit(BPF_ALU | BPF_AND | BPF_K, k, kNext, kNext); }
  // The index of the next instruction (for constants patched after assembly).
  uint32_t Position() const { return static_cast<uint32_t>(code_.size()); }
  void Return(uint32_t action) { Emit(BPF_RET | BPF_K, action, kNext, kNext); }

  Result<std::vector<sock_filter>> Finish() {
    std::vector<sock_filter> out;
    for (size_t pc = 0; pc < code_.size(); ++pc) {
      sock_filter insn = code_[pc].insn;
      Result<uint8_t> jt = Offset(pc, code_[pc].yes);
      Result<uint8_t> jf = Offset(pc, code_[pc].no);
      if (!jt.ok()) return jt.status();
      if (!jf.ok()) return jf.status();
      insn.jt = *jt;
      insn.jf = *jf;
      out.push_back(insn);
    }
    return out;
  }

 private:
  struct Pending {
    sock_filter insn;
    Label yes;
    Label no;
  };
  void Emit(uint16_t code, uint32_t k, Label yes, Label no) {
    code_.push_back(Pending{sock_filter{code, 0, 0, k}, yes, no});
  }
  Result<uint8_t> Offset(size_t pc, Label label) {
    if (label == kNext) return static_cast<uint8_t>(0);
    int target = targets_[label];
    int distance = target - static_cast<int>(pc) - 1;
    if (target < 0 || distance < 0 || distance > 255) {
      return Status::InvalidArgument("sandbox filter: jump out of range at " + std::to_string(pc));
    }
    return static_cast<uint8_t>(distance);
  }

  std::vector<Pending> code_;
  std::vector<int> targets_;
};

}  // namespace

Result<SandboxFilter> BuildSandboxFilter(uint64_t trampoline_ip, int log_fd) {
  BpfAssembler a;
  SandboxFilter filter;
  auto kill = a.NewLabel();
  auto program = a.NewLabel();
  auto program_allow = a.NewLabel();
  auto program_trap = a.NewLabel();
  auto mmap_check = a.NewLabel();
  auto mprotect_check = a.NewLabel();
  auto write_check = a.NewLabel();
  auto openat_check = a.NewLabel();
  auto private_fd_check = a.NewLabel();
  auto fcntl_check = a.NewLabel();
  auto ioctl_check = a.NewLabel();
  auto self_check = a.NewLabel();
  auto futex_check = a.NewLabel();
  auto prlimit_check = a.NewLabel();
  auto program_futex_check = a.NewLabel();
  auto tramp_allow = a.NewLabel();
  auto tramp_kill = a.NewLabel();

  a.Load(kOffsetArch);
  a.JumpIfEqual(AUDIT_ARCH_X86_64, BpfAssembler::kNext, kill);
  a.Load(kOffsetNr);
  a.JumpIfAtLeast(0x40000000u /* __X32_SYSCALL_BIT */, kill);
  a.Load(kOffsetIpHigh);
  a.JumpIfEqual(static_cast<uint32_t>(trampoline_ip >> 32), BpfAssembler::kNext, program);
  a.Load(kOffsetIpLow);
  a.JumpIfEqual(static_cast<uint32_t>(trampoline_ip), BpfAssembler::kNext, program);

  // Calls from RawSyscall. Descriptor and command arguments are unsigned int in the kernel, so
  // their low 32 bits are all it looks at.
  a.Load(kOffsetNr);
  for (int nr : kTrampolineAllowed) a.JumpIfEqual(nr, tramp_allow);
  a.JumpIfEqual(SYS_write, write_check);
  a.JumpIfEqual(SYS_openat, openat_check);
  a.JumpIfEqual(SYS_lseek, private_fd_check);
  a.JumpIfEqual(SYS_getdents64, private_fd_check);
  a.JumpIfEqual(SYS_fcntl, fcntl_check);
  a.JumpIfEqual(SYS_ioctl, ioctl_check);
  a.JumpIfEqual(SYS_kill, self_check);
  a.JumpIfEqual(SYS_tgkill, self_check);
  a.JumpIfEqual(SYS_tkill, self_check);
  a.JumpIfEqual(SYS_futex, futex_check);
  a.JumpIfEqual(SYS_prlimit64, prlimit_check);
  a.Return(SECCOMP_RET_KILL_PROCESS);
  a.Bind(write_check);
  a.Load(ArgLow(0));
  a.JumpIfEqual(static_cast<uint32_t>(log_fd), tramp_allow, tramp_kill);
  a.Bind(openat_check);
  a.Load(ArgLow(2));
  // 020000000 is O_TMPFILE's own bit (glibc's __O_TMPFILE also includes O_DIRECTORY).
  a.JumpIfAnySet(O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | 020000000, tramp_kill,
                 tramp_allow);
  // Hazard 1: a file offset or directory position moves only on the child's own descriptors.
  a.Bind(private_fd_check);
  a.Load(ArgLow(0));
  filter.private_fd_base_slots.push_back(a.Position());
  a.JumpIfAtLeast(kPrivateFdBasePlaceholder, tramp_allow, tramp_kill);
  a.Bind(fcntl_check);
  a.Load(ArgLow(1));
  for (uint32_t cmd : kTrampolineFcntl) a.JumpIfEqual(cmd, tramp_allow);
  a.Return(SECCOMP_RET_KILL_PROCESS);
  a.Bind(ioctl_check);
  a.Load(ArgLow(1));
  for (uint32_t request : kTrampolineIoctl) a.JumpIfEqual(request, tramp_allow);
  a.Return(SECCOMP_RET_KILL_PROCESS);
  // kill(pid), tgkill(tgid, tid), tkill(tid): the child is single-threaded, so its tid is its pid.
  a.Bind(self_check);
  a.Load(ArgLow(0));
  filter.self_pid_slots.push_back(a.Position());
  a.JumpIfEqual(kSelfPidPlaceholder, tramp_allow, tramp_kill);
  a.Bind(futex_check);
  a.Load(ArgLow(1));
  a.JumpIfAnySet(FUTEX_PRIVATE_FLAG, tramp_allow);
  a.And(~static_cast<uint32_t>(FUTEX_CLOCK_REALTIME));
  for (uint32_t op : kTrampolineSharedFutex) a.JumpIfEqual(op, tramp_allow);
  a.Return(SECCOMP_RET_KILL_PROCESS);
  // prlimit64(pid, ...): only the child's own limits (0 or its own pid; the kernel reads a pid_t).
  a.Bind(prlimit_check);
  a.Load(ArgLow(0));
  a.JumpIfEqual(0, tramp_allow);
  filter.self_pid_slots.push_back(a.Position());
  a.JumpIfEqual(kSelfPidPlaceholder, tramp_allow, tramp_kill);
  a.Bind(tramp_allow);
  a.Return(SECCOMP_RET_ALLOW);
  a.Bind(tramp_kill);
  a.Return(SECCOMP_RET_KILL_PROCESS);

  // Calls from anywhere else.
  a.Bind(program);
  a.Load(kOffsetNr);
  for (int nr : kProgramAllowed) a.JumpIfEqual(nr, program_allow);
  a.JumpIfEqual(SYS_mmap, mmap_check);
  a.JumpIfEqual(SYS_mprotect, mprotect_check);
  a.JumpIfEqual(SYS_futex, program_futex_check);
  a.Return(SECCOMP_RET_TRAP);
  // futex: private operations concern the child's own memory; a shared one could wake, requeue
  // or change the program's waiters and locks: the handler decides (it ends the child).
  a.Bind(program_futex_check);
  a.Load(ArgLow(1));
  a.JumpIfAnySet(FUTEX_PRIVATE_FLAG, program_allow, program_trap);
  // mmap: a shared file mapping could carry writes out of the child (at once, or after an
  // mprotect or mremap): the handler decides. Private and shared anonymous memory is its own.
  a.Bind(mmap_check);
  a.Load(ArgLow(3));
  a.JumpIfAnySet(MAP_SHARED, BpfAssembler::kNext, program_allow);
  a.JumpIfAnySet(MAP_ANONYMOUS, program_allow, program_trap);
  // mprotect: making memory writable might reopen a shared mapping we made read-only.
  a.Bind(mprotect_check);
  a.Load(ArgLow(2));
  a.JumpIfAnySet(PROT_WRITE, program_trap, program_allow);
  a.Bind(program_trap);
  a.Return(SECCOMP_RET_TRAP);
  a.Bind(program_allow);
  a.Return(SECCOMP_RET_ALLOW);
  a.Bind(kill);
  a.Return(SECCOMP_RET_KILL_PROCESS);

  Result<std::vector<sock_filter>> code = a.Finish();
  if (!code.ok()) return code.status();
  if (code->size() > SandboxFilter::kMaxInstructions) {
    return Status::InvalidArgument("sandbox filter: " + std::to_string(code->size()) +
                                   " instructions, more than the child's copy holds");
  }
  filter.program = std::move(*code);
  return filter;
}

long InstallSandboxFilter(const SandboxFilter& filter, pid_t self_pid, int private_fd_base) {
  // The child's own copy: the parent's filter is shared by every child it forks.
  static sock_filter patched[SandboxFilter::kMaxInstructions];
  size_t length = filter.program.size();
  if (length == 0 || length > SandboxFilter::kMaxInstructions || self_pid <= 0 ||
      private_fd_base <= 0) {
    return -EINVAL;
  }
  memcpy(patched, filter.program.data(), length * sizeof(sock_filter));
  for (uint32_t slot : filter.self_pid_slots) patched[slot].k = static_cast<uint32_t>(self_pid);
  for (uint32_t slot : filter.private_fd_base_slots) {
    patched[slot].k = static_cast<uint32_t>(private_fd_base);
  }
  long rc = RawSyscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  if (rc != 0) return rc;
  struct sock_fprog prog;
  prog.len = static_cast<unsigned short>(length);
  prog.filter = patched;
  return RawSyscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, reinterpret_cast<long>(&prog));
}

}  // namespace tipfs::spec
