// MountWatch decides which open files are "on the mount" (their reads are speculated on and
// hinted); HintSink is where hints and cancellations go: ioctls to the tipfs mount, or, for
// tests on a plain directory, lines appended to a log file.
//
// Both are set up once in the program before any child is forked and are read-only afterwards
// (but for each mount's directory fd, set once by the first program thread that uses the mount),
// so every method may be called from any thread, and from the child's SIGSYS handler: they use
// RawSyscall only, no allocation, no errno, no locks.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "speculate/options.h"
#include "util/status.h"

struct tipfs_hint_paths;

namespace tipfs::spec {

inline constexpr long kFuseSuperMagic = 0x65735546;

// What fstat (and, in log mode, the path) says about an open descriptor.
struct FdFacts {
  enum Kind : uint8_t { kRegular, kDirectory, kMemoryDevice, kOther };
  Kind kind = kOther;
  bool watched = false;  // a regular file on the watched mount
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t size = 0;
  uint32_t rdev_minor = 0;  // kMemoryDevice: 3 null, 5 zero, 7 full, 8 random, 9 urandom
};

class MountWatch {
 public:
  static constexpr int kMaxMounts = 8;

  // Resolves the mount(s) to watch. With options.mount set, that directory (it must be a FUSE
  // mount unless options.hint_log is set); otherwise every fuse.tipfs mount in mountinfo.
  Status Init(const SpecOptions& options);

  // fstat-based classification. `path`, when not null, receives the file's path in log mode
  // (NUL-terminated, empty when unknown); it must hold kPathMax bytes.
  static constexpr int kPathMax = 4096;
  bool Classify(int fd, FdFacts* facts, char* path) const;
  // The index of the watched mount with device `dev`, or -1.
  int MountIndex(uint64_t dev) const;

  bool enabled() const { return mount_count_ > 0; }
  bool log_mode() const { return log_mode_; }
  int mount_count() const { return mount_count_; }
  const char* mount_path(int i) const { return mount_paths_[i]; }
  uint64_t mount_dev(int i) const { return devs_[i]; }

 private:
  bool PathUnderPrefix(const char* path) const;

  int mount_count_ = 0;
  uint64_t devs_[kMaxMounts] = {};
  char mount_paths_[kMaxMounts][kPathMax] = {};
  bool log_mode_ = false;  // plain-directory test mode: a path prefix narrows the device match
  char prefix_[kPathMax] = {};
  size_t prefix_length_ = 0;
};

class HintSink {
 public:
  // Opens the log file (log mode). A mount's directory fd is opened only when the program first
  // uses the mount (UseMount), so that a watched mount the program never touches is never
  // opened: one that cannot be (another user's, EACCES; a dead daemon's, ENOTCONN) costs
  // speculation on that mount only, and a stopped daemon's mount cannot hang the program's start.
  // The fds are close-on-exec and moved above the program's usual range.
  Status Init(const SpecOptions& options, const MountWatch& watch);

  // Program: opens mount `mount`'s directory fd if it is not open yet. False if it cannot be
  // opened (then never tried again: its files are read as unwatched). True in log mode.
  bool UseMount(int mount) const;
  // Child (no syscall): whether mount `mount` was opened before the fork. A child only speculates
  // on mounts the program has opened; a file on another one is read as unwatched.
  bool MountReady(int mount) const;

  // Child: declare itself speculating for `stream` (the program's tgid) in `epoch`; `tainted`:
  // its hints from now on are tainted (it read data it did not get). Returns 0 or a negative
  // errno. In log mode it writes "taint EPOCH" when `tainted`.
  long Attach(uint64_t stream, uint32_t epoch, bool wait_for_data, bool tainted = false) const;
  // Child: one speculative read of a watched file. In mount mode the attached read itself is the
  // hint, so this only writes the log line in log mode.
  void OnSpeculativeRead(uint32_t epoch, const FdFacts& facts, const char* path, uint64_t offset,
                         uint64_t length) const;
  // Program: drop every hint of `epoch` (speculation went off track or stopped), or with
  // `tainted_only` its tainted ones (the child ended: its clean hints are what the program will
  // read). Log mode: "cancel EPOCH" or "cancel EPOCH tainted".
  void Cancel(uint64_t stream, uint32_t epoch, bool tainted_only = false) const;

  // Program: the mount's count of hinted blocks the owner of `stream` consumed, by source (enum
  // tipfs_hint_source), summed over the watched mounts. False in log mode or when no mount
  // answers.
  bool QueryConsumed(uint64_t stream, uint64_t consumed[5]) const;

  // Program: path hints to mount `mount` (the MountWatch's index), as the calling process, whose
  // permissions the daemon checks. 0 or a negative errno (-ENODEV in log mode).
  long SendPathHints(int mount, const tipfs_hint_paths* request) const;
  // Program: drop every hint of the caller's `stream` on every mount.
  void CancelStream(uint64_t stream) const;

  int log_fd() const { return log_fd_; }
  bool OwnsFd(int fd) const;

 private:
  void WriteLine(const char* text, size_t length) const;
  // The open directory fd of mount `i`, or a negative value.
  int MountFd(int i) const { return mount_fds_[i].load(std::memory_order_acquire); }

  static constexpr int kNotOpened = -1;
  static constexpr int kUnusable = -2;

  bool log_mode_ = false;
  int log_fd_ = -1;
  const MountWatch* watch_ = nullptr;
  int mount_count_ = 0;
  // Set once each, by whichever program thread first uses the mount (compare-and-swap).
  mutable std::atomic<int> mount_fds_[MountWatch::kMaxMounts];
};

// Async-signal-safe text building for log lines and messages.
class LineBuilder {
 public:
  LineBuilder& Add(const char* text);
  LineBuilder& Add(uint64_t value);
  const char* data() const { return buffer_; }
  size_t size() const { return length_; }

 private:
  char buffer_[MountWatch::kPathMax + 256];
  size_t length_ = 0;
};

}  // namespace tipfs::spec
