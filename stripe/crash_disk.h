// CrashDisk: a Disk wrapper that simulates losing power, in the style of SQLite's test6.c.
//
// Writes and truncates are held in memory, per object and in order, until a kSync of that object
// (or SyncAll) applies them to the inner disk and syncs it. Reads see the held operations laid over
// the inner disk's bytes, as they would see a page cache. Crash() then decides what of the
// unsynced operations "reached the platter": none, all, a random prefix of each object's list, or
// each write torn into `granularity`-byte sectors kept or lost at random — deterministically from a
// seed. Synced data always survives (unless an unsynced write over it survives in its place).
//
// Remove, Stat, ListObjects and Usage act at once (Remove is treated as durable immediately; a
// caller that needs a removed object to come back after a crash must model that itself).
// A write completes inline, before Submit returns; reads and syncs complete when the inner disk
// does.
//
// Thread-safety: all Disk methods may be called concurrently. Crash() REQUIRES that no request is
// in flight (call it between the workload and the check). Syncs of one object are serialized so
// that held writes reach the inner disk in order.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "stripe/disk_wrapper.h"
#include "util/mutex.h"

namespace tipfs::stripe {

class CrashDisk : public DiskWrapper {
 public:
  enum class CrashMode : uint8_t {
    kDropAll,       // nothing unsynced survives
    kKeepAll,       // everything survives (a crash right after the caches drained)
    kRandomPrefix,  // per object, the first k held operations survive, k uniform in [0, n]
    kTear,          // per write, each sector survives or not; per truncate, a coin flip
  };
  struct CrashOptions {
    CrashMode mode = CrashMode::kDropAll;
    uint64_t seed = 1;
    uint32_t granularity = 512;  // kTear: sector size in bytes, aligned to object offsets
  };

  explicit CrashDisk(std::unique_ptr<Disk> inner);
  ~CrashDisk() override;

  // Applies the surviving part of every held operation to the inner disk and forgets the rest;
  // afterwards the disk passes everything through until new writes arrive.
  Status Crash(const CrashOptions& options);

  // Held (unsynced) operations and the bytes their writes carry.
  uint64_t held_ops() const;
  uint64_t held_bytes() const;

  void Submit(DiskRequest request) override;
  Status Truncate(ObjectId object, uint64_t size) override;
  Status Remove(ObjectId object) override;
  Result<ObjectInfo> Stat(ObjectId object) override;
  // From Stat (Disk's defaults): the held writes are not in the inner disk's sizes, holes, data.
  void StatAsync(ObjectId object, StatDone done) override {
    Disk::StatAsync(object, std::move(done));
  }
  // From Stat (Disk's default): the held writes are not in the inner disk's holes and data.
  Result<uint64_t> Seek(ObjectId object, uint64_t offset, SeekKind kind) override {
    return Disk::Seek(object, offset, kind);
  }
  Status ListObjects(std::vector<ObjectId>* out) override;
  Status SyncAll() override;

 private:
  struct HeldOp {
    uint64_t seq = 0;
    bool truncate = false;
    uint64_t offset = 0;                      // write: where; truncate: the new size
    std::shared_ptr<const std::string> data;  // write only
  };
  struct ObjectState {
    std::vector<HeldOp> ops;
    bool syncing = false;
    bool removed_while_syncing = false;
    std::vector<std::function<void(Result<uint64_t>)>> waiting_syncs;
  };
  class SyncJob;

  // Lays `ops` over a buffer that holds the inner disk's bytes of [offset, offset + length),
  // `inner_bytes` of them valid; returns the bytes the read transfers.
  static uint64_t Overlay(const std::vector<HeldOp>& ops, uint64_t offset, uint64_t length,
                          char* buffer, uint64_t inner_bytes);
  void StartSync(ObjectId object, std::vector<std::function<void(Result<uint64_t>)>> waiters);
  void SyncFinished(ObjectId object, uint64_t max_seq, const Status& status,
                    std::vector<std::function<void(Result<uint64_t>)>> waiters);
  // Blocking helpers on the inner disk.
  Status InnerWrite(ObjectId object, uint64_t offset, const char* data, uint64_t length);

  mutable Mutex mu_;
  std::map<ObjectId, ObjectState> objects_ GUARDED_BY(mu_);
  uint64_t next_seq_ GUARDED_BY(mu_) = 1;
};

}  // namespace tipfs::stripe
