// The speculating child's SIGSYS handler: emulation of every system call the sandbox traps (the
// reads in child_reads.cc). See child.h for the rules; the hazards (DESIGN.md "speculate/") are
// named where handled.
#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <termios.h>
#include <ucontext.h>
#include <unistd.h>

#include "speculate/child_state.h"
#include "speculate/raw_syscall.h"

namespace tipfs::spec::child {

State g_state;
bool g_in_child = false;

namespace {

long Sys(long nr, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0, long a5 = 0, long a6 = 0) {
  return RawSyscall(nr, a1, a2, a3, a4, a5, a6);
}

}  // namespace

Desc* NewDescFor(int fd, bool inherited) {
  if (fd < 0 || fd >= kMaxFds) return nullptr;
  for (int i = 0; i < kMaxDescs; ++i) {
    Desc& d = g_state.descs[i];
    if (d.used) continue;
    d = Desc{};
    char* path = g_state.config.watch->log_mode() ? g_state.paths[i] : nullptr;
    if (!g_state.config.watch->Classify(fd, &d.facts, path)) return nullptr;
    // The child cannot open a mount for the program: a file on one the program has not used yet
    // is read as unwatched.
    if (d.facts.watched &&
        !g_state.config.sink->MountReady(g_state.config.watch->MountIndex(d.facts.dev))) {
      d.facts.watched = false;
    }
    d.used = true;
    d.inherited = inherited;
    d.private_fd = -1;
    d.wait_fd = -1;
    d.dir_pos = 0;
    d.refs = 1;
    g_state.fd_desc[fd] = static_cast<int16_t>(i + 1);
    return &d;
  }
  return nullptr;
}

Desc* DescFor(int fd) {
  if (fd < 0 || fd >= kMaxFds) return nullptr;
  int16_t index = g_state.fd_desc[fd];
  if (index > 0) return &g_state.descs[index - 1];
  // Not inherited (the snapshot has those) and not opened through our open emulation: made by
  // an allowed call such as pipe2 or eventfd2, so private to the child.
  return NewDescFor(fd, /*inherited=*/false);
}

void ForgetFd(int fd) {
  if (fd < 0 || fd >= kMaxFds) return;
  int16_t index = g_state.fd_desc[fd];
  g_state.fd_desc[fd] = 0;
  if (index <= 0) return;
  Desc& d = g_state.descs[index - 1];
  if (--d.refs == 0) {
    if (d.private_fd >= 0) Sys(SYS_close, d.private_fd);
    if (d.wait_fd >= 0) Sys(SYS_close, d.wait_fd);
    d.used = false;
  }
}

bool IsPrivateFd(int fd) {
  if (fd < g_state.private_fd_base) return false;
  for (const Desc& d : g_state.descs) {
    if (d.used && (d.private_fd == fd || d.wait_fd == fd)) return true;
  }
  return false;
}

static void MapFd(int fd, Desc* desc) {
  ForgetFd(fd);
  g_state.fd_desc[fd] = static_cast<int16_t>(desc - g_state.descs + 1);
  ++desc->refs;
}

void End(EndReason reason, long syscall_nr) {
  SharedLog* log = g_state.config.log;
  log->end_syscall.store(static_cast<uint32_t>(syscall_nr));
  log->end_reason.store(static_cast<uint32_t>(reason));
  log->ended.store(1, std::memory_order_release);
  log->appended_seq.fetch_add(0x10000);  // changes the words so a waiting program wakes
  log->reads_done_seq.fetch_add(0x10000);
  FutexWakeAll(&log->appended_seq);
  FutexWakeAll(&log->reads_done_seq);
  Sys(SYS_exit_group, 0);
  __builtin_unreachable();
}

namespace {

// /dev/null, zero, full, random and urandom: opened and read without effect on anyone.
bool IsEmulatedMemoryDevice(dev_t rdev) {
  unsigned minor_number = minor(rdev);
  return major(rdev) == 1 && (minor_number == 3 || minor_number == 5 || minor_number == 7 ||
                              minor_number == 8 || minor_number == 9);
}

long SumLengths(const struct iovec* iov, long count) {
  long total = 0;
  for (long i = 0; i < count; ++i) total += static_cast<long>(iov[i].iov_len);
  return total;
}

// A directory is read and sought through a private descriptor at or above private_fd_base, the
// only ones the sandbox lets the runtime lseek or getdents64: for an inherited directory a
// re-open, positioned where the program's description stood at the fork, so getdents never
// moves the program's position (hazard 1); for one the child opened, a duplicate of it.
int DirectoryFd(int fd, Desc* d) {
  if (d->private_fd >= 0) return d->private_fd;
  long source = fd;
  if (d->inherited) {
    LineBuilder path;
    path.Add("/proc/self/fd/").Add(static_cast<uint64_t>(fd));
    source = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path.data()),
                 O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (source < 0) return static_cast<int>(source);
  }
  long high = d->inherited ? MoveToPrivateFd(source)
                           : Sys(SYS_fcntl, source, F_DUPFD_CLOEXEC, g_state.private_fd_base);
  if (high < 0) return static_cast<int>(high);
  if (d->inherited && Sys(SYS_lseek, high, d->dir_pos, SEEK_SET) < 0) {
    Sys(SYS_close, high);
    return -EIO;
  }
  d->private_fd = static_cast<int>(high);
  return d->private_fd;
}

long DoLseek(int fd, int64_t offset, int whence) {
  Desc* d = DescFor(fd);
  if (d == nullptr) return -EBADF;
  if (d->facts.kind == FdFacts::kDirectory) {
    int dir_fd = DirectoryFd(fd, d);
    if (dir_fd < 0) return dir_fd;
    return Sys(SYS_lseek, dir_fd, offset, whence);
  }
  if (d->facts.kind == FdFacts::kMemoryDevice) return 0;
  if (d->facts.kind != FdFacts::kRegular) return -ESPIPE;
  int64_t size = static_cast<int64_t>(CurrentSize(fd, d));
  int64_t target;
  switch (whence) {
    case SEEK_SET:
      target = offset;
      break;
    case SEEK_CUR:
      target = static_cast<int64_t>(d->offset) + offset;
      break;
    case SEEK_END:
      target = size + offset;
      break;
    case SEEK_DATA:
      if (offset >= size) return -ENXIO;
      target = offset;
      break;
    case SEEK_HOLE:
      if (offset >= size) return -ENXIO;
      target = size;
      break;
    default:
      return -EINVAL;
  }
  if (target < 0) return -EINVAL;
  d->offset = static_cast<uint64_t>(target);
  return target;
}

long DoGetdents(int fd, long buffer, long length) {
  Desc* d = DescFor(fd);
  if (d == nullptr) return -EBADF;
  if (d->facts.kind != FdFacts::kDirectory) return -ENOTDIR;
  int dir_fd = DirectoryFd(fd, d);
  if (dir_fd < 0) return dir_fd;
  return Sys(SYS_getdents64, dir_fd, buffer, length);
}

long DoFcntl(int fd, long cmd, long arg) {
  Desc* d = DescFor(fd);
  if (d == nullptr) return -EBADF;
  switch (cmd) {
    case F_GETFD:
    case F_SETFD:
    case F_GETFL:
    case F_GETLK:
    case F_OFD_GETLK:
    case F_GETOWN:
    case F_GETSIG:
    case F_GETPIPE_SZ:
    case F_GET_SEALS:
    case F_GETLEASE:
    case F_GETOWN_EX:
      return Sys(SYS_fcntl, fd, cmd, arg);
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
      // Nothing of the program's goes up among the runtime's private descriptors.
      if (arg >= g_state.private_fd_base) return -EMFILE;
      long new_fd = Sys(SYS_fcntl, fd, cmd, arg);
      if (new_fd >= g_state.private_fd_base) {
        Sys(SYS_close, new_fd);
        return -EMFILE;
      }
      if (new_fd >= 0) MapFd(static_cast<int>(new_fd), d);
      return new_fd;
    }
    // Status flags, record locks, owners, leases and seals belong to the shared description
    // (or to the program): pretend they took effect.
    case F_SETFL:
    case F_SETLK:
    case F_SETLKW:
    case F_OFD_SETLK:
    case F_OFD_SETLKW:
    case F_SETOWN:
    case F_SETOWN_EX:
    case F_SETSIG:
    case F_SETLEASE:
    case F_NOTIFY:
    case F_SETPIPE_SZ:
    case F_ADD_SEALS:
      return 0;
    default:
      return -EINVAL;
  }
}

