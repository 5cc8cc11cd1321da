// DiskWrapper: a Disk that forwards every call to the disk it wraps. The stacked disks (fault
// injection, health tracking, emulated timing, simulated crashes) derive from it and override
// only the calls they change, as RocksDB's EnvWrapper / FileSystemWrapper do.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stripe/disk.h"

namespace tipfs::stripe {

class DiskWrapper : public Disk {
 public:
  explicit DiskWrapper(std::unique_ptr<Disk> inner) : inner_(std::move(inner)) {}

  Disk* inner() const { return inner_.get(); }

  void Submit(DiskRequest request) override { inner_->Submit(std::move(request)); }
  Status Truncate(ObjectId object, uint64_t size) override {
    return inner_->Truncate(object, size);
  }
  Status Remove(ObjectId object) override { return inner_->Remove(object); }
  Result<ObjectInfo> Stat(ObjectId object) override { return inner_->Stat(object); }
  void StatAsync(ObjectId object, StatDone done) override {
    inner_->StatAsync(object, std::move(done));
  }
  Status ListObjects(std::vector<ObjectId>* out) override { return inner_->ListObjects(out); }
  Result<DiskUsage> Usage() override { return inner_->Usage(); }
  Result<uint64_t> Seek(ObjectId object, uint64_t offset, SeekKind kind) override {
    return inner_->Seek(object, offset, kind);
  }
  Status SyncAll() override { return inner_->SyncAll(); }
  std::string name() const override { return inner_->name(); }
  BackingIoInfo BackingIo() const override { return inner_->BackingIo(); }

 protected:
  const std::unique_ptr<Disk> inner_;
};

}  // namespace tipfs::stripe
