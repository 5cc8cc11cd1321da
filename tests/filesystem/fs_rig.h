// FsRig: a whole tipfs file system without a mount: a volume over MemDisks, a metadata store in a
// temporary directory, the block cache and FileSystem on top. Tests drive FileSystem directly.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/file_cache.h"
#include "fusefs/filesystem.h"
#include "meta/meta_store.h"
#include "stripe/faulty_disk.h"
#include "stripe/striped_io.h"
#include "stripe/volume.h"
#include "tests/support/mem_disk.h"
#include "tests/support/temp_dir.h"
#include "util/clock.h"

namespace tipfs::testing {

class FsRig {
 public:
  // With `faulty`, each MemDisk sits under a FaultyDisk (faulty(i)) that tests switch on.
  explicit FsRig(uint32_t disks = 4, uint32_t stripe_unit = 64 * 1024, bool faulty = false) {
    stripe::Label label;
    label.volume_uuid = "5e1f0000-0000-4000-8000-000000000001";
    label.count = disks;
    label.stripe_unit = stripe_unit;
    std::vector<std::unique_ptr<stripe::Disk>> owned;
    for (uint32_t i = 0; i < disks; ++i) {
      label.disk_names.push_back(dir_.Sub("disk" + std::to_string(i)));
      auto disk = std::make_unique<MemDisk>("memdisk" + std::to_string(i));
      mem_disks_.push_back(disk.get());
      if (faulty) {
        auto wrapped = std::make_unique<stripe::FaultyDisk>(std::move(disk));
        faulty_disks_.push_back(wrapped.get());
        owned.push_back(std::move(wrapped));
      } else {
        owned.push_back(std::move(disk));
      }
    }
    volume_ = std::make_unique<stripe::Volume>(label, std::move(owned));
    Reopen();
  }

  // Drops the FileSystem, cache and store (as an unmount does) and opens them again; the disks
  // keep their contents.
  void Reopen() {
    fs_.reset();
    cache_.reset();
    meta_.reset();
    io_ = std::make_unique<stripe::StripedIo>(volume_.get());
    auto store =
        created_ ? meta::MetaStore::Open(dir_.Sub("meta"), volume_->label().volume_uuid)
                 : meta::MetaStore::Create(dir_.Sub("meta"), volume_->label().volume_uuid, 0, 0);
    if (!store.ok()) std::abort();
    created_ = true;
    meta_ = std::move(*store);
    cache::CacheOptions options;
    options.capacity_bytes = 16 << 20;
    cache_ = std::make_unique<cache::FileCache>(io_.get(), &clock_, options);
    fs_ = std::make_unique<fusefs::FileSystem>(volume_.get(), meta_.get(), cache_.get());
  }

  fusefs::FileSystem* fs() { return fs_.get(); }
  MemDisk* disk(size_t i) { return mem_disks_[i]; }
  stripe::FaultyDisk* faulty(size_t i) { return faulty_disks_[i]; }
  size_t disk_count() const { return mem_disks_.size(); }
  uint64_t ObjectsOf(uint64_t ino) {
    uint64_t total = 0;
    for (MemDisk* d : mem_disks_) total += d->Contents(ino).size();
    return total;
  }
  bool HasObjects(uint64_t ino) {
    for (MemDisk* d : mem_disks_) {
      if (d->Stat(ino).ok()) return true;
    }
    return false;
  }

 private:
  TempDir dir_{"tipfs-fs"};
  SystemClock clock_;
  std::vector<MemDisk*> mem_disks_;
  std::vector<stripe::FaultyDisk*> faulty_disks_;
  std::unique_ptr<stripe::Volume> volume_;
  std::unique_ptr<stripe::StripedIo> io_;
  std::unique_ptr<meta::MetaStore> meta_;
  std::unique_ptr<cache::FileCache> cache_;
  std::unique_ptr<fusefs::FileSystem> fs_;
  bool created_ = false;
};

}  // namespace tipfs::testing
