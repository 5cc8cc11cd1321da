#include "speculate/mount_watch.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "speculate/raw_syscall.h"
#include "tipfs/hint.h"

namespace tipfs::spec {

namespace {

// Our own descriptors live high so they do not take the numbers a program expects from open().
constexpr int kPrivateFdBase = 900;

Result<int> MoveHigh(int fd) {
  int high = fcntl(fd, F_DUPFD_CLOEXEC, kPrivateFdBase);
  int err = errno;
  close(fd);
  if (high < 0) return ErrnoStatus("move descriptor above " + std::to_string(kPrivateFdBase), err);
  return high;
}

// Undo the octal escapes (\040 for space) of /proc/self/mountinfo fields.
std::string UnescapeMountField(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

}  // namespace

Status MountWatch::Init(const SpecOptions& options) {
  mount_count_ = 0;
  log_mode_ = !options.hint_log.empty();
  if (!options.mount.empty()) {
    struct stat st;
    if (stat(options.mount.c_str(), &st) != 0) {
      return ErrnoStatus("TIPSPEC_MOUNT " + options.mount);
    }
    if (!S_ISDIR(st.st_mode)) {
      return Status::FromErrno(ENOTDIR, "TIPSPEC_MOUNT " + options.mount + " is not a directory");
    }
    struct statfs sfs;
    if (statfs(options.mount.c_str(), &sfs) != 0) return ErrnoStatus("statfs " + options.mount);
    if (sfs.f_type != kFuseSuperMagic && !log_mode_) {
      return Status::FromErrno(ENODEV, "TIPSPEC_MOUNT " + options.mount +
                                           " is not a FUSE mount (set TIPSPEC_HINT_LOG to test "
                                           "on a plain directory)");
    }
    char resolved[PATH_MAX];
    if (realpath(options.mount.c_str(), resolved) == nullptr) {
      return ErrnoStatus("realpath " + options.mount);
    }
    devs_[0] = st.st_dev;
    snprintf(mount_paths_[0], kPathMax, "%s", resolved);
    mount_count_ = 1;
    if (log_mode_) {
      prefix_length_ = strlen(resolved);
      memcpy(prefix_, resolved, prefix_length_ + 1);
    }
    return Status::OK();
  }
  // Every tipfs mount: mountinfo fields are "id parent major:minor root mountpoint ... - type".
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mountinfo, line) && mount_count_ < kMaxMounts) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, mountpoint, field;
    fields >> id >> parent >> devno >> root >> mountpoint;
    while (fields >> field && field != "-") {
    }
    std::string type;
    fields >> type;
    if (type != "fuse.tipfs") continue;
    unsigned major_number = 0, minor_number = 0;
    if (sscanf(devno.c_str(), "%u:%u", &major_number, &minor_number) != 2) continue;
    devs_[mount_count_] = makedev(major_number, minor_number);
    snprintf(mount_paths_[mount_count_], kPathMax, "%s", UnescapeMountField(mountpoint).c_str());
    ++mount_count_;
  }
  return Status::OK();
}

int MountWatch::MountIndex(uint64_t dev) const {
  for (int i = 0; i < mount_count_; ++i) {
    if (devs_[i] == dev) return i;
  }
  return -1;
}

bool MountWatch::PathUnderPrefix(const char* path) const {
  if (strncmp(path, prefix_, prefix_length_) != 0) return false;
  return path[prefix_length_] == '/' || path[prefix_length_] == '\0';
}