long DoDup(long nr, long old_fd, long new_fd, long flags) {
  Desc* d = DescFor(static_cast<int>(old_fd));
  if (d == nullptr) return -EBADF;
  if (g_state.config.sink->OwnsFd(static_cast<int>(new_fd))) return -EBUSY;
  // Nothing of the program's goes up among the runtime's private descriptors.
  if (nr != SYS_dup && (new_fd < 0 || new_fd >= g_state.private_fd_base)) return -EBADF;
  long result;
  if (nr == SYS_dup) {
    result = Sys(SYS_dup, old_fd);
    if (result >= g_state.private_fd_base) {
      Sys(SYS_close, result);
      return -EMFILE;
    }
  } else if (nr == SYS_dup2 && old_fd == new_fd) {
    return new_fd;
  } else {
    result = Sys(SYS_dup3, old_fd, new_fd, nr == SYS_dup3 ? flags : 0);
  }
  if (result >= 0) MapFd(static_cast<int>(result), d);
  return result;
}

// Opens are read-only in the child. A file opened for writing is opened read-only (reads see
// what is there, writes are swallowed); one that would be created is a /dev/null stand-in.
// The path is first opened with O_PATH, which has no effect on what it names, and only regular
// files, directories and the memory devices are then really opened (through /proc/self/fd):
// opening a FIFO would release a writer waiting in open(), and opening other devices can act.
long DoOpen(long dir_fd, long path, long flags) {
  constexpr long kWriteFlags = O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND | O_EXCL;
  bool creates = (flags & O_CREAT) != 0;
  bool temporary = (flags & __O_TMPFILE) == __O_TMPFILE;
  bool path_only = (flags & O_PATH) != 0;
  long probe_flags = O_PATH | (flags & (O_NOFOLLOW | O_DIRECTORY | (path_only ? O_CLOEXEC : 0)));
  long fd = temporary ? -ENOENT : Sys(SYS_openat, dir_fd, path, probe_flags);
  if (creates && (flags & O_EXCL) != 0 && fd >= 0) {
    Sys(SYS_close, fd);
    return -EEXIST;
  }
  bool discard = false;
  if (fd == -ENOENT && (creates || temporary)) {
    fd = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"), O_RDONLY | O_CLOEXEC);
    discard = true;
  } else if (fd >= 0 && !path_only) {
    struct stat st;
    if (RawFstatWithoutAtime(static_cast<int>(fd), &st) != 0) {
      Sys(SYS_close, fd);
      return -EIO;
    }
    if (S_ISLNK(st.st_mode)) {  // O_NOFOLLOW on a symbolic link: what open itself says
      Sys(SYS_close, fd);
      return -ELOOP;
    }
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) &&
        !(S_ISCHR(st.st_mode) && IsEmulatedMemoryDevice(st.st_rdev))) {
      Sys(SYS_close, fd);
      End(EndReason::kStreamRead, SYS_openat);
    }
    LineBuilder reopen;
    reopen.Add("/proc/self/fd/").Add(static_cast<uint64_t>(fd));
    long opened = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(reopen.data()),
                      flags & ~(kWriteFlags | O_NOFOLLOW));
    Sys(SYS_close, fd);
    // The probe held the lowest free number; the real descriptor should have it.
    if (opened > fd && Sys(SYS_dup3, opened, fd, flags & O_CLOEXEC) == fd) {
      Sys(SYS_close, opened);
      opened = fd;
    }
    fd = opened;
  }
  if (fd < 0) return fd;
  ForgetFd(static_cast<int>(fd));
  Desc* d = NewDescFor(static_cast<int>(fd), /*inherited=*/false);
  if (d == nullptr) {
    Sys(SYS_close, fd);
    return -EMFILE;
  }
  d->discard = discard;
  d->truncated = (flags & O_TRUNC) != 0 && (flags & O_ACCMODE) != O_RDONLY;
  return fd;
}

