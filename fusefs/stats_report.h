// StatsReport: renders what a mount can tell about itself into the files of `.tipfs/`:
//   stats, stats.json     cache, hints, speculation, disks and request counters
//   metrics               the same as Prometheus text
//   breakdown(.json)      per-subsystem time since mount (seed 002, Figure 5.9)
//   disk-model            the emulated disks' model; writing a spec changes the knobs live
//   timeline              the disks' and readers' intervals (util/timeline.h); write start|stop
//   streams               the hint streams by process and source
// Renders on demand (at open); holds no state of its own besides the mount time.
#pragma once

#include <string>

#include "cache/file_cache.h"
#include "fusefs/control_files.h"
#include "fusefs/disk_array.h"
#include "fusefs/filesystem.h"
#include "fusefs/hint_ioctls.h"
#include "util/clock.h"
#include "util/perf_context.h"
#include "util/statistics.h"

namespace tipfs::fusefs {

class StatsReport {
 public:
  // REQUIRES: everything passed outlives the report.
  StatsReport(FileSystem* fs, cache::FileCache* cache, DiskArray* disks, HintIoctls* hints,
              Statistics* statistics, Clock* clock, std::string mountpoint,
              DataCacheMode data_cache = DataCacheMode::kKernel);

  // Adds the control files listed above.
  void Register(ControlFiles* control);

  std::string Text() const;
  std::string Json() const;
  std::string Prometheus() const;
  std::string BreakdownText() const;
  std::string BreakdownJsonText() const;
  std::string DiskModelText() const;
  std::string StreamsText() const;
  Status SetDiskModel(std::string_view spec);

 private:
  PerfBreakdown Breakdown() const;
  std::vector<stripe::DiskActivityStats> ActivityStats() const;  // empty without a board
  const char* DataCacheName() const {
    return data_cache_ == DataCacheMode::kDirect ? "direct" : "kernel";
  }

  FileSystem* const fs_;
  cache::FileCache* const cache_;
  DiskArray* const disks_;
  HintIoctls* const hints_;
  Statistics* const statistics_;
  Clock* const clock_;
  const std::string mountpoint_;
  const DataCacheMode data_cache_;
  const int64_t mounted_at_;
  const PerfSnapshot perf_at_mount_;
};

}  // namespace tipfs::fusefs