bool MountWatch::Classify(int fd, FdFacts* facts, char* path) const {
  struct stat st;
  if (path != nullptr) path[0] = '\0';
  // Without atime: a file the speculating child has read ahead (O_DIRECT) has a stale atime,
  // and the program's classification of it at its first read would wait for a GETATTR.
  if (RawFstatWithoutAtime(fd, &st) != 0) return false;
  facts->dev = st.st_dev;
  facts->ino = st.st_ino;
  facts->size = static_cast<uint64_t>(st.st_size);
  facts->watched = false;
  facts->rdev_minor = 0;
  if (S_ISREG(st.st_mode)) {
    facts->kind = FdFacts::kRegular;
  } else if (S_ISDIR(st.st_mode)) {
    facts->kind = FdFacts::kDirectory;
  } else if (S_ISCHR(st.st_mode) && major(st.st_rdev) == 1) {
    facts->kind = FdFacts::kMemoryDevice;
    facts->rdev_minor = minor(st.st_rdev);
  } else {
    facts->kind = FdFacts::kOther;
  }
  if (facts->kind != FdFacts::kRegular || MountIndex(st.st_dev) < 0) return true;
  if (!log_mode_ && path == nullptr) {
    facts->watched = true;
    return true;
  }
  char local[kPathMax];
  char* target = path != nullptr ? path : local;
  LineBuilder link;
  link.Add("/proc/self/fd/").Add(static_cast<uint64_t>(fd));
  long n = RawSyscall(SYS_readlinkat, AT_FDCWD, reinterpret_cast<long>(link.data()),
                      reinterpret_cast<long>(target), kPathMax - 1);
  target[n > 0 ? n : 0] = '\0';
  facts->watched = !log_mode_ || (n > 0 && PathUnderPrefix(target));
  return true;
}

Status HintSink::Init(const SpecOptions& options, const MountWatch& watch) {
  log_mode_ = watch.log_mode();
  watch_ = &watch;
  mount_count_ = watch.mount_count();
  for (auto& fd : mount_fds_) fd.store(kNotOpened, std::memory_order_relaxed);
  if (!log_mode_) return Status::OK();
  int fd = open(options.hint_log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("open TIPSPEC_HINT_LOG " + options.hint_log);
  Result<int> high = MoveHigh(fd);
  if (!high.ok()) return high.status();
  log_fd_ = *high;
  return Status::OK();
}

bool HintSink::UseMount(int mount) const {
  if (log_mode_) return true;
  if (mount < 0 || mount >= mount_count_) return false;
  int current = MountFd(mount);
  if (current != kNotOpened) return current >= 0;
  // Raw calls: this runs inside the program's interposed read, where errno must not change.
  long fd = RawSyscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>(watch_->mount_path(mount)),
                       O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int opened = kUnusable;
  if (fd >= 0) {
    long high = RawSyscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, kPrivateFdBase);
    RawSyscall(SYS_close, fd);
    if (high >= 0) opened = static_cast<int>(high);
  }
  int expected = kNotOpened;
  if (!mount_fds_[mount].compare_exchange_strong(expected, opened, std::memory_order_acq_rel)) {
    if (opened >= 0) RawSyscall(SYS_close, opened);  // another thread opened it first
    return expected >= 0;
  }
  return opened >= 0;
}

bool HintSink::MountReady(int mount) const {
  if (log_mode_) return true;
  return mount >= 0 && mount < mount_count_ && MountFd(mount) >= 0;
}

bool HintSink::OwnsFd(int fd) const {
  if (fd < 0) return false;
  if (fd == log_fd_) return true;
  for (int i = 0; i < mount_count_; ++i) {
    if (MountFd(i) == fd) return true;
  }
  return false;
}

long HintSink::Attach(uint64_t stream, uint32_t epoch, bool wait_for_data, bool tainted) const {
  if (log_mode_) {
    if (tainted) {
      LineBuilder line;
      line.Add("taint ").Add(epoch).Add("\n");
      WriteLine(line.data(), line.size());
    }
    return 0;
  }
  struct tipfs_spec_attach attach;
  memset(&attach, 0, sizeof(attach));
  attach.header.version = TIPFS_HINT_VERSION;
  attach.header.source = tainted ? TIPFS_SOURCE_SPECULATIVE_TAINTED : TIPFS_SOURCE_SPECULATIVE;
  attach.header.stream = stream;
  attach.header.epoch = epoch;
  attach.wait_for_data = wait_for_data ? 1 : 0;
  for (int i = 0; i < mount_count_; ++i) {
    if (MountFd(i) < 0) continue;
    long rc =
        RawSyscall(SYS_ioctl, MountFd(i), TIPFS_IOC_SPEC_ATTACH, reinterpret_cast<long>(&attach));
    if (rc != 0) return rc;
  }
  return 0;
}

