// FsRig: a whole tipfs file system without a mount (tests/support/volume_rig.h), opened once.
// Tests drive FileSystem directly.
#pragma once

#include <cstdlib>
#include <memory>
#include <vector>

#include "stripe/faulty_disk.h"
#include "tests/support/volume_rig.h"

namespace tipfs::testing {

class FsRig {
 public:
  // With `faulty`, each MemDisk sits under a FaultyDisk (faulty(i)) that tests switch on; the
  // FaultyDisks keep their rules across Reopen.
  explicit FsRig(uint32_t disks = 4, uint32_t stripe_unit = 64 * 1024, bool faulty = false)
      : rig_(disks, stripe_unit) {
    if (faulty) {
      for (uint32_t i = 0; i < disks; ++i) {
        faulty_disks_.push_back(
            std::make_unique<stripe::FaultyDisk>(std::make_unique<DiskRef>(rig_.disk(i))));
      }
      wrap_ = [this](MemDisk*, uint32_t index) -> std::unique_ptr<stripe::Disk> {
        return std::make_unique<DiskRef>(faulty_disks_[index].get());
      };
    }
    Reopen();
  }

  // Drops the FileSystem, cache and store (as an unmount does) and opens them again; the disks
  // keep their contents.
  void Reopen() {
    if (!rig_.Open(wrap_).ok()) std::abort();
  }

  fusefs::FileSystem* fs() { return rig_.fs(); }
  MemDisk* disk(size_t i) { return rig_.disk(i); }
  stripe::FaultyDisk* faulty(size_t i) { return faulty_disks_[i].get(); }
  size_t disk_count() const { return rig_.disk_count(); }
  uint64_t ObjectsOf(uint64_t ino) {
    uint64_t total = 0;
    for (size_t d = 0; d < disk_count(); ++d) total += disk(d)->Contents(ino).size();
    return total;
  }
  bool HasObjects(uint64_t ino) { return rig_.HasObjects(ino); }

 private:
  VolumeRig rig_;
  std::vector<std::unique_ptr<stripe::FaultyDisk>> faulty_disks_;
  VolumeRig::Wrap wrap_;
};

}  // namespace tipfs::testing
