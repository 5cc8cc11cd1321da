// RadosDisk: a Disk whose objects live in a pool (or a namespace of one) of a Ceph cluster,
// through librados' asynchronous C API. Same contract as PosixDisk (stripe/disk.h): reads,
// writes, syncs, truncation, removal, sizes, holes that read as zeros, errors as errnos.
//
// Objects are bounded. RADOS refuses objects larger than osd_max_object_size (128 MiB by
// default) and moves, scrubs and recovers whole objects, so tipfs's per-file, per-disk object is
// cut into RADOS objects of `object_size` bytes (4 MiB by default, as RBD and CephFS do):
//   <16 hex inode>.<8 hex k>   bytes [k * object_size, (k + 1) * object_size) of the object
// Part 0 is the head: besides its bytes it records, as omap keys (<8 hex k>), every part k >= 1
// that was ever written, so truncation and removal find every part without listing the pool,
// and Stat finds the end without probing. A part is recorded before its first write is sent (the
// omap update is idempotent, so concurrent writes need no ordering), which leaves at worst a
// record without a part after a crash (harmless, fsck drops it). docs/DESIGN.md says why this
// and not libradosstriper.
//
// A request moves through these states: split into parts -> (writes to unrecorded parts: the
// head's omap update sent, completed) -> one librados aio per part sent -> each part completed
// (a read of a missing part is a hole; a short read is the end of the part) -> the last part's
// completion merges the results and runs `done` on librados' completion thread. A cluster that
// does not answer within the operation timeout fails the request with EIO (RadosStatus); a full
// pool or quota fails a write at once with ENOSPC/EDQUOT (LIBRADOS_OPERATION_FULL_TRY) instead
// of blocking it. Writes are durable when they complete (RADOS acknowledges after commit), so a
// kSync completes at once.
//
// With a lease (rados_lease.h), every write, truncate and remove first checks that the lease is
// valid and fails with EIO when this mount lost the volume.
//
// Stat is one round trip (the head's size and records in one read op, plus a stat of each other
// part, all at once); with a valid lease, none for an object it has stat'ed before: the lease
// makes this mount the volume's only writer, so what a Stat learned stays true until this disk's
// own next write, truncate or remove of that object, which forget it (a Stat racing one keeps
// nothing). The file system stats every disk a file touches whenever the kernel looks the file
// up, through StatAsync, so the disks of a file and the entries of a READDIRPLUS reply are asked
// at once (rados_disk_stat.cc).
//
// Thread-safety: all methods may be called concurrently. `done` never runs inside Submit except
// for requests that need no I/O (length 0, syncs, refused ones).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "stripe/disk.h"
#include "stripe/label.h"
#include "stripe/rados_cluster.h"
#include "stripe/rados_lease.h"
#include "stripe/rados_stats.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace tipfs::stripe {

struct RadosDiskOptions {
  uint32_t index = 0;                              // for messages: "disk 2 (...)"
  uint32_t object_size = kDefaultRadosObjectSize;  // bytes per RADOS object
};

// A finding of CheckParts (fsck).
struct RadosPartProblem {
  enum class Kind : uint8_t {
    kUnrecorded,   // a part the head does not record: removal would leave it behind
    kStaleRecord,  // a record of a part that does not exist (a crash between record and write)
  };
  Kind kind = Kind::kUnrecorded;
  ObjectId object = 0;
  uint64_t part = 0;
  bool repaired = false;
  Status repair_error;
};

class RadosDisk : public Disk {
 public:
  // `lease` may be null (tests, tools that only read).
  static Result<std::unique_ptr<RadosDisk>> Open(std::unique_ptr<RadosNamespace> ns,
                                                 RadosDiskOptions options,
                                                 std::unique_ptr<RadosLease> lease = nullptr);
  // Waits for this disk's requests in flight, then releases the lease.
  ~RadosDisk() override;

  void Submit(DiskRequest request) override;
  Status Truncate(ObjectId object, uint64_t size) override;
  Status Remove(ObjectId object) override;
  Result<ObjectInfo> Stat(ObjectId object) override;
  void StatAsync(ObjectId object, StatDone done) override;
  Status ListObjects(std::vector<ObjectId>* out) override;
  Result<DiskUsage> Usage() override;
  Status SyncAll() override;
  std::string name() const override { return name_; }

  RadosDiskStats Stats() const { return stats_.Snapshot(); }
  const RadosNamespace& rados_namespace() const { return *ns_; }
  uint32_t object_size() const { return object_size_; }

  // fsck: compares the parts in the namespace with the heads' records; with `repair`, records
  // unrecorded parts (a later size check then trims what lies past the file) and drops stale
  // records. Appends one entry per finding.
  Status CheckParts(bool repair, std::vector<RadosPartProblem>* out);

