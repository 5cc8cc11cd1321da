// DiskActivity: what each disk of a volume did, measured where tipfs meets it, whatever the disk
// is (a directory, an emulated disk, a RADOS pool): requests and bytes by kind, reads by purpose
// (demand, read-ahead, hinted, speculative), time busy (at least one request outstanding),
// the time-weighted number outstanding, response times and errors. It needs no disk model, so
// `tipfs stats` shows per-disk figures on every mount. While a timeline is recorded
// (util/timeline.h), every request's interval goes there too.
//
// ActivityRecordingDisk is the DiskWrapper that reports each request of its disk to the board.
// Cost per request: two short critical sections on the disk's own mutex and two clock reads.
// Thread-safety: everything may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "stripe/disk_wrapper.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/statistics.h"

namespace tipfs::stripe {

constexpr size_t kPurposeCount = 4;                     // DiskRequest::Purpose values
const char* PurposeName(DiskRequest::Purpose purpose);  // "demand", "readahead", ...

struct DiskActivityStats {
  uint64_t reads = 0, writes = 0, syncs = 0;
  uint64_t bytes_read = 0, bytes_written = 0;
  std::array<uint64_t, kPurposeCount> reads_by_purpose{};
  std::array<uint64_t, kPurposeCount> bytes_by_purpose{};
  uint64_t completed = 0, errors = 0;
  int64_t busy_ns = 0;         // time with at least one request outstanding
  int64_t outstanding_ns = 0;  // integral of requests outstanding over time
  int64_t response_ns = 0;     // sum of submit -> completion
  uint32_t outstanding = 0;    // now
  uint32_t max_outstanding = 0;
  int64_t elapsed_ns = 0;  // since the board was made
};

class DiskActivity {
 public:
  // `statistics`: also count DISK_READ_OPS... tickers (null when another layer counts them).
  DiskActivity(uint32_t disks, Clock* clock, Statistics* statistics = nullptr);

  // Wraps disk `index` (OpenOptions::wrap_disk shape); REQUIRES: index < disks.
  std::unique_ptr<Disk> Wrap(std::unique_ptr<Disk> disk, uint32_t index);

  std::vector<DiskActivityStats> Stats() const;
  uint32_t disk_count() const { return static_cast<uint32_t>(disks_.size()); }

  // For ActivityRecordingDisk.
  int64_t Submitted(uint32_t disk, const DiskRequest& request);
  void Completed(uint32_t disk, DiskRequest::Kind kind, DiskRequest::Purpose purpose,
                 int64_t submitted_ns, uint64_t bytes, bool ok);

 private:
  struct PerDisk {
    mutable Mutex mu;
    DiskActivityStats stats GUARDED_BY(mu);
    int64_t last_change_ns GUARDED_BY(mu) = 0;  // when `outstanding` last changed
  };
  // Brings the time integrals up to `now`.
  static void AdvanceLocked(PerDisk& d, int64_t now) REQUIRES(d.mu);

  Clock* const clock_;
  Statistics* const statistics_;
  const int64_t created_ns_;
  std::vector<std::unique_ptr<PerDisk>> disks_;  // constant size
};

class ActivityRecordingDisk : public DiskWrapper {
 public:
  // REQUIRES: `board` outlives the disk.
  ActivityRecordingDisk(std::unique_ptr<Disk> inner, uint32_t index, DiskActivity* board)
      : DiskWrapper(std::move(inner)), index_(index), board_(board) {}

  void Submit(DiskRequest request) override;

 private:
  const uint32_t index_;
  DiskActivity* const board_;
};

}  // namespace tipfs::stripe
