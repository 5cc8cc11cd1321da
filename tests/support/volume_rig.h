// VolumeRig: a whole tipfs file system without a mount: a volume over MemDisks, a metadata store
// in a temporary directory, the block cache and FileSystem on top. The MemDisks outlive the
// volume (so a test can wrap them in CrashDisks or FaultyDisks for one "boot" and look at what
// survived in the next), and the store's directory is exposed (so a test can damage it or stand
// in for a crash). tests/filesystem/fs_rig.h is the same stack opened once.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/file_cache.h"
#include "fusefs/filesystem.h"
#include "meta/meta_store.h"
#include "stripe/striped_io.h"
#include "stripe/volume.h"
#include "tests/support/mem_disk.h"
#include "tests/support/temp_dir.h"
#include "util/clock.h"

namespace tipfs::testing {

// Forwards every call to a disk it does not own.
class DiskRef : public stripe::Disk {
 public:
  explicit DiskRef(stripe::Disk* target) : target_(target) {}
  void Submit(stripe::DiskRequest request) override { target_->Submit(std::move(request)); }
  Status Truncate(stripe::ObjectId object, uint64_t size) override {
    return target_->Truncate(object, size);
  }
  Status Remove(stripe::ObjectId object) override { return target_->Remove(object); }
  Result<stripe::ObjectInfo> Stat(stripe::ObjectId object) override {
    return target_->Stat(object);
  }
  void StatAsync(stripe::ObjectId object, StatDone done) override {
    target_->StatAsync(object, std::move(done));
  }
  Status ListObjects(std::vector<stripe::ObjectId>* out) override {
    return target_->ListObjects(out);
  }
  Result<stripe::DiskUsage> Usage() override { return target_->Usage(); }
  Result<uint64_t> Seek(stripe::ObjectId object, uint64_t offset, stripe::SeekKind kind) override {
    return target_->Seek(object, offset, kind);
  }
  Status SyncAll() override { return target_->SyncAll(); }
  std::string name() const override { return target_->name(); }

 private:
  stripe::Disk* const target_;
};

class VolumeRig {
 public:
  // Makes disk `index` of the volume from its MemDisk (default: a DiskRef).
  using Wrap = std::function<std::unique_ptr<stripe::Disk>(MemDisk* disk, uint32_t index)>;

  explicit VolumeRig(uint32_t disks = 4, uint32_t stripe_unit = 64 * 1024) {
    label_.volume_uuid = "5e1f0000-0000-4000-8000-00000000fsck";
    label_.count = disks;
    label_.stripe_unit = stripe_unit;
    for (uint32_t i = 0; i < disks; ++i) {
      label_.disk_names.push_back(dir_.Sub("disk" + std::to_string(i)));
      mem_disks_.push_back(std::make_unique<MemDisk>("memdisk" + std::to_string(i)));
    }
  }
  ~VolumeRig() { Close(); }

  // "Boots": a volume over the MemDisks (through `wrap`), the store (created the first time),
  // the cache and the FileSystem. Does not run recovery: call fs()->Recover() as the daemon does.
  Status Open(const Wrap& wrap = {}) {
    Close();
    std::vector<std::unique_ptr<stripe::Disk>> disks;
    for (uint32_t i = 0; i < mem_disks_.size(); ++i) {
      disks.push_back(wrap ? wrap(mem_disks_[i].get(), i)
                           : std::make_unique<DiskRef>(mem_disks_[i].get()));
    }
    volume_ = std::make_unique<stripe::Volume>(label_, std::move(disks));
    io_ = std::make_unique<stripe::StripedIo>(volume_.get());
    auto store =
        created_ ? meta::MetaStore::Open(meta_path(), label_.volume_uuid, store_options_)
                 : meta::MetaStore::Create(meta_path(), label_.volume_uuid, 0, 0, store_options_);
    if (!store.ok()) {
      Close();
      return store.status();
    }
    created_ = true;
    meta_ = std::move(*store);
    cache_ = std::make_unique<cache::FileCache>(io_.get(), &clock_, cache_options_);
    fs_ = std::make_unique<fusefs::FileSystem>(volume_.get(), meta_.get(), cache_.get());
    return Status::OK();
  }

  // Drops the FileSystem, cache and store (the store closes cleanly); the volume stays.
  void StopFileSystem() {
    fs_.reset();
    cache_.reset();
    meta_.reset();
    io_.reset();
  }
  // Drops everything but the MemDisks and the store's files.
  void Close() {
    StopFileSystem();
    volume_.reset();
  }

  // Options for the store and the cache from the next Open on.
  void set_store_options(meta::MetaStoreOptions options) { store_options_ = std::move(options); }
  void set_cache_options(const cache::CacheOptions& options) { cache_options_ = options; }

  fusefs::FileSystem* fs() { return fs_.get(); }
  meta::MetaStore* meta() { return meta_.get(); }
  stripe::Volume* volume() { return volume_.get(); }
  MemDisk* disk(size_t i) { return mem_disks_[i].get(); }
  size_t disk_count() const { return mem_disks_.size(); }
  std::string meta_path() const { return dir_.Sub("meta"); }
  const TempDir& dir() const { return dir_; }
  const stripe::Label& label() const { return label_; }

  // Objects (and their bytes) on all disks.
  uint64_t ObjectCount() {
    uint64_t n = 0;
    for (auto& d : mem_disks_) {
      std::vector<stripe::ObjectId> ids;
      (void)d->ListObjects(&ids);
      n += ids.size();
    }
    return n;
  }
  bool HasObjects(uint64_t ino) {
    for (auto& d : mem_disks_) {
      if (d->Stat(ino).ok()) return true;
    }
    return false;
  }

 private:
  TempDir dir_{"tipfs-rel"};
  SystemClock clock_;
  stripe::Label label_;
  meta::MetaStoreOptions store_options_;
  cache::CacheOptions cache_options_ = [] {
    cache::CacheOptions options;
    options.capacity_bytes = 16 << 20;
    return options;
  }();
  std::vector<std::unique_ptr<MemDisk>> mem_disks_;
  std::unique_ptr<stripe::Volume> volume_;
  std::unique_ptr<stripe::StripedIo> io_;
  std::unique_ptr<meta::MetaStore> meta_;
  std::unique_ptr<cache::FileCache> cache_;
  std::unique_ptr<fusefs::FileSystem> fs_;
  bool created_ = false;
};

}  // namespace tipfs::testing