  // "000000000000002a.00000003"; Parse accepts exactly that form.
  static std::string PartName(ObjectId object, uint64_t part);
  static bool ParsePartName(const std::string& name, ObjectId* object, uint64_t* part);

 private:
  struct Request;
  struct Piece;
  struct StatRequest;
  static constexpr size_t kKeysPerCall = 1024;  // omap keys asked for per read op

  RadosDisk(std::unique_ptr<RadosNamespace> ns, RadosDiskOptions options,
            std::unique_ptr<RadosLease> lease);

  Status CheckLease(const char* what, ObjectId object) const;
  Status TruncateParts(ObjectId object, uint64_t size);
  Status RemoveAllParts(ObjectId object);
  Status OpError(const char* what, ObjectId object, uint64_t offset, int rc) const;
  // The parts >= 1 the head of `object` records (NotFound: no head), after key `after` ("" for
  // all), appended to *parts.
  Status RecordedParts(ObjectId object, std::string after, std::vector<uint64_t>* parts) const;
  Result<std::vector<uint64_t>> RecordedParts(ObjectId object) const;
  Status Record(ObjectId object, const std::vector<uint64_t>& parts);
  Status ForgetRecords(ObjectId object, const std::vector<uint64_t>& parts);
  // Removes the given parts, all at once; a part already gone is fine.
  Status RemoveParts(ObjectId object, const std::vector<uint64_t>& parts);

  // What Stat knows without asking (see the header comment). A fetch takes a ticket before it
  // asks and keeps its answer only if no mutation of the object began or ended since.
  struct KnownInfo {
    bool known = false;
    ObjectInfo info;
    uint32_t mutating = 0;    // writes, truncates, removes of the object in progress
    uint64_t changed_at = 0;  // info_clock_ when the last one began or ended
  };
  bool CachesInfo() const { return lease_ != nullptr && lease_->valid(); }
  bool LookUpInfo(ObjectId object, ObjectInfo* info) const;
  uint64_t InfoTicket(ObjectId object) const;  // 0: do not keep what comes back
  void KeepInfo(ObjectId object, uint64_t ticket, const ObjectInfo& info);
  void BeginMutation(ObjectId object);
  void EndMutation(ObjectId object);
  // The states of a StatAsync that asks the cluster (rados_disk_stat.cc).
  void SendRecordsPage(StatRequest* request);
  static void RecordsPageDone(rados_completion_t completion, void* arg);
  void SendPartStats(StatRequest* request);
  static void PartStatDone(rados_completion_t completion, void* arg);
  void FinishStat(StatRequest* request);
  // Appends the part numbers among the keys of `iter` to *parts and moves *after to the last key;
  // ends the iterator.
  static void TakeRecords(rados_omap_iter_t iter, std::vector<uint64_t>* parts, std::string* after);

  bool IsRecorded(ObjectId object, uint64_t part) const;
  void NoteRecorded(ObjectId object, const std::vector<uint64_t>& parts);
  void ForgetObject(ObjectId object);

  void SendPieces(Request* request);
  static void PieceDone(rados_completion_t completion, void* arg);
  static void RecordDone(rados_completion_t completion, void* arg);
  void Finish(Request* request);
  // Every asynchronous request (I/O or stat) ends here, last; the destructor waits for all.
  void RequestEnded();

  // Constant after construction.
  const std::unique_ptr<RadosNamespace> ns_;
  const std::unique_ptr<RadosLease> lease_;
  const uint32_t object_size_;
  const uint64_t store_id_;  // DiskUsage::store_id: one per cluster
  const std::string name_;
  uint64_t replicas_ = 1;  // the pool's size, read at open

  // Parts known to be recorded in their head (a cache: a miss only costs an idempotent update).
  // Lock order: no other lock is taken while holding one of these.
  mutable Mutex recorded_mu_;
  std::unordered_map<ObjectId, std::vector<uint64_t>> recorded_ GUARDED_BY(recorded_mu_);
  size_t recorded_count_ GUARDED_BY(recorded_mu_) = 0;

  Mutex usage_mu_;
  int64_t usage_at_ns_ GUARDED_BY(usage_mu_) = 0;  // when `usage_` was fetched
  DiskUsage usage_ GUARDED_BY(usage_mu_);

  mutable RadosStatsRecorder stats_;

  // Lock order: no other lock is taken while holding info_mu_.
  mutable Mutex info_mu_;
  std::unordered_map<ObjectId, KnownInfo> info_ GUARDED_BY(info_mu_);
  uint64_t info_clock_ GUARDED_BY(info_mu_) = 1;
  uint64_t info_cleared_at_ GUARDED_BY(info_mu_) = 0;

  Mutex drain_mu_;
  CondVar drained_;
  std::atomic<uint64_t> in_flight_{0};
};

}  // namespace tipfs::stripe
