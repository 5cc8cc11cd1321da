#include "stripe/disk_health.h"

#include <time.h>

#include <cstdio>

#include "util/mutex.h"
#include "util/statistics.h"

namespace tipfs::stripe {

namespace {

bool IsFailure(int err, bool stat_of_object) {
  switch (err) {
    case EIO:
    case ENXIO:
    case ENODEV:
    case ESTALE:
    case ENOTCONN:
    case EUCLEAN:
      return true;
    case ENOENT:
    case ENOTDIR:
      return !stat_of_object;  // a missing object is no error; a missing objects/ tree is
    default:
      return false;
  }
}

// Stores false only into a flag that is set: a success leaves the slots' cache line unwritten.
void Clear(std::atomic<bool>& flag) {
  if (flag.load(std::memory_order_relaxed)) flag.store(false, std::memory_order_relaxed);
}

int64_t UnixNanos() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1'000'000'000ll + ts.tv_nsec;
}

}  // namespace

const char* DiskStateName(DiskState state) {
  switch (state) {
    case DiskState::kHealthy:
      return "healthy";
    case DiskState::kFull:
      return "full";
    case DiskState::kReadOnly:
      return "read-only";
    case DiskState::kFailed:
      return "failed";
  }
  return "unknown";
}

void DiskHealthBoard::Record(uint32_t disk, bool write, bool disk_wide, const Status& status,
                             bool proves) {
  if (disk >= slots_.size()) return;
  uint32_t count = disk_count_.load(std::memory_order_relaxed);
  while (count <= disk &&
         !disk_count_.compare_exchange_weak(count, disk + 1, std::memory_order_relaxed)) {
  }
  // A cancelled request (its submitter's io_uring context went away) tells nothing about the disk.
  if (status.error() == ECANCELED) return;
  Slot& slot = slots_[disk];
  const bool reads_before = slot.reads_failing.load(std::memory_order_relaxed);
  const int err = status.error();
  if (err == 0 && !proves) {
    // Nothing learned.
  } else if (err == 0) {
    if (write || disk_wide) {
      Clear(slot.writes_failing);
      Clear(slot.full);
      Clear(slot.read_only);
    }
    if (!write || disk_wide) Clear(slot.reads_failing);
  } else {
    const bool failure = IsFailure(err, /*stat_of_object=*/false);
    if (failure) {
      if (write || disk_wide) slot.writes_failing.store(true, std::memory_order_relaxed);
      if (!write || disk_wide) slot.reads_failing.store(true, std::memory_order_relaxed);
    } else if (write && err == EROFS) {
      slot.read_only.store(true, std::memory_order_relaxed);
    } else if (write && (err == ENOSPC || err == EDQUOT)) {
      slot.full.store(true, std::memory_order_relaxed);
    }
  }
  const bool reads_after = slot.reads_failing.load(std::memory_order_relaxed);
  // A success that changed no reads state (nearly every request) has nothing for mu_: no error to
  // count, no listener to call.
  if (err == 0 && reads_before == reads_after) return;
  std::shared_ptr<const Listener> listener;
  {
    MutexLock lock(&mu_);
    if (err != 0) {
      ++errors_[disk];
      last_error_[disk] = status.ToString();
      last_error_unix_ns_[disk] = UnixNanos();
    }
    if (reads_before != reads_after) listener = listener_;
  }
  if (listener && *listener) (*listener)(disk, reads_after);
}

bool DiskHealthBoard::reads_failing(uint32_t disk) const {
  return disk < slots_.size() && slots_[disk].reads_failing.load(std::memory_order_relaxed);
}

DiskHealth DiskHealthBoard::Get(uint32_t disk) const {
  DiskHealth h;
  if (disk >= slots_.size()) return h;
  const Slot& slot = slots_[disk];
  h.reads_failing = slot.reads_failing.load(std::memory_order_relaxed);
  h.writes_failing = slot.writes_failing.load(std::memory_order_relaxed);
  if (h.reads_failing || h.writes_failing) {
    h.state = DiskState::kFailed;
  } else if (slot.read_only.load(std::memory_order_relaxed)) {
    h.state = DiskState::kReadOnly;
  } else if (slot.full.load(std::memory_order_relaxed)) {
    h.state = DiskState::kFull;
  }
  MutexLock lock(&mu_);
  h.errors = errors_[disk];
  h.last_error = last_error_[disk];
  h.last_error_unix_ns = last_error_unix_ns_[disk];
  return h;
}

void DiskHealthBoard::SetListener(Listener listener) {
  auto shared = listener ? std::make_shared<const Listener>(std::move(listener)) : nullptr;
  MutexLock lock(&mu_);
  listener_ = std::move(shared);
}

// ---- HealthTrackingDisk -----------------------------------------------------------------------

HealthTrackingDisk::HealthTrackingDisk(std::unique_ptr<Disk> inner, uint32_t index,
                                       DiskHealthBoard* board)
    : DiskWrapper(std::move(inner)), index_(index), board_(board) {}

void HealthTrackingDisk::Submit(DiskRequest request) {
  const bool write = request.kind != DiskRequest::Kind::kRead;
  const bool sync = request.kind == DiskRequest::Kind::kSync;
  auto done = std::move(request.done);
  request.done = [this, write, sync, done = std::move(done)](Result<uint64_t> result) {
    // A read of a hole (0 bytes) or an empty write proves nothing about the disk.
    const bool proves = sync || (result.ok() && *result > 0);
    board_->Record(index_, write, /*disk_wide=*/false, result.status(), proves);
    done(std::move(result));
  };
  inner_->Submit(std::move(request));
}

