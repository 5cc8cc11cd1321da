// BecomeSpeculativeChild: turning a fresh fork of the program into a sandboxed speculating child.
// See child.h. Runs before the sandbox exists, but still uses RawSyscall and no allocation: the
// fork may have happened while another thread of the program held the allocator's lock.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "speculate/child_state.h"
#include "speculate/raw_syscall.h"

namespace tipfs::spec::child {

namespace {

long Sys(long nr, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0, long a5 = 0) {
  return RawSyscall(nr, a1, a2, a3, a4, a5);
}

// mseal(2), Linux 6.10 (x86-64; Debian 12's headers predate it).
constexpr long kSysMseal = 462;

[[noreturn]] void FailStartup(long syscall_nr) { End(EndReason::kStartupFailed, syscall_nr); }

bool IsInherited(int fd) { return ((g_state.inherited_fds[fd / 64] >> (fd % 64)) & 1) != 0; }

// Lists the descriptors the child inherited into g_state.inherited_fds and returns the highest,
// or fails startup. The list is complete before any other descriptor is opened, so the child's
// own temporary descriptors never appear in it.
int ListInheritedDescriptors() {
  memset(g_state.inherited_fds, 0, sizeof(g_state.inherited_fds));
  long dir = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/proc/self/fd"),
                 O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) FailStartup(SYS_openat);
  int highest = -1;
  alignas(8) char buffer[4096];
  for (;;) {
    long n = Sys(SYS_getdents64, dir, reinterpret_cast<long>(buffer), sizeof(buffer));
    if (n < 0) FailStartup(SYS_getdents64);
    if (n == 0) break;
    for (long pos = 0; pos < n;) {
      auto* entry = reinterpret_cast<struct dirent64*>(buffer + pos);
      pos += entry->d_reclen;
      if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
      int64_t fd = 0;
      for (const char* c = entry->d_name; *c != '\0' && fd < kMaxFds; ++c) {
        fd = fd * 10 + (*c - '0');
      }
      if (fd == dir) continue;
      // A descriptor beyond the child's tables could not be kept away from the runtime.
      if (fd >= kMaxFds) FailStartup(SYS_getdents64);
      g_state.inherited_fds[fd / 64] |= uint64_t{1} << (fd % 64);
      if (fd > highest) highest = static_cast<int>(fd);
    }
  }
  Sys(SYS_close, dir);
  return highest;
}

// Hazard 1: remember every inherited descriptor, and where it stood at the fork (the program's
// snapshot; for a descriptor another thread of the program opened since, where it stands now).
// Every one must be recorded: a descriptor the child does not know it shares would later be
// taken for one of its own. Nothing is done to a shared description but reading its position.
// A pipe, socket, terminal or other stream the child inherited: it never reads one (a read ends
// speculation: the data is the program's) nor writes one (writes are swallowed), but holding it
// would keep the program's peers from seeing EOF or a hang-up once the program closes its end,
// for as long as the child lives (paused at its run-ahead bound, say). /dev/null takes the
// descriptor number, so that the program's later opens get the same numbers in the child as in
// the program; the Desc still says what the descriptor was.
void LetGoOfStream(int fd, long* null_fd) {
  if (*null_fd < 0) {
    *null_fd = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"), O_RDWR | O_CLOEXEC);
    if (*null_fd < 0) FailStartup(SYS_openat);
  }
  long fd_flags = Sys(SYS_fcntl, fd, F_GETFD);
  long cloexec = fd_flags >= 0 && (fd_flags & FD_CLOEXEC) ? O_CLOEXEC : 0;
  if (Sys(SYS_dup3, *null_fd, fd, cloexec) != fd) FailStartup(SYS_dup3);
}

void SnapshotInheritedDescriptors() {
  int highest = ListInheritedDescriptors();
  long null_fd = -1;
  for (int fd = 0; fd <= highest; ++fd) {
    if (!IsInherited(fd) || g_state.config.sink->OwnsFd(fd)) continue;
    Desc* d = NewDescFor(fd, /*inherited=*/true);
    if (d == nullptr) FailStartup(SYS_fstat);
    if (d->facts.kind == FdFacts::kOther) LetGoOfStream(fd, &null_fd);
    if (d->facts.kind != FdFacts::kRegular && d->facts.kind != FdFacts::kDirectory) continue;
    int64_t position = g_state.config.snapshot->Find(fd, d->facts.dev, d->facts.ino);
    if (position < 0) {
      position = d->facts.kind == FdFacts::kRegular ? Sys(SYS_lseek, fd, 0, SEEK_CUR)
                                                    : DirectoryPosition(fd);
    }
    if (position < 0) FailStartup(SYS_lseek);
    if (d->facts.kind == FdFacts::kRegular) d->offset = static_cast<uint64_t>(position);
    if (d->facts.kind == FdFacts::kDirectory) d->dir_pos = position;
  }
  if (null_fd >= 0) Sys(SYS_close, null_fd);  // its number may be a gap the program will fill
  // The runtime's private descriptors go above every inherited one; the sandbox lets it seek
  // nothing below (hazard 1 enforced by the kernel, not only by this code).
  g_state.private_fd_base = highest + 1 > kPrivateFdBase ? highest + 1 : kPrivateFdBase;
  // Room up there: the child's own descriptor limit (it shares no limit with the program).
  struct rlimit files;
  if (Sys(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, reinterpret_cast<long>(&files)) == 0 &&
      files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    Sys(SYS_prlimit64, 0, RLIMIT_NOFILE, reinterpret_cast<long>(&files), 0);
  }
}

// Hazard 2: stdout and stderr go to /dev/null (the writes are swallowed anyway).
void SilenceOutput() {
  long null_fd = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"), O_RDWR);
  if (null_fd < 0) FailStartup(SYS_openat);
  for (int fd = 1; fd <= 2; ++fd) {
    ForgetFd(fd);
    if (null_fd != fd) Sys(SYS_dup3, null_fd, fd, 0);
    NewDescFor(fd, /*inherited=*/false);
  }
  if (null_fd > 2) Sys(SYS_close, null_fd);
}

uint64_t ParseHex(const char*& p) {
  uint64_t value = 0;
  for (;; ++p) {
    char c = *p;
    if (c >= '0' && c <= '9') {
      value = value * 16 + (c - '0');
    } else if (c >= 'a' && c <= 'f') {
      value = value * 16 + (c - 'a' + 10);
    } else {
      return value;
    }
  }
}

// One /proc/self/maps line: "start-end perms ...". Shared mappings other than the hint log are
// remembered; writable ones become read-only, so a store cannot reach the program's memory or
// a file through them (the store faults and ends the child instead).
void ProtectSharedMapping(const char* line) {
  const char* p = line;
  uint64_t start = ParseHex(p);
  if (*p++ != '-') return;
  uint64_t end = ParseHex(p);
  if (*p++ != ' ') return;
  char perms[4] = {p[0], p[1], p[2], p[3]};
  if (perms[3] != 's') return;
  uint64_t log_start = reinterpret_cast<uint64_t>(g_state.config.log);
  if (start == log_start) return;
  // Untracked, a shared mapping could be made writable again: better not to speculate at all.
  if (g_state.shared_region_count >= kMaxSharedRegions) FailStartup(SYS_mprotect);
  g_state.shared_regions[g_state.shared_region_count++] = Region{start, end};
  if (perms[1] == 'w') {
    int prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[2] == 'x' ? PROT_EXEC : 0);
    // Left writable, a store would reach the program's memory or the file: no speculation then.
    if (Sys(SYS_mprotect, start, end - start, prot) != 0) FailStartup(SYS_mprotect);
  }
  // Sealed, no mprotect (not even one the SIGSYS handler issues by mistake), mremap or munmap
  // can make it writable again. Kernels before 6.10 have no mseal: the handler's check of
  // shared_regions is then the only guard.
  long sealed = Sys(kSysMseal, start, end - start, 0);
  if (sealed != 0 && sealed != -ENOSYS && sealed != -EINVAL) FailStartup(kSysMseal);
}

