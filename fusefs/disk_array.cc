#include "fusefs/disk_array.h"

namespace tipfs::fusefs {

Result<DiskArray> OpenDiskArray(const MountOptions& options, Clock* clock, Statistics* statistics) {
  DiskArray array;
  stripe::OpenOptions open_options;
  open_options.rados.op_timeout_ns = options.rados_timeout_ns;
  if (options.disk_model != "none") {
    Result<std::shared_ptr<stripe::EmulatedArray>> emulation =
        stripe::EmulatedArray::Create(options.disk_model, clock, statistics);
    if (!emulation.ok()) return emulation.status().WithContext("--disk-model");
    array.emulation = *emulation;
    open_options.wrap_disk = array.emulation->WrapFunction();
  }
  open_options.direct_io = options.backing_io == BackingIo::kDirect ||
                           (options.backing_io == BackingIo::kAuto && options.disk_model == "none");
  array.health = std::make_shared<stripe::DiskHealthBoard>();
  // The label says how many disks there are; a missing or bad one fails in Open below. The
  // volume may be named by its metadata directory (RADOS disks), which holds no disk label but
  // the volume's: IdentifyVolume reads either.
  Result<stripe::Label> label = stripe::IdentifyVolume(options.disk);
  // The emulation counts the DISK_* tickers itself when it is there.
  array.activity = std::make_shared<stripe::DiskActivity>(label.ok() ? label->count : 0, clock,
                                                          array.emulation ? nullptr : statistics);
  open_options.wrap_disk = [emulate = std::move(open_options.wrap_disk), health = array.health,
                            activity = array.activity](std::unique_ptr<stripe::Disk> disk,
                                                       uint32_t index) {
    if (emulate) disk = emulate(std::move(disk), index);
    if (index < activity->disk_count()) disk = activity->Wrap(std::move(disk), index);
    return std::unique_ptr<stripe::Disk>(
        std::make_unique<stripe::HealthTrackingDisk>(std::move(disk), index, health.get()));
  };
  Result<std::unique_ptr<stripe::Volume>> volume =
      stripe::Volume::Open(options.disk, std::move(open_options));
  if (!volume.ok()) return volume.status();
  array.volume = std::move(*volume);
  return array;
}

}  // namespace tipfs::fusefs