Status HealthTrackingDisk::Truncate(ObjectId object, uint64_t size) {
  Status s = inner_->Truncate(object, size);
  board_->Record(index_, /*write=*/true, /*disk_wide=*/false, s, /*proves=*/false);
  return s;
}

Status HealthTrackingDisk::Remove(ObjectId object) {
  Status s = inner_->Remove(object);
  board_->Record(index_, /*write=*/true, /*disk_wide=*/false, s, /*proves=*/false);
  return s;
}

Result<ObjectInfo> HealthTrackingDisk::Stat(ObjectId object) {
  Result<ObjectInfo> info = inner_->Stat(object);
  RecordStat(info);
  return info;
}

void HealthTrackingDisk::StatAsync(ObjectId object, StatDone done) {
  inner_->StatAsync(object, [this, done = std::move(done)](Result<ObjectInfo> info) {
    RecordStat(info);
    done(std::move(info));
  });
}

void HealthTrackingDisk::RecordStat(const Result<ObjectInfo>& info) {
  // A missing object is an answer, not an error of the disk.
  if (info.error() != ENOENT) {
    board_->Record(index_, /*write=*/false, /*disk_wide=*/false, info.status(), /*proves=*/false);
  }
}

Result<uint64_t> HealthTrackingDisk::Seek(ObjectId object, uint64_t offset, SeekKind kind) {
  Result<uint64_t> at = inner_->Seek(object, offset, kind);
  board_->Record(index_, /*write=*/false, /*disk_wide=*/false, at.status(), /*proves=*/false);
  return at;
}

// The disk-wide calls report their failures; their successes prove little (statvfs of a disk
// whose objects/ was removed still works), so they clear nothing.
Status HealthTrackingDisk::ListObjects(std::vector<ObjectId>* out) {
  Status s = inner_->ListObjects(out);
  board_->Record(index_, /*write=*/false, /*disk_wide=*/true, s, /*proves=*/false);
  return s;
}

Result<DiskUsage> HealthTrackingDisk::Usage() {
  Result<DiskUsage> usage = inner_->Usage();
  board_->Record(index_, /*write=*/false, /*disk_wide=*/true, usage.status(), /*proves=*/false);
  return usage;
}

Status HealthTrackingDisk::SyncAll() {
  Status s = inner_->SyncAll();
  board_->Record(index_, /*write=*/true, /*disk_wide=*/true, s, /*proves=*/false);
  return s;
}

std::string FormatDiskHealth(const DiskHealthBoard& board, const std::vector<std::string>& paths) {
  std::string out;
  for (uint32_t d = 0; d < paths.size(); ++d) {
    const DiskHealth h = board.Get(d);
    out += "disk " + std::to_string(d) + " (" + paths[d] + "): " + DiskStateName(h.state);
    if (h.state == DiskState::kFailed) {
      out += h.reads_failing && h.writes_failing ? " (reads and writes)"
             : h.reads_failing                   ? " (reads)"
                                                 : " (writes)";
    }
    if (h.errors > 0) {
      out += ", " + std::to_string(h.errors) + (h.errors == 1 ? " error" : " errors") +
             ", last: " + h.last_error;
    }
    out += "\n";
  }
  return out;
}

namespace {

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string DiskHealthJsonMember(const DiskHealthBoard& board, uint32_t disks) {
  std::string out = "\"disk_health\":[";
  for (uint32_t d = 0; d < disks; ++d) {
    const DiskHealth h = board.Get(d);
    if (d > 0) out += ",";
    out += "{\"disk\":" + std::to_string(d) + ",\"state\":\"" + DiskStateName(h.state) +
           "\",\"reads_failing\":" + (h.reads_failing ? "true" : "false") +
           ",\"writes_failing\":" + (h.writes_failing ? "true" : "false") +
           ",\"errors\":" + std::to_string(h.errors) +
           ",\"last_error\":" + JsonString(h.last_error) + "}";
  }
  return out + "]";
}

void AppendDiskHealthPrometheus(std::string* out, const DiskHealthBoard& board, uint32_t disks) {
  AppendPrometheusHeader(out, "tipfs_disk_failed", "gauge",
                         "1 while the disk's reads or writes fail with an I/O error");
  for (uint32_t d = 0; d < disks; ++d) {
    AppendPrometheusSample(out, "tipfs_disk_failed", {{"disk", std::to_string(d)}},
                           board.Get(d).state == DiskState::kFailed ? 1 : 0);
  }
  AppendPrometheusHeader(out, "tipfs_disk_state", "gauge",
                         "1 for the disk's state: healthy, full, read-only or failed");
  for (uint32_t d = 0; d < disks; ++d) {
    const DiskState state = board.Get(d).state;
    for (DiskState s :
         {DiskState::kHealthy, DiskState::kFull, DiskState::kReadOnly, DiskState::kFailed}) {
      AppendPrometheusSample(out, "tipfs_disk_state",
                             {{"disk", std::to_string(d)}, {"state", DiskStateName(s)}},
                             state == s ? 1 : 0);
    }
  }
  AppendPrometheusHeader(out, "tipfs_disk_errors_total", "counter", "Failed disk requests");
  for (uint32_t d = 0; d < disks; ++d) {
    AppendPrometheusSample(out, "tipfs_disk_errors_total", {{"disk", std::to_string(d)}},
                           static_cast<double>(board.Get(d).errors));
  }
}

}  // namespace tipfs::stripe
