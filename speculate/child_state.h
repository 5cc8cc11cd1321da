// Private to the speculating child (child_startup.cc, child_syscalls.cc): its view of the
// descriptors it inherited or opened, and the regions of memory it shares with the program.
// Touched only by the child's single thread, mostly from the SIGSYS handler; fixed-size arrays,
// no allocation.
#pragma once

#include <sys/uio.h>

#include <cstdint>

#include "speculate/child.h"
#include "speculate/mount_watch.h"
#include "speculate/read_predictor.h"

namespace tipfs::spec::child {

// One open file description as the child sees it. Descriptors that share a description in the
// child (dup) share a Desc, and so its shadow offset.
struct Desc {
  bool used;
  bool inherited;  // shared with the program: never move its kernel offset or flags
  bool discard;    // opened for writing a file that does not exist: a /dev/null stand-in
  bool truncated;  // opened with O_TRUNC: reads see an empty file
  FdFacts facts;
  uint64_t offset;  // the shadow offset of a regular file
  int64_t dir_pos;  // an inherited directory's position at the fork
  // The descriptor getdents64 and lseek of a directory go to: a private re-open of an inherited
  // directory, or a high duplicate of one the child opened. For a watched file, the one its
  // reads that do not wait go to: a private re-open with O_DIRECT|O_NONBLOCK, and `wait_fd`
  // the one for reads that wait, with O_DIRECT only (see ReadFd in child_reads.cc). -1 until
  // first needed, kNoPrivateFd when a watched file could not be re-opened. Always at or above
  // State::private_fd_base, the only descriptors the sandbox lets the runtime seek.
  int private_fd;
  int wait_fd;
  uint32_t refs;
  // Reads through this description per read site, for the last kSiteCounts sites it was read
  // from: a read's ordinal among its file's reads at its site (read_predictor.h). Not counted on
  // an inherited description (the program's reads before the fork are not known).
  static constexpr int kSiteCounts = 4;
  struct SiteCount {
    uint64_t site;
    uint32_t reads;
  };
  SiteCount site_counts[kSiteCounts];
  uint32_t site_count_next;  // the slot a new site takes
};

inline constexpr int kMaxFds = 65536;
inline constexpr int kMaxDescs = 1024;
inline constexpr int kMaxSharedRegions = 128;
// Private descriptors of the child's runtime live at or above this (or above the highest
// inherited descriptor, whichever is higher), out of the program's usual range.
inline constexpr int kPrivateFdBase = 1000;
inline constexpr int kNoPrivateFd = -2;

struct Region {
  uint64_t start;
  uint64_t end;
};

struct State {
  ChildConfig config;
  pid_t self_pid;
  // Every descriptor at or above this is one the child made itself: no inherited description
  // lives there (startup checks), and the program's dup/F_DUPFD may not put one there. The
  // sandbox lets the runtime lseek and getdents64 only these (hazard 1, kernel-enforced).
  int private_fd_base;
  uint64_t inherited_fds[kMaxFds / 64];  // startup scratch: the descriptors listed at the fork
  bool skip_next_log;                    // the read the program itself is doing at the fork point
  bool attach_no_wait;       // attached without waiting (only where no private O_DIRECT fd exists)
  int16_t fd_desc[kMaxFds];  // desc index + 1; 0 = not known yet
  Desc descs[kMaxDescs];
  char paths[kMaxDescs][MountWatch::kPathMax];  // log mode only
  Region shared_regions[kMaxSharedRegions];
  int shared_region_count;
  ReadPredictor predictor;  // real reads at learned sites, for reads there without data
};

extern State g_state;
extern bool g_in_child;

// Returns the Desc of `fd`, classifying an fd the child has not seen yet; null if fd is not open.
Desc* DescFor(int fd);
// A fresh Desc for `fd` from fstat; null when the pool is full or fstat fails.
Desc* NewDescFor(int fd, bool inherited);
// Drops fd's reference to its Desc.
void ForgetFd(int fd);
// True when fd is one of the runtime's private descriptors (directory re-opens).
bool IsPrivateFd(int fd);
// Stops speculating: records why in the shared log, wakes the program, exits.
[[noreturn]] void End(EndReason reason, long syscall_nr);

void InstallSigsysHandler();

// The read path (child_reads.cc). `explicit_offset` < 0: read at (and advance) the shadow
// offset. Each returns what the system call would (a negative errno on failure).
long DoRead(long nr, int fd, const struct iovec* iov, int iov_count, int64_t explicit_offset);
long SingleRead(long nr, long fd, long buffer, long length, int64_t explicit_offset);
// The size of a regular file as the child sees it (0 once it opened it with O_TRUNC).
uint64_t CurrentSize(int fd, const Desc* d);
// A high private duplicate of `source` (which is closed), or a negative errno.
long MoveToPrivateFd(long source);

}  // namespace tipfs::spec::child
