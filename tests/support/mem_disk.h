// MemDisk: a Disk held in memory, for unit tests of everything above stripe/. Objects are byte
// strings; reads past an object's end are short, as on a real disk. Submit completes the request
// inline, before it returns: wrap it in an EmulatedDisk on a FakeClock to model timing.
// Space is allocated in 4 KiB pages as ext4 allocates blocks: a written page holds data (Stat's
// allocated_bytes, Seek), a page never written is a hole. Thread-safe.
#pragma once

#include <map>
#include <set>
#include <string>

#include "stripe/disk.h"
#include "util/mutex.h"

namespace tipfs::testing {

class MemDisk : public stripe::Disk {
 public:
  explicit MemDisk(std::string name = "memdisk") : name_(std::move(name)) {}

  void Submit(stripe::DiskRequest request) override;
  Status Truncate(stripe::ObjectId object, uint64_t size) override;
  Status Remove(stripe::ObjectId object) override;
  Result<stripe::ObjectInfo> Stat(stripe::ObjectId object) override;
  Status ListObjects(std::vector<stripe::ObjectId>* out) override;
  Result<stripe::DiskUsage> Usage() override;
  Result<uint64_t> Seek(stripe::ObjectId object, uint64_t offset, stripe::SeekKind kind) override;
  Status SyncAll() override { return Status::OK(); }  // memory is as durable as it gets here
  std::string name() const override { return name_; }

  // Test access.
  std::string Contents(stripe::ObjectId object) const;
  // The DiskUsage::store_id Usage reports (0 by default: a store of its own).
  void set_store_id(uint64_t id);
  uint64_t requests() const;
  uint64_t bytes_used() const;

 private:
  const std::string name_;
  mutable Mutex mu_;
  static constexpr uint64_t kPage = 4096;
  std::map<stripe::ObjectId, std::string> objects_ GUARDED_BY(mu_);
  // Pages (offset / kPage) of each object that hold data.
  std::map<stripe::ObjectId, std::set<uint64_t>> pages_ GUARDED_BY(mu_);
  uint64_t requests_ GUARDED_BY(mu_) = 0;
  uint64_t store_id_ GUARDED_BY(mu_) = 0;
};

}  // namespace tipfs::testing
