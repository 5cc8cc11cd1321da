// FaultyDisk: a Disk wrapper for tests that injects errors, switchable while the volume runs:
// fail reads and/or writes with a chosen errno (EIO, ENOSPC, EROFS, ...) always, after N more
// matching requests, or only for one object; or make the whole disk "disappear" so that every
// call, metadata calls included, fails. Requests that are not failed pass through to the inner
// disk unchanged. A failed Submit completes inline (done runs before Submit returns).
//
// "Writes" are kWrite and kSync requests and Truncate/Remove/SyncAll; "reads" are kRead requests
// and Stat. ListObjects and Usage fail only while the disk has disappeared.
//
// Thread-safety: all methods may be called concurrently, including while requests are in flight.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stripe/disk_wrapper.h"
#include "util/mutex.h"

namespace tipfs::stripe {

class FaultyDisk : public DiskWrapper {
 public:
  enum Ops : unsigned { kReads = 1, kWrites = 2, kReadsAndWrites = 3 };

  explicit FaultyDisk(std::unique_ptr<Disk> inner);

  // Every matching request fails with `err` until Heal().
  void FailAlways(unsigned ops, int err);
  // The next `ok_requests` matching requests pass; every one after them fails with `err`.
  void FailAfter(uint64_t ok_requests, unsigned ops, int err);
  // Matching requests on `object` fail with `err`; other objects are unaffected.
  void FailObject(ObjectId object, unsigned ops, int err);
  // Everything fails with `err` (EIO: a dead disk; ENOENT: its directory went away).
  void Disappear(int err = EIO);
  // Removes every rule.
  void Heal();

  // Requests and calls failed so far.
  uint64_t injected() const;

  void Submit(DiskRequest request) override;
  Status Truncate(ObjectId object, uint64_t size) override;
  Status Remove(ObjectId object) override;
  Result<ObjectInfo> Stat(ObjectId object) override;
  void StatAsync(ObjectId object, StatDone done) override;
  Result<uint64_t> Seek(ObjectId object, uint64_t offset, SeekKind kind) override;
  Status ListObjects(std::vector<ObjectId>* out) override;
  Result<DiskUsage> Usage() override;
  Status SyncAll() override;

 private:
  struct Rule {
    unsigned ops = 0;
    int err = EIO;
    uint64_t ok_left = 0;  // matching requests still let through before failing
    std::optional<ObjectId> object;
  };

  // The status an operation of kind `op` on `object` (none for disk-wide calls) gets: OK when it
  // should pass through.
  Status Check(unsigned op, std::optional<ObjectId> object, const char* what);

  mutable Mutex mu_;
  std::vector<Rule> rules_ GUARDED_BY(mu_);
  int disappeared_err_ GUARDED_BY(mu_) = 0;
  uint64_t injected_ GUARDED_BY(mu_) = 0;
};

}  // namespace tipfs::stripe
