// EmulatedArray: the emulated disks of one volume, under one disk model. What the mount needs:
//   (a) build EmulatedDisks from a `--disk-model` spec: pass WrapFunction() as
//       stripe::OpenOptions::wrap_disk, and every disk the volume opens is wrapped;
//   (b) change the knobs of a live volume from a spec (`L=5ms,slowdown=2`, or a whole new
//       `PROFILE,...`): Update();
//   (c) read per-disk statistics as structs (Stats) or as text / Prometheus lines.
// The array holds shared handles on each disk's emulator, so it stays valid after the volume (and
// its disks) are gone.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stripe/disk.h"
#include "stripe/emulation/disk_model.h"
#include "stripe/emulation/disk_model_config.h"
#include "stripe/emulation/emulated_disk.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/statistics.h"

namespace tipfs::stripe {

// REQUIRES: owned by a std::shared_ptr (Create makes one), for WrapFunction.
class EmulatedArray : public std::enable_shared_from_this<EmulatedArray> {
 public:
  // EINVAL with the parser's one-line message when `spec` is bad.
  static Result<std::shared_ptr<EmulatedArray>> Create(std::string_view spec, Clock* clock,
                                                       Statistics* statistics = nullptr,
                                                       bool burn_overhead = true);
  EmulatedArray(const DiskModelConfig& config, Clock* clock, Statistics* statistics,
                bool burn_overhead);

  // Wraps disk `index` of the volume in an EmulatedDisk under the current model.
  std::unique_ptr<Disk> Wrap(std::unique_ptr<Disk> disk, uint32_t index);
  // Wrap, in the shape of stripe::OpenOptions::wrap_disk (holds a reference to the array).
  std::function<std::unique_ptr<Disk>(std::unique_ptr<Disk>, uint32_t)> WrapFunction();

  // A run-time change, applied to every disk for requests that start after it. Nothing changes
  // when the spec is bad.
  Status Update(std::string_view spec);
  DiskModelConfig config() const;
  std::string spec() const { return DiskModelSpec(config()); }

  // Per-disk statistics by disk index (an index never wrapped reads as zeros).
  std::vector<DiskStats> Stats() const;
  void ResetStats();
  uint32_t disk_count() const;

 private:
  Clock* const clock_;
  Statistics* const statistics_;
  const bool burn_overhead_;

  mutable Mutex mu_;
  DiskModelConfig config_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<DiskEmulator>> disks_ GUARDED_BY(mu_);  // by disk index
};

// Sums over disks: counts and times add, mean and current depths add (the array's outstanding
// requests), the maximum depth is the largest single disk's, and elapsed adds up to disk-time, so
// utilization() of the sum is the mean utilization of the disks.
DiskStats SumDiskStats(const std::vector<DiskStats>& disks);

// A table, one line per disk and a total: requests, MB read / written, utilization, mean and
// maximum queue depth, random vs sequential, mean response, late completions.
std::string FormatDiskStats(const std::vector<DiskStats>& disks);
// Prometheus gauges/counters of the model labelled disk="N" (tipfs_disk_model_reads_total{disk="0"}
// ...).
void AppendDiskStatsPrometheus(std::string* out, const std::vector<DiskStats>& disks);
// {"disks":[{"index":0,"reads":...},...]} for `tipfs stats --json`.
std::string DiskStatsJson(const std::vector<DiskStats>& disks);

}  // namespace tipfs::stripe