void HintSink::OnSpeculativeRead(uint32_t epoch, const FdFacts& facts, const char* path,
                                 uint64_t offset, uint64_t length) const {
  if (!log_mode_) return;
  LineBuilder line;
  line.Add("hint ").Add(epoch).Add(" ").Add(facts.ino).Add(" ").Add(offset).Add(" ").Add(length);
  line.Add(" ").Add(path != nullptr ? path : "").Add("\n");
  WriteLine(line.data(), line.size());
}

void HintSink::Cancel(uint64_t stream, uint32_t epoch, bool tainted_only) const {
  if (log_mode_) {
    LineBuilder line;
    line.Add("cancel ").Add(epoch).Add(tainted_only ? " tainted\n" : "\n");
    WriteLine(line.data(), line.size());
    return;
  }
  struct tipfs_cancel cancel;
  memset(&cancel, 0, sizeof(cancel));
  cancel.header.version = TIPFS_HINT_VERSION;
  cancel.header.source = TIPFS_SOURCE_SPECULATIVE;
  cancel.header.stream = stream;
  cancel.header.epoch = epoch;
  cancel.flags = TIPFS_CANCEL_EPOCH | (tainted_only ? TIPFS_CANCEL_TAINTED : 0);
  for (int i = 0; i < mount_count_; ++i) {
    if (MountFd(i) < 0) continue;
    RawSyscall(SYS_ioctl, MountFd(i), TIPFS_IOC_CANCEL, reinterpret_cast<long>(&cancel));
  }
}

bool HintSink::QueryConsumed(uint64_t stream, uint64_t consumed[5]) const {
  bool answered = false;
  for (int i = 0; i < 5; ++i) consumed[i] = 0;
  for (int m = 0; m < mount_count_; ++m) {
    if (MountFd(m) < 0) continue;
    struct tipfs_query query;
    memset(&query, 0, sizeof(query));
    query.header.version = TIPFS_HINT_VERSION;
    query.header.stream = stream;
    if (RawSyscall(SYS_ioctl, MountFd(m), TIPFS_IOC_QUERY, reinterpret_cast<long>(&query)) != 0) {
      continue;
    }
    answered = true;
    for (int i = 0; i < 5; ++i) consumed[i] += query.process_consumed[i];
  }
  return answered;
}

long HintSink::SendPathHints(int mount, const tipfs_hint_paths* request) const {
  if (log_mode_) return -ENODEV;
  if (!UseMount(mount)) return -ENODEV;
  return RawSyscall(SYS_ioctl, MountFd(mount), TIPFS_IOC_HINT_PATHS,
                    reinterpret_cast<long>(request));
}

void HintSink::CancelStream(uint64_t stream) const {
  struct tipfs_cancel cancel;
  memset(&cancel, 0, sizeof(cancel));
  cancel.header.version = TIPFS_HINT_VERSION;
  cancel.header.source = TIPFS_SOURCE_HISTORY;
  cancel.header.stream = stream;
  for (int i = 0; i < mount_count_; ++i) {
    if (MountFd(i) < 0) continue;
    RawSyscall(SYS_ioctl, MountFd(i), TIPFS_IOC_CANCEL, reinterpret_cast<long>(&cancel));
  }
}

void HintSink::WriteLine(const char* text, size_t length) const {
  if (log_fd_ >= 0) RawSyscall(SYS_write, log_fd_, reinterpret_cast<long>(text), length);
}

LineBuilder& LineBuilder::Add(const char* text) {
  while (*text != '\0' && length_ + 1 < sizeof(buffer_)) buffer_[length_++] = *text++;
  buffer_[length_] = '\0';
  return *this;
}

LineBuilder& LineBuilder::Add(uint64_t value) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  while (n > 0 && length_ + 1 < sizeof(buffer_)) buffer_[length_++] = digits[--n];
  buffer_[length_] = '\0';
  return *this;
}

}  // namespace tipfs::spec
