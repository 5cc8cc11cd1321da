// Disk health: what tipfs has learned about each disk of a volume from the results of the
// requests it sent. A HealthTrackingDisk wraps each disk and reports every result to the volume's
// DiskHealthBoard, which keeps per disk a state (healthy, full, read-only, failed), the error
// count and the last error, so that `tipfs stats` can show a failing disk and the cache can stop
// prefetching from a disk whose reads fail.
//
// States, from the errno of a failed request (a local file system's meaning of it):
//   failed     EIO, ENXIO, ENODEV, ESTALE, ENOTCONN, EUCLEAN, and ENOENT/ENOTDIR anywhere but a
//              Stat of one object (the disk's directories went away); reads and writes apart
//   read-only  EROFS on a write
//   full       ENOSPC or EDQUOT on a write
// A later success of the same kind that moved data (a read that returned bytes, a write, a sync)
// clears the state (a healed disk, freed space), so the state says what the last such request of
// each kind found. A failed Stat of a missing object, a short read and a cancelled request
// (ECANCELED: the kernel dropped it, the disk did not fail it) are not errors.
//
// Thread-safety: the board is safe from any thread; state queries are lock-free, and so is a
// success that changes no disk's reads state (nearly every request: mu_ is for errors and the
// listener). The listener runs on the thread whose request changed a disk's reads between failing
// and working, with no lock of the board held.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stripe/disk_wrapper.h"
#include "stripe/layout.h"
#include "util/mutex.h"

namespace tipfs::stripe {

enum class DiskState : uint8_t { kHealthy, kFull, kReadOnly, kFailed };
const char* DiskStateName(DiskState state);

struct DiskHealth {
  DiskState state = DiskState::kHealthy;
  bool reads_failing = false;
  bool writes_failing = false;
  uint64_t errors = 0;     // failed requests since mount
  std::string last_error;  // its message; empty when there was none
  int64_t last_error_unix_ns = 0;
};

class DiskHealthBoard {
 public:
  // Called with (disk, reads_failing) when a disk's reads start or stop failing.
  using Listener = std::function<void(uint32_t disk, bool reads_failing)>;

  DiskHealthBoard() = default;

  // A request of `disk` finished; `write` for writes, syncs, truncates, removes and syncfs.
  // `disk_wide` for calls about the whole disk (ListObjects, Usage, SyncAll). A success clears
  // the states of its kind only when it `proves` the disk works: data read or written, a sync.
  // (Removing a missing object or cutting one shorter succeeds on a full or vanished disk too.)
  void Record(uint32_t disk, bool write, bool disk_wide, const Status& status, bool proves = true);

  bool reads_failing(uint32_t disk) const;
  DiskHealth Get(uint32_t disk) const;
  // The disks seen so far (the highest index reported, plus one).
  uint32_t disk_count() const { return disk_count_.load(std::memory_order_relaxed); }

  void SetListener(Listener listener);

 private:
  struct Slot {
    std::atomic<bool> reads_failing{false};
    std::atomic<bool> writes_failing{false};
    std::atomic<bool> full{false};
    std::atomic<bool> read_only{false};
  };

  std::array<Slot, Layout::kMaxDisks> slots_;
  std::atomic<uint32_t> disk_count_{0};
  mutable Mutex mu_;  // errors and messages; the listener
  std::array<uint64_t, Layout::kMaxDisks> errors_ GUARDED_BY(mu_){};
  std::array<std::string, Layout::kMaxDisks> last_error_ GUARDED_BY(mu_);
  std::array<int64_t, Layout::kMaxDisks> last_error_unix_ns_ GUARDED_BY(mu_){};
  std::shared_ptr<const Listener> listener_ GUARDED_BY(mu_);
};

// Reports every result of the disk it wraps to a board.
class HealthTrackingDisk : public DiskWrapper {
 public:
  // REQUIRES: board outlives this disk.
  HealthTrackingDisk(std::unique_ptr<Disk> inner, uint32_t index, DiskHealthBoard* board);

  void Submit(DiskRequest request) override;
  Status Truncate(ObjectId object, uint64_t size) override;
  Status Remove(ObjectId object) override;
  Result<ObjectInfo> Stat(ObjectId object) override;
  void StatAsync(ObjectId object, StatDone done) override;
  Result<uint64_t> Seek(ObjectId object, uint64_t offset, SeekKind kind) override;
  Status ListObjects(std::vector<ObjectId>* out) override;
  Result<DiskUsage> Usage() override;
  Status SyncAll() override;

 private:
  void RecordStat(const Result<ObjectInfo>& info);

  const uint32_t index_;
  DiskHealthBoard* const board_;
};

// One line per disk for `tipfs stats`: "disk 2 (/srv/d2): failed (reads), 3 errors, last: ...".
std::string FormatDiskHealth(const DiskHealthBoard& board, const std::vector<std::string>& paths);
// The same as a JSON member: "disk_health":[{"disk":0,"state":"healthy","errors":0,...},...]
std::string DiskHealthJsonMember(const DiskHealthBoard& board, uint32_t disks);
// Prometheus gauges tipfs_disk_failed and tipfs_disk_state{state=...}, counter
// tipfs_disk_errors_total, labelled by disk index only.
void AppendDiskHealthPrometheus(std::string* out, const DiskHealthBoard& board, uint32_t disks);

}  // namespace tipfs::stripe