void ProtectSharedMappings() {
  long maps =
      Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/proc/self/maps"), O_RDONLY | O_CLOEXEC);
  if (maps < 0) FailStartup(SYS_openat);
  char buffer[8192];
  char line[512];
  size_t line_length = 0;
  for (;;) {
    long n = Sys(SYS_read, maps, reinterpret_cast<long>(buffer), sizeof(buffer));
    if (n <= 0) break;
    for (long i = 0; i < n; ++i) {
      if (buffer[i] == '\n') {
        line[line_length] = '\0';
        ProtectSharedMapping(line);
        line_length = 0;
      } else if (line_length + 1 < sizeof(line)) {
        line[line_length++] = buffer[i];
      }
    }
  }
  Sys(SYS_close, maps);
}

}  // namespace

}  // namespace tipfs::spec::child

namespace tipfs::spec {

void BecomeSpeculativeChild(const ChildConfig& config) {
  using namespace child;
  g_in_child = true;
  g_state.config = config;
  g_state.self_pid = static_cast<pid_t>(RawSyscall(SYS_getpid));
  g_state.skip_next_log = true;
  g_state.shared_region_count = 0;
  memset(g_state.fd_desc, 0, sizeof(g_state.fd_desc));
  for (auto& d : g_state.descs) d.used = false;

  // Hazard 5: never outlive the program's thread that forked us; never dump core.
  RawSyscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL);
  if (RawSyscall(SYS_getppid) != config.parent_pid) FailStartup(SYS_getppid);
  struct rlimit no_core = {0, 0};
  RawSyscall(SYS_prlimit64, 0, RLIMIT_CORE, reinterpret_cast<long>(&no_core), 0);
  RawSyscall(SYS_prctl, PR_SET_DUMPABLE, 0);
  // The program's pipes and sockets go first, still at the program's priority: at idle priority
  // on a busy machine the child may wait long for a CPU, and a peer for its EOF meanwhile.
  SnapshotInheritedDescriptors();
  // All of what follows concerns the child alone, and no code of the program runs before the
  // sandbox is in place: the program goes on reading meanwhile.
  struct sched_param idle = {};
  RawSyscall(SYS_sched_setscheduler, 0, SCHED_IDLE, reinterpret_cast<long>(&idle));
  RawSyscall(SYS_setpriority, PRIO_PROCESS, 0, 19);

  SilenceOutput();
  ProtectSharedMappings();
  InstallSigsysHandler();
  // Hazard 3: attached, the mount answers reads of uncached data with EAGAIN (after hinting them)
  // instead of filling any cache with data the child did not really read. Without the attach
  // the child must not read from the mount at all.
  // Waiting for data at first, for the read the program forked us at (see DoRead).
  long attached = config.sink->Attach(config.stream, config.epoch, /*wait_for_data=*/true);
  if (attached != 0) FailStartup(SYS_ioctl);
  long installed = InstallSandboxFilter(*config.filter, g_state.self_pid, g_state.private_fd_base);
  if (installed != 0) FailStartup(SYS_seccomp);
}

}  // namespace tipfs::spec
