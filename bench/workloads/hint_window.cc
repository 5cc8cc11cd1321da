#include "bench/workloads/hint_window.h"

#include <sys/ioctl.h>
#include <tipfs/hint.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

namespace tipfs::bench {
namespace {

// What a file system that is not tipfs answers to an ioctl it does not know.
bool MeansNotTipfs(int err) { return err == ENOTTY || err == ENOSYS || err == EOPNOTSUPP; }

// Errors about an item itself (a path missing or outside the mount, a bad range or descriptor),
// as opposed to the file system having no room for more hints right now.
bool RejectsTheItem(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
    case EISDIR:
    case ELOOP:
    case ENAMETOOLONG:
    case EXDEV:
    case EACCES:
    case EPERM:
    case EBADF:
    case EINVAL:
    case EOVERFLOW:
    case ERANGE:
      return true;
    default:
      return false;
  }
}

size_t PathRecordBytes(const std::string& path) {
  return sizeof(struct tipfs_path_record) + ((path.size() + 7) & ~size_t{7});
}

void FillHeader(tipfs_hint_header* header, uint32_t count) {
  header->version = TIPFS_HINT_VERSION;
  header->source = TIPFS_SOURCE_MANUAL;
  header->stream = TIPFS_STREAM_SELF;
  header->epoch = 0;
  header->count = count;
}

}  // namespace

HintWindow::HintWindow(std::string program, int mount_fd)
    : HintWindow(std::move(program), mount_fd, [](int fd, unsigned long request, void* argument) {
        return ::ioctl(fd, request, argument);
      }) {}

HintWindow::HintWindow(std::string program, int mount_fd, IoctlCall ioctl_call)
    : program_(std::move(program)), mount_fd_(mount_fd), ioctl_call_(std::move(ioctl_call)) {}

void HintWindow::AddPath(const std::string& absolute_path, uint64_t offset, uint64_t length) {
  if (!active_ || length == 0) return;
  queue_.push_back(Item{true, -1, absolute_path, offset, length});
}

void HintWindow::AddFd(int fd, uint64_t offset, uint64_t length) {
  if (!active_ || length == 0) return;
  queue_.push_back(Item{false, fd, std::string(), offset, length});
}

void HintWindow::WarnOnce(bool* warned, const std::string& message) {
  if (*warned) return;
  *warned = true;
  std::fprintf(stderr, "%s: warning: %s\n", program_.c_str(), message.c_str());
}

void HintWindow::QueryCapOnce() {
  if (cap_queried_) return;
  cap_queried_ = true;
  struct tipfs_query query;
  std::memset(&query, 0, sizeof query);
  FillHeader(&query.header, 0);
  if (ioctl_call_(mount_fd_, TIPFS_IOC_QUERY, &query) == 0) {
    cap_bytes_ = query.stream_cap_bytes;
    return;
  }
  int err = errno;
  if (MeansNotTipfs(err)) {
    active_ = false;
    queue_.clear();
    WarnOnce(&warned_unsupported_, std::string("hints not supported here (TIPFS_IOC_QUERY: ") +
                                       std::strerror(err) + "); running without hints");
  }
  // Any other error: the cap is unknown; refusals will tell.
}

size_t HintWindow::NextBatchSize(uint64_t budget) const {
  const Item& first = queue_.front();
  size_t limit = single_item_calls_left_ > 0 ? 1 : queue_.size();
  size_t n = 0;
  uint64_t bytes = 0;
  size_t record_bytes = 0;
  while (n < limit) {
    const Item& item = queue_[n];
    if (item.by_path != first.by_path) break;
    if (!item.by_path && (item.fd != first.fd || n == TIPFS_FD_SEGMENTS_MAX)) break;
    if (item.by_path) {
      size_t need = PathRecordBytes(item.path);
      if (record_bytes + need > TIPFS_PATH_RECORDS_BYTES) break;
      record_bytes += need;
    }
    if (n > 0 && bytes + item.length > budget) break;
    bytes += item.length;
    ++n;
  }
  return std::max<size_t>(n, 1);
}

