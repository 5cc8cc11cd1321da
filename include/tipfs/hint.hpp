// tipfs/hint.hpp: a thin C++ wrapper over the hint helpers of tipfs/hint.h (see tipfs_hint(3)).
// Header-only. No exceptions: every call returns 0 or the errno the mount answered with
// (EDQUOT over the per-process cap, ENOENT for a missing path, ...). A Hinter belongs to one
// thread at a time.
//
//   tipfs::Hinter hinter(dirfd);             // any open file or directory of the mount
//   for (const auto& name : files) hinter.Path(name);
//   if (int err = hinter.Flush()) ...;       // buffered path hints go out in ~16 KiB batches
#pragma once

#include <cerrno>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "tipfs/hint.h"

namespace tipfs {

class Hinter {
 public:
  // `fd`: an open file or directory inside the mount. Hints go to `stream` (the caller's own by
  // default) with `source` and `epoch`.
  explicit Hinter(int fd, uint64_t stream = TIPFS_STREAM_SELF,
                  uint32_t source = TIPFS_SOURCE_MANUAL, uint32_t epoch = 0)
      : fd_(fd), stream_(stream), source_(source), epoch_(epoch) {}
  // Sends path hints still buffered; an error there is lost (call Flush to see it).
  ~Hinter() { Flush(); }
  Hinter(const Hinter&) = delete;
  Hinter& operator=(const Hinter&) = delete;

  // Ranges of the file open on `file_fd`, in the order they will be read (length 0: to end of
  // file). Sent at once.
  int Ranges(int file_fd, std::span<const tipfs_segment> segments) const {
    return Errno(tipfs_hint_segments_stream(file_fd, stream_, source_, epoch_, segments.data(),
                                            segments.size()));
  }
  int Range(int file_fd, uint64_t offset, uint64_t length = 0) const {
    const tipfs_segment segment{offset, length};
    return Ranges(file_fd, std::span<const tipfs_segment>(&segment, 1));
  }

  // A file by path (absolute inside the mount, or relative to its root), for files not opened
  // yet. Buffered; sent when the buffer is full and by Flush. Order is kept.
  int Path(std::string_view path, uint64_t offset = 0, uint64_t length = 0) {
    if (!paths_) {
      paths_ = std::make_unique<tipfs_hint_paths>();
      tipfs_hint_paths_init(paths_.get(), source_, stream_, epoch_);
    }
    const std::string name(path);
    if (tipfs_hint_paths_add(paths_.get(), name.c_str(), offset, length) == 0) return 0;
    if (errno != ENOSPC) return errno;
    if (int err = Flush()) return err;
    return Errno(tipfs_hint_paths_add(paths_.get(), name.c_str(), offset, length));
  }
  int Flush() {
    if (!paths_) return 0;
    return Errno(tipfs_hint_paths_send(fd_, paths_.get()));
  }

  // Drops this hinter's stream (all of it, or one epoch), or every stream of the process.
  int Cancel() const { return Errno(tipfs_hint_cancel(fd_, stream_)); }
  int CancelEpoch(uint32_t epoch) const {
    return Errno(tipfs_hint_cancel_epoch(fd_, stream_, epoch));
  }
  int CancelAll() const { return Errno(tipfs_hint_cancel_all(fd_)); }

  // Lets this process's descendants of the same user consume the stream (TIPFS_IOC_SHARE), or
  // stops it.
  int Share(bool shared = true) const {
    return Errno(tipfs_hint_share(fd_, stream_, shared ? TIPFS_SHARE_DESCENDANTS : 0u));
  }

  // The stream's state and the mount's cache counters.
  int Query(tipfs_query* out) const { return Errno(tipfs_hint_query(fd_, stream_, out)); }

 private:
  static int Errno(int rc) { return rc == 0 ? 0 : errno; }

  const int fd_;
  const uint64_t stream_;
  const uint32_t source_;
  const uint32_t epoch_;
  std::unique_ptr<tipfs_hint_paths> paths_;
};

}  // namespace tipfs