long DoClose(int fd) {
  if (g_state.config.sink->OwnsFd(fd)) return 0;  // the runtime's own descriptors stay open
  if (IsPrivateFd(fd)) return -EBADF;             // as far as the program knows, never open
  ForgetFd(fd);
  return Sys(SYS_close, fd);
}

long DoIoctl(long fd, long request, long arg) {
  switch (request) {
    case TCGETS:
    case TIOCGWINSZ:
    case TIOCGPGRP:
    case FIONREAD:
    case FS_IOC_GETFLAGS:
      return Sys(SYS_ioctl, fd, request, arg);
    default:
      return -ENOTTY;
  }
}

bool OverlapsSharedRegion(uint64_t start, uint64_t length) {
  for (int i = 0; i < g_state.shared_region_count; ++i) {
    const Region& r = g_state.shared_regions[i];
    if (start < r.end && start + length > r.start) return true;
  }
  return false;
}

long Emulate(long nr, const long* a) {
  switch (nr) {
    case SYS_read:
      return SingleRead(nr, a[0], a[1], a[2], -1);
    case SYS_pread64:
      if (a[3] < 0) return -EINVAL;
      return SingleRead(nr, a[0], a[1], a[2], a[3]);
    case SYS_readv:
      return DoRead(nr, static_cast<int>(a[0]), reinterpret_cast<const iovec*>(a[1]),
                    static_cast<int>(a[2]), -1);
    case SYS_preadv:
      if (a[3] < 0) return -EINVAL;
      [[fallthrough]];
    case SYS_preadv2:  // offset -1: the current (shadow) offset
      return DoRead(nr, static_cast<int>(a[0]), reinterpret_cast<const iovec*>(a[1]),
                    static_cast<int>(a[2]), a[3]);
    // Hazard 2: nothing the child writes leaves it.
    case SYS_write:
    case SYS_pwrite64:
      return DescFor(static_cast<int>(a[0])) != nullptr ? a[2] : -EBADF;
    case SYS_writev:
    case SYS_pwritev:
    case SYS_pwritev2:
      return DescFor(static_cast<int>(a[0])) != nullptr
                 ? SumLengths(reinterpret_cast<const iovec*>(a[1]), a[2])
                 : -EBADF;
    // Copies inside the kernel would write (and sendfile moves the input's shared offset): say
    // what a kernel says when it cannot do them, and programs (cat, cp) fall back to read and
    // write, which the child emulates.
    case SYS_copy_file_range:
      return -EXDEV;
    case SYS_sendfile:
    case SYS_splice:
    case SYS_tee:
      return -EINVAL;
    case SYS_fsync:
    case SYS_fdatasync:
    case SYS_syncfs:
    case SYS_sync:
    case SYS_fadvise64:
    case SYS_readahead:
      return 0;
    case SYS_lseek:
      return DoLseek(static_cast<int>(a[0]), a[1], static_cast<int>(a[2]));
    case SYS_getdents64:
      return DoGetdents(static_cast<int>(a[0]), a[1], a[2]);
    case SYS_getdents:
      return -ENOSYS;
    case SYS_fcntl:
      return DoFcntl(static_cast<int>(a[0]), a[1], a[2]);
    case SYS_flock:
      return DescFor(static_cast<int>(a[0])) != nullptr ? 0 : -EBADF;
    case SYS_ioctl:
      return DoIoctl(a[0], a[1], a[2]);
    case SYS_open:
      return DoOpen(AT_FDCWD, a[0], a[1]);
    case SYS_creat:
      return DoOpen(AT_FDCWD, a[0], O_CREAT | O_WRONLY | O_TRUNC);
    case SYS_openat:
      return DoOpen(a[0], a[1], a[2]);
    case SYS_openat2:
      return -ENOSYS;
    case SYS_close:
      return DoClose(static_cast<int>(a[0]));
    case SYS_close_range:
      return -ENOSYS;
    case SYS_dup:
    case SYS_dup2:
    case SYS_dup3:
      return DoDup(nr, a[0], a[1], a[2]);
    // Signals only to itself (raise, abort).
    case SYS_kill:
      if (a[0] == g_state.self_pid) return Sys(SYS_kill, a[0], a[1]);
      End(EndReason::kSignalToOther, nr);
    case SYS_tgkill:
      if (a[0] == g_state.self_pid) return Sys(SYS_tgkill, a[0], a[1], a[2]);
      End(EndReason::kSignalToOther, nr);
    case SYS_tkill:
      if (a[0] == g_state.self_pid) return Sys(SYS_tkill, a[0], a[1]);
      End(EndReason::kSignalToOther, nr);
    case SYS_rt_sigaction:
      if (a[0] == SIGSYS) return 0;  // the handler that keeps the child sandboxed stays
      return Sys(SYS_rt_sigaction, a[0], a[1], a[2], a[3]);
    case SYS_exit:
    case SYS_exit_group:
      g_state.config.log->exit_status.store(static_cast<uint32_t>(a[0]), std::memory_order_relaxed);
      End(EndReason::kProgramExit, nr);
    case SYS_prctl:
      return a[0] == PR_SET_NAME ? 0 : -EINVAL;
    case SYS_sched_setscheduler:
    case SYS_sched_setparam:
    case SYS_sched_setaffinity:
    case SYS_setpriority:
    case SYS_sched_setattr:
    case SYS_ioprio_set:
    case SYS_setrlimit:
      return 0;  // the child keeps its idle priority
    case SYS_prlimit64:
      if (a[0] == 0 || a[0] == g_state.self_pid) return Sys(SYS_prlimit64, 0, a[1], 0, a[3]);
      return -EPERM;
    case SYS_mmap:  // trapped only for shared mappings of files
      if ((a[3] & MAP_ANONYMOUS) != 0) return Sys(SYS_mmap, a[0], a[1], a[2], a[3], a[4], a[5]);
      if ((a[2] & PROT_WRITE) != 0) End(EndReason::kSharedMemoryWrite, nr);
      // Read-only, a private mapping shows the same bytes, and stays the child's own even if
      // the program later makes it writable.
      return Sys(SYS_mmap, a[0], a[1], a[2], (a[3] & ~long{MAP_SHARED_VALIDATE}) | MAP_PRIVATE,
                 a[4], a[5]);
    case SYS_mremap:  // moved, an inherited shared mapping would escape the mprotect check
      if (OverlapsSharedRegion(a[0], a[1])) End(EndReason::kSharedMemoryWrite, nr);
      return Sys(SYS_mremap, a[0], a[1], a[2], a[3], a[4]);
    case SYS_mprotect:  // trapped only when adding PROT_WRITE
      if (OverlapsSharedRegion(a[0], a[1])) End(EndReason::kSharedMemoryWrite, nr);
      return Sys(SYS_mprotect, a[0], a[1], a[2]);
    default:
      End(EndReason::kForbiddenSyscall, nr);
  }
}

void HandleSigsys(int, siginfo_t* info, void* context) {
  auto* uc = static_cast<ucontext_t*>(context);
  greg_t* regs = uc->uc_mcontext.gregs;
  long args[6] = {regs[REG_RDI], regs[REG_RSI], regs[REG_RDX],
                  regs[REG_R10], regs[REG_R8],  regs[REG_R9]};
  regs[REG_RAX] = Emulate(info->si_syscall, args);
}

}  // namespace

void InstallSigsysHandler() {
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_sigaction = HandleSigsys;
  action.sa_flags = SA_SIGINFO;
  sigfillset(&action.sa_mask);  // no program handler runs in the middle of an emulation
  sigaction(SIGSYS, &action, nullptr);
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, SIGSYS);
  sigprocmask(SIG_UNBLOCK, &unblock, nullptr);
}

}  // namespace tipfs::spec::child

namespace tipfs::spec {
bool InSpeculativeChild() { return child::g_in_child; }
}  // namespace tipfs::spec