int HintWindow::SendBatch(size_t n) {
  ++calls_;
  int rc;
  if (queue_.front().by_path) {
    auto request = std::make_unique<struct tipfs_hint_paths>();
    std::memset(request.get(), 0, sizeof *request);
    FillHeader(&request->header, static_cast<uint32_t>(n));
    size_t used = 0;
    for (size_t i = 0; i < n; ++i) {
      const Item& item = queue_[i];
      struct tipfs_path_record record {
        item.offset, item.length, static_cast<uint32_t>(item.path.size()), 0
      };
      std::memcpy(request->records + used, &record, sizeof record);
      std::memcpy(request->records + used + sizeof record, item.path.data(), item.path.size());
      used += PathRecordBytes(item.path);  // the padding is already zero
    }
    request->bytes = static_cast<uint32_t>(used);
    rc = ioctl_call_(mount_fd_, TIPFS_IOC_HINT_PATHS, request.get());
  } else {
    auto request = std::make_unique<struct tipfs_hint_fd>();
    std::memset(request.get(), 0, sizeof *request);
    FillHeader(&request->header, static_cast<uint32_t>(n));
    for (size_t i = 0; i < n; ++i) {
      request->segments[i] = tipfs_segment{queue_[i].offset, queue_[i].length};
    }
    rc = ioctl_call_(queue_.front().fd, TIPFS_IOC_HINT_FD, request.get());
  }
  return rc == 0 ? 0 : errno;
}

void HintWindow::HandleRefusal(int err, size_t batch_items) {
  if (MeansNotTipfs(err) || err == EPROTO) {
    active_ = false;
    queue_.clear();
    WarnOnce(&warned_unsupported_,
             std::string(err == EPROTO ? "the mount does not take hint ABI version 1 ("
                                       : "hints not supported here (") +
                 std::strerror(err) + "); running without hints");
    return;
  }
  ++refused_;
  WarnOnce(&warned_refused_, std::string("a hint call was refused (") + std::strerror(err) +
                                 "); disclosing in smaller steps");
  const uint64_t outstanding = disclosed_ - consumed_;
  if (!RejectsTheItem(err) && outstanding > 0) {
    // Most likely the per-process cap on outstanding hinted bytes: wait for the reads to
    // consume half of what is out, then try again.
    waiting_for_progress_ = true;
    retry_when_outstanding_at_most_ = outstanding / 2;
  } else if (batch_items > 1) {
    single_item_calls_left_ = batch_items;  // find the item the file system objects to
  } else {
    // One item refused on its own merits, or too large with nothing outstanding: a missing
    // path, a range the file system rejects, a single read larger than the cap. Skip it.
    queue_.pop_front();
    ++dropped_;
    if (single_item_calls_left_ > 0) --single_item_calls_left_;
    WarnOnce(&warned_dropped_, std::string("a hint was dropped (") + std::strerror(err) + ")");
  }
}

void HintWindow::Disclose() {
  if (!active_ || queue_.empty()) return;
  QueryCapOnce();
  while (active_ && !queue_.empty() && !waiting_for_progress_) {
    uint64_t outstanding = disclosed_ - consumed_;
    uint64_t budget = std::numeric_limits<uint64_t>::max();
    if (cap_bytes_ > 0) {
      // Keep a margin: the file system may count whole blocks where we count bytes.
      uint64_t limit = cap_bytes_ - cap_bytes_ / 8;
      if (outstanding >= limit) break;
      budget = limit - outstanding;
      if (queue_.front().length > budget && outstanding > 0) break;  // wait for room
    }
    size_t n = NextBatchSize(budget);
    int err = SendBatch(n);
    if (err != 0) {
      HandleRefusal(err, n);
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      disclosed_ += queue_.front().length;
      queue_.pop_front();
    }
    if (single_item_calls_left_ > 0) --single_item_calls_left_;
  }
}

void HintWindow::Consumed(uint64_t bytes) {
  consumed_ = std::min(disclosed_, consumed_ + bytes);
  if (!active_ || queue_.empty()) return;
  uint64_t outstanding = disclosed_ - consumed_;
  if (waiting_for_progress_) {
    if (outstanding > retry_when_outstanding_at_most_) return;
    waiting_for_progress_ = false;
  } else if (cap_bytes_ > 0 && outstanding > cap_bytes_ / 2) {
    return;  // top up in large steps, not one ioctl per read
  }
  Disclose();
}

std::string HintWindow::Summary() const {
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "hints=%s hint_calls=%llu hinted_bytes=%llu refused=%llu dropped=%llu cap=%llu",
      active_ ? "on" : "off", static_cast<unsigned long long>(calls_),
      static_cast<unsigned long long>(disclosed_), static_cast<unsigned long long>(refused_),
      static_cast<unsigned long long>(dropped_), static_cast<unsigned long long>(cap_bytes_));
  return buf;
}

}  // namespace tipfs::bench
