// Volume: owns the disks of an open volume (and the io_uring of each PosixDisk).
// Volume::Open lives in label.cc beside the label checks it depends on.
#include "stripe/volume.h"

#include "stripe/io_ring.h"

namespace tipfs::stripe {

Volume::Volume(Label label, std::vector<std::unique_ptr<Disk>> disks)
    : label_(std::move(label)),
      layout_(static_cast<uint32_t>(disks.size()), label_.stripe_unit),
      disks_(std::move(disks)) {}

Volume::~Volume() {
  // Disks first: each waits for its in-flight ops, which complete on its ring's thread.
  disks_.clear();
  rings_.clear();
}

std::vector<Disk*> Volume::disks() const {
  std::vector<Disk*> out;
  out.reserve(disks_.size());
  for (const auto& d : disks_) out.push_back(d.get());
  return out;
}

}  // namespace tipfs::stripe
