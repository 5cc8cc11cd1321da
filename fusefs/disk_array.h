// DiskArray: the opened volume together with the emulation wrapped around its disks (when
// the mount asked for a disk model), so the stats and the run-time knob file can reach both.
#pragma once

#include <memory>

#include "fusefs/mount_options.h"
#include "stripe/disk_activity.h"
#include "stripe/disk_health.h"
#include "stripe/emulation/emulated_array.h"
#include "stripe/volume.h"
#include "util/clock.h"
#include "util/statistics.h"

namespace tipfs::fusefs {

struct DiskArray {
  std::shared_ptr<stripe::EmulatedArray> emulation;  // null: real timing, disks not wrapped
  // What each disk's requests found (failed, read-only, full); every disk reports to it.
  std::shared_ptr<stripe::DiskHealthBoard> health;
  // Per-disk requests, bytes, busy time by purpose, measured on every mount (model or not).
  std::shared_ptr<stripe::DiskActivity> activity;
  std::unique_ptr<stripe::Volume> volume;
};

// Opens the volume of options.disk, wrapping every disk in the model of options.disk_model
// unless it is "none", then in an ActivityRecordingDisk and outermost in a HealthTrackingDisk (so
// both boards see what the program sees, modelled delays included). A bad spec fails before any
// disk is opened.
Result<DiskArray> OpenDiskArray(const MountOptions& options, Clock* clock, Statistics* statistics);

}  // namespace tipfs::fusefs
