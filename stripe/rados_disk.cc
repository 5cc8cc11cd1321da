// RadosDisk implementation; see rados_disk.h for the object layout and the request states.
#include "stripe/rados_disk.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "util/fnv1a.h"
#include "util/units.h"
#include "util/wait_notice.h"

namespace tipfs::stripe {

namespace {

// Cached records before the cache starts over (each costs a few dozen bytes).
constexpr size_t kMaxCachedRecords = size_t{1} << 20;
constexpr int64_t kUsageRefreshNs = int64_t{2} * 1000 * 1000 * 1000;

// DiskUsage::store_id of every disk on the cluster with this fsid, with the top bit set so it
// never meets PosixDisk's st_dev + 1 and is never 0.
uint64_t ClusterStoreId(const std::string& fsid) { return Fnv1a64(fsid) | (uint64_t{1} << 63); }

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string PartKey(uint64_t part) {
  char key[24];
  std::snprintf(key, sizeof(key), "%08" PRIx64, part);
  return key;
}

// Waits for a librados completion and returns its result.
int WaitFor(rados_completion_t c) {
  rados_aio_wait_for_complete(c);
  const int rc = rados_aio_get_return_value(c);
  rados_aio_release(c);
  return rc;
}

// The pool's replica count (`osd pool get POOL size`), 1 when the monitors do not say.
uint64_t PoolReplicas(const RadosNamespace& ns) {
  const std::string command = "{\"prefix\":\"osd pool get\",\"pool\":\"" + ns.pool() +
                              "\",\"var\":\"size\",\"format\":\"json\"}";
  const char* cmd[] = {command.c_str()};
  char* out = nullptr;
  char* status = nullptr;
  size_t out_len = 0;
  size_t status_len = 0;
  const int rc = rados_mon_command(ns.cluster()->handle(), cmd, 1, "", 0, &out, &out_len, &status,
                                   &status_len);
  uint64_t replicas = 1;
  if (rc == 0 && out != nullptr) {
    const std::string reply(out, out_len);
    const size_t at = reply.find("\"size\":");
    if (at != std::string::npos) replicas = std::strtoull(reply.c_str() + at + 7, nullptr, 10);
  }
  if (out != nullptr) rados_buffer_free(out);
  if (status != nullptr) rados_buffer_free(status);
  return std::max<uint64_t>(replicas, 1);
}

}  // namespace

// One part of a request: a contiguous range inside one RADOS object.
struct RadosDisk::Piece {
  Request* request = nullptr;
  uint64_t part = 0;
  uint64_t part_offset = 0;
  uint64_t length = 0;
  uint64_t request_offset = 0;  // where in the request's buffer
  rados_write_op_t write_op = nullptr;
  int result = 0;
};

struct RadosDisk::Request {
  RadosDisk* disk = nullptr;
  DiskRequest::Kind kind = DiskRequest::Kind::kRead;
  ObjectId object = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  char* buffer = nullptr;
  std::function<void(Result<uint64_t>)> done;
  int64_t started_ns = 0;
  std::vector<Piece> pieces;
  std::atomic<size_t> pending{0};
  // Writes: the parts >= 1 to record in the head before the data goes out.
  std::vector<uint64_t> to_record;
  rados_write_op_t record_op = nullptr;
  int record_result = 0;
};

std::string RadosDisk::PartName(ObjectId object, uint64_t part) {
  char name[32];
  std::snprintf(name, sizeof(name), "%016" PRIx64 ".%08" PRIx64, object, part);
  return name;
}

bool RadosDisk::ParsePartName(const std::string& name, ObjectId* object, uint64_t* part) {
  if (name.size() != 25 || name[16] != '.') return false;
  return ParseLowerHex(std::string_view(name).substr(0, 16), object) &&
         ParseLowerHex(std::string_view(name).substr(17, 8), part);
}

Result<std::unique_ptr<RadosDisk>> RadosDisk::Open(std::unique_ptr<RadosNamespace> ns,
                                                   RadosDiskOptions options,
                                                   std::unique_ptr<RadosLease> lease) {
  if (options.object_size < 4096 || (options.object_size & (options.object_size - 1)) != 0) {
    lease.reset();  // before the namespace it locks in (parameters go in no fixed order)
    return Status::InvalidArgument("RADOS object size " + std::to_string(options.object_size) +
                                   " must be a power of two of at least 4 KiB");
  }
  auto disk = std::unique_ptr<RadosDisk>(new RadosDisk(std::move(ns), options, std::move(lease)));
  disk->replicas_ = PoolReplicas(*disk->ns_);
  return disk;
}

RadosDisk::RadosDisk(std::unique_ptr<RadosNamespace> ns, RadosDiskOptions options,
                     std::unique_ptr<RadosLease> lease)
    : ns_(std::move(ns)),
      lease_(std::move(lease)),
      object_size_(options.object_size),
      store_id_(ClusterStoreId(ns_->cluster()->fsid())),
      name_("disk " + std::to_string(options.index) + " (" + ns_->display() + ")") {}

RadosDisk::~RadosDisk() {
  MutexLock lock(&drain_mu_);
  while (in_flight_.load() != 0) drained_.Wait(&drain_mu_);
}

Status RadosDisk::OpError(const char* what, ObjectId object, uint64_t offset, int rc) const {
  char buf[96];
  std::snprintf(buf, sizeof(buf), ": %s object %016" PRIx64 " at %" PRIu64, what, object, offset);
  return ns_->Error(name_ + buf, rc);
}

Status RadosDisk::CheckLease(const char* what, ObjectId object) const {
  if (lease_ == nullptr || lease_->valid()) return Status::OK();
  char buf[64];
  std::snprintf(buf, sizeof(buf), ": %s object %016" PRIx64 ": ", what, object);
  return Status::IOError(name_ + buf +
                         (lease_->lost() ? "this mount lost the volume's lease to another mount"
                                         : "the volume's lease could not be renewed (cluster "
                                           "unreachable)"));
}

// ---- the parts a head records, and the cache of them ----

bool RadosDisk::IsRecorded(ObjectId object, uint64_t part) const {
  MutexLock lock(&recorded_mu_);
  auto it = recorded_.find(object);
  return it != recorded_.end() && std::binary_search(it->second.begin(), it->second.end(), part);
}

void RadosDisk::NoteRecorded(ObjectId object, const std::vector<uint64_t>& parts) {
  MutexLock lock(&recorded_mu_);
  if (recorded_count_ + parts.size() > kMaxCachedRecords) {
    recorded_.clear();
    recorded_count_ = 0;
  }
  std::vector<uint64_t>& known = recorded_[object];
  for (uint64_t p : parts) {
    auto at = std::lower_bound(known.begin(), known.end(), p);
    if (at != known.end() && *at == p) continue;
    known.insert(at, p);
    ++recorded_count_;
  }
}

void RadosDisk::ForgetObject(ObjectId object) {
  MutexLock lock(&recorded_mu_);
  auto it = recorded_.find(object);
  if (it == recorded_.end()) return;
  recorded_count_ -= it->second.size();
  recorded_.erase(it);
}

void RadosDisk::TakeRecords(rados_omap_iter_t iter, std::vector<uint64_t>* parts,
                            std::string* after) {
  while (true) {
    char* key = nullptr;
    char* value = nullptr;
    size_t key_len = 0;
    size_t value_len = 0;
    if (rados_omap_get_next2(iter, &key, &value, &key_len, &value_len) != 0 || key == nullptr) {
      break;
    }
    uint64_t part;
    if (key_len == 8 && ParseLowerHex(std::string_view(key, 8), &part) && part > 0) {
      parts->push_back(part);
    }
    after->assign(key, key_len);
  }
  rados_omap_get_end(iter);
}

Status RadosDisk::RecordedParts(ObjectId object, std::string after,
                                std::vector<uint64_t>* parts) const {
  const std::string head = PartName(object, 0);
  while (true) {
    rados_read_op_t op = rados_create_read_op();
    rados_omap_iter_t iter = nullptr;
    unsigned char more = 0;
    int key_rc = 0;
    rados_read_op_omap_get_keys2(op, after.c_str(), kKeysPerCall, &iter, &more, &key_rc);
    stats_.Operation();
    int rc = rados_read_op_operate(op, ns_->ioctx(), head.c_str(), 0);
    rados_release_read_op(op);
    if (rc == -ENOENT) return Status::NotFound(name_ + ": object " + head + " does not exist");
    if (rc >= 0) rc = key_rc;
    if (rc < 0) {
      if (iter != nullptr) rados_omap_get_end(iter);
      return OpError("list the parts of", object, 0, rc);
    }
    TakeRecords(iter, parts, &after);
    if (!more) break;
  }
  std::sort(parts->begin(), parts->end());
  return Status::OK();
}

Result<std::vector<uint64_t>> RadosDisk::RecordedParts(ObjectId object) const {
  std::vector<uint64_t> parts;
  TIPFS_RETURN_IF_ERROR(RecordedParts(object, "", &parts));
  return parts;
}

Status RadosDisk::Record(ObjectId object, const std::vector<uint64_t>& parts) {
  if (parts.empty()) return Status::OK();
  std::vector<std::string> keys;
  for (uint64_t p : parts) keys.push_back(PartKey(p));
  std::vector<const char*> key_ptrs, values;
  std::vector<size_t> lengths(keys.size(), 0);
  for (const std::string& k : keys) {
    key_ptrs.push_back(k.c_str());
    values.push_back("");
  }
  rados_write_op_t op = rados_create_write_op();
  rados_write_op_omap_set(op, key_ptrs.data(), values.data(), lengths.data(), keys.size());
  stats_.Operation();
  const int rc = rados_write_op_operate(op, ns_->ioctx(), PartName(object, 0).c_str(), nullptr,
                                        LIBRADOS_OPERATION_FULL_TRY);
  rados_release_write_op(op);
  if (rc < 0) return OpError("record the parts of", object, 0, rc);
  NoteRecorded(object, parts);
  return Status::OK();
}

Status RadosDisk::ForgetRecords(ObjectId object, const std::vector<uint64_t>& parts) {
  if (parts.empty()) return Status::OK();
  std::vector<std::string> keys;
  for (uint64_t p : parts) keys.push_back(PartKey(p));
  std::vector<const char*> key_ptrs;
  for (const std::string& k : keys) key_ptrs.push_back(k.c_str());
  rados_write_op_t op = rados_create_write_op();
  rados_write_op_omap_rm_keys(op, key_ptrs.data(), key_ptrs.size());
  stats_.Operation();
  const int rc = rados_write_op_operate(op, ns_->ioctx(), PartName(object, 0).c_str(), nullptr,
                                        LIBRADOS_OPERATION_FULL_TRY);
  rados_release_write_op(op);
  if (rc < 0 && rc != -ENOENT) return OpError("drop the records of", object, 0, rc);
  return Status::OK();
}

Status RadosDisk::RemoveParts(ObjectId object, const std::vector<uint64_t>& parts) {
  std::vector<rados_completion_t> pending;
  Status status;
  for (uint64_t p : parts) {
    rados_completion_t c = nullptr;
    rados_aio_create_completion2(nullptr, nullptr, &c);
    stats_.Operation();
    const int rc = rados_aio_remove(ns_->ioctx(), PartName(object, p).c_str(), c);
    if (rc < 0) {
      rados_aio_release(c);
      status = MergeDiskErrors(status, OpError("remove", object, p * object_size_, rc));
      continue;
    }
    pending.push_back(c);
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    const int rc = WaitFor(pending[i]);
    if (rc < 0 && rc != -ENOENT) {
      status = MergeDiskErrors(status, OpError("remove", object, parts[i] * object_size_, rc));
    }
  }
  return status;
}

// ---- asynchronous reads and writes ----

void RadosDisk::Submit(DiskRequest request) {
  const DiskRequest::Kind kind = request.kind;
  if (kind == DiskRequest::Kind::kSync) {
    // RADOS acknowledges a write once it is committed on every replica: nothing to flush.
    stats_.Started();
    stats_.Finished(RadosStatsRecorder::Kind::kSync, 0, 0, false, false);
    request.done(uint64_t{0});
    return;
  }
  if (request.length == 0) {
    request.done(uint64_t{0});
    return;
  }
  if (kind == DiskRequest::Kind::kWrite) {
    Status lease = CheckLease("write", request.object);
    if (!lease.ok()) {
      request.done(std::move(lease));
      return;
    }
  }
  // Until it completes, Stat asks the cluster about this object (see the header comment).
  if (kind == DiskRequest::Kind::kWrite) BeginMutation(request.object);
  auto* r = new Request();
  r->disk = this;
  r->kind = kind;
  r->object = request.object;
  r->offset = request.offset;
  r->length = request.length;
  r->buffer = request.buffer;
  r->done = std::move(request.done);
  r->started_ns = SteadyNanos();
  uint64_t at = request.offset;
  const uint64_t end = request.offset + request.length;
  while (at < end) {
    Piece piece;
    piece.request = r;
    piece.part = at / object_size_;
    piece.part_offset = at % object_size_;
    piece.length = std::min<uint64_t>(end - at, object_size_ - piece.part_offset);
    piece.request_offset = at - request.offset;
    if (kind == DiskRequest::Kind::kWrite && piece.part > 0 && !IsRecorded(r->object, piece.part)) {
      r->to_record.push_back(piece.part);
    }
    r->pieces.push_back(piece);
    at += piece.length;
  }
  stats_.Started();
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  if (r->to_record.empty()) {
    SendPieces(r);
    return;
  }
  // Record the new parts in the head first, so Truncate and Remove always find them.
  std::vector<std::string> keys;
  for (uint64_t p : r->to_record) keys.push_back(PartKey(p));
  std::vector<const char*> key_ptrs, values;
  std::vector<size_t> lengths(keys.size(), 0);
  for (const std::string& k : keys) {
    key_ptrs.push_back(k.c_str());
    values.push_back("");
  }
  r->record_op = rados_create_write_op();
  rados_write_op_omap_set(r->record_op, key_ptrs.data(), values.data(), lengths.data(),
                          keys.size());
  rados_completion_t c = nullptr;
  rados_aio_create_completion2(r, &RadosDisk::RecordDone, &c);
  stats_.Operation();
  const int rc =
      rados_aio_write_op_operate(r->record_op, ns_->ioctx(), c, PartName(r->object, 0).c_str(),
                                 nullptr, LIBRADOS_OPERATION_FULL_TRY);
  if (rc < 0) {
    rados_aio_release(c);
    rados_release_write_op(r->record_op);
    r->record_op = nullptr;
    r->record_result = rc;
    r->pieces.clear();
    Finish(r);
  }
}

void RadosDisk::RecordDone(rados_completion_t completion, void* arg) {
  auto* r = static_cast<Request*>(arg);
  r->record_result = rados_aio_get_return_value(completion);
  rados_aio_release(completion);
  rados_release_write_op(r->record_op);
  r->record_op = nullptr;
  if (r->record_result < 0) {
    r->pieces.clear();
    r->disk->Finish(r);
    return;
  }
  r->disk->NoteRecorded(r->object, r->to_record);
  r->disk->SendPieces(r);
}

void RadosDisk::SendPieces(Request* r) {
  const size_t count = r->pieces.size();
  r->pending.store(count, std::memory_order_relaxed);
  const bool write = r->kind == DiskRequest::Kind::kWrite;
  stats_.Operation(count);
  // The last completion frees `r`, so the loop reads nothing of it after the last send.
  Piece* pieces = r->pieces.data();
  const ObjectId object = r->object;
  char* buffer = r->buffer;
  for (size_t i = 0; i < count; ++i) {
    Piece* piece = &pieces[i];
    const std::string oid = PartName(object, piece->part);
    char* data = buffer + piece->request_offset;
    rados_completion_t c = nullptr;
    rados_aio_create_completion2(piece, &RadosDisk::PieceDone, &c);
    int rc;
    if (write) {
      piece->write_op = rados_create_write_op();
      rados_write_op_write(piece->write_op, data, piece->length, piece->part_offset);
      rc = rados_aio_write_op_operate(piece->write_op, ns_->ioctx(), c, oid.c_str(), nullptr,
                                      LIBRADOS_OPERATION_FULL_TRY);
    } else {
      rc = rados_aio_read(ns_->ioctx(), oid.c_str(), c, data, piece->length, piece->part_offset);
    }
    if (rc < 0) {
      rados_aio_release(c);
      if (piece->write_op != nullptr) rados_release_write_op(piece->write_op);
      piece->write_op = nullptr;
      piece->result = rc;
      if (r->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish(r);
    }
  }
}

void RadosDisk::PieceDone(rados_completion_t completion, void* arg) {
  auto* piece = static_cast<Piece*>(arg);
  piece->result = rados_aio_get_return_value(completion);
  rados_aio_release(completion);
  if (piece->write_op != nullptr) {
    rados_release_write_op(piece->write_op);
    piece->write_op = nullptr;
  }
  Request* r = piece->request;
  if (r->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) r->disk->Finish(r);
}

void RadosDisk::Finish(Request* r) {
  const bool write = r->kind == DiskRequest::Kind::kWrite;
  Status status;
  int first_rc = r->record_result;
  if (first_rc < 0) status = OpError("record the parts of", r->object, r->offset, first_rc);
  uint64_t transferred = 0;
  for (const Piece& p : r->pieces) {
    int rc = p.result;
    if (!write && rc == -ENOENT) rc = 0;  // a part never written: a hole
    if (rc < 0) {
      if (first_rc == 0) first_rc = rc;
      status = MergeDiskErrors(
          status, OpError(write ? "write" : "read", r->object, r->offset + p.request_offset, rc));
      continue;
    }
    if (write) continue;
    const uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(rc), p.length);
    // A short part is a hole up to the part's end; a later part may still hold data.
    if (n < p.length) std::memset(r->buffer + p.request_offset + n, 0, p.length - n);
    if (n > 0) transferred = std::max(transferred, p.request_offset + n);
  }
  if (write && status.ok()) transferred = r->length;
  stats_.Finished(write ? RadosStatsRecorder::Kind::kWrite : RadosStatsRecorder::Kind::kRead,
                  SteadyNanos() - r->started_ns, status.ok() ? transferred : 0, !status.ok(),
                  first_rc == -ETIMEDOUT);
  if (write) EndMutation(r->object);
  auto done = std::move(r->done);
  delete r;
  if (status.ok()) {
    done(transferred);
  } else {
    done(std::move(status));
  }
  RequestEnded();
}

void RadosDisk::RequestEnded() {
  if (in_flight_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    // Notify under the lock: the destructor may free the disk as soon as it sees zero.
    MutexLock lock(&drain_mu_);
    drained_.SignalAll();
  }
}

// ---- synchronous calls ----
// Each is a round trip to the cluster at least: a thread that must stay responsive is told first
// (util/wait_notice.h).

Status RadosDisk::Truncate(ObjectId object, uint64_t size) {
  TIPFS_RETURN_IF_ERROR(CheckLease("truncate", object));
  NoticeWait();
  BeginMutation(object);
  Status status = TruncateParts(object, size);
  EndMutation(object);
  return status;
}

Status RadosDisk::TruncateParts(ObjectId object, uint64_t size) {
  Result<std::vector<uint64_t>> recorded = RecordedParts(object);
  const bool head_exists = recorded.ok();
  if (!recorded.ok() && recorded.error() != ENOENT) return recorded.status();
  const std::vector<uint64_t> parts = head_exists ? *recorded : std::vector<uint64_t>();
  if (size == 0 && !head_exists) return Status::OK();  // missing and size 0: nothing to make

  const uint64_t last = size == 0 ? 0 : (size - 1) / object_size_;
  const uint64_t last_length = size - last * object_size_;
  std::vector<uint64_t> beyond;
  for (uint64_t p : parts) {
    if (p > last) beyond.push_back(p);
  }
  if (!beyond.empty()) {
    // Data first, records after: a crash in between leaves records without parts (harmless).
    ForgetObject(object);
    TIPFS_RETURN_IF_ERROR(RemoveParts(object, beyond));
    TIPFS_RETURN_IF_ERROR(ForgetRecords(object, beyond));
  }
  if (last > 0 && !std::binary_search(parts.begin(), parts.end(), last)) {
    TIPFS_RETURN_IF_ERROR(Record(object, {last}));
  }
  rados_write_op_t op = rados_create_write_op();
  rados_write_op_create(op, LIBRADOS_CREATE_IDEMPOTENT, nullptr);
  rados_write_op_truncate(op, last_length);
  stats_.Operation();
  const int rc = rados_write_op_operate(op, ns_->ioctx(), PartName(object, last).c_str(), nullptr,
                                        LIBRADOS_OPERATION_FULL_TRY);
  rados_release_write_op(op);
  if (rc < 0) return OpError("truncate", object, size, rc);
  return Status::OK();
}

Status RadosDisk::Remove(ObjectId object) {
  TIPFS_RETURN_IF_ERROR(CheckLease("remove", object));
  NoticeWait();
  BeginMutation(object);
  Status status = RemoveAllParts(object);
  EndMutation(object);
  return status;
}

Status RadosDisk::RemoveAllParts(ObjectId object) {
  ForgetObject(object);
  Result<std::vector<uint64_t>> parts = RecordedParts(object);
  if (!parts.ok()) return parts.error() == ENOENT ? Status::OK() : parts.status();
  TIPFS_RETURN_IF_ERROR(RemoveParts(object, *parts));
  // The head goes last: while it exists, its records find the parts left.
  stats_.Operation();
  const int rc = rados_remove(ns_->ioctx(), PartName(object, 0).c_str());
  if (rc < 0 && rc != -ENOENT) return OpError("remove", object, 0, rc);
  ForgetObject(object);
  return Status::OK();
}

Status RadosDisk::ListObjects(std::vector<ObjectId>* out) {
  std::vector<std::string> names;
  TIPFS_RETURN_IF_ERROR(ns_->ListObjectNames(&names));
  std::set<ObjectId> ids;
  for (const std::string& name : names) {
    ObjectId object;
    uint64_t part;
    if (ParsePartName(name, &object, &part)) ids.insert(object);
  }
  out->insert(out->end(), ids.begin(), ids.end());
  return Status::OK();
}

Result<DiskUsage> RadosDisk::Usage() {
  MutexLock lock(&usage_mu_);
  const int64_t now = SteadyNanos();
  // statfs is frequent (df, every file manager); the monitors' figures change slowly.
  if (usage_at_ns_ != 0 && now - usage_at_ns_ < kUsageRefreshNs) return usage_;
  rados_cluster_stat_t s;
  const int rc = rados_cluster_stat(ns_->cluster()->handle(), &s);
  if (rc < 0) return ns_->Error(name_ + ": cluster usage", rc);
  // Raw space holds `replicas` copies of every byte. Every pool and namespace of a cluster draws
  // on the same raw space, so each disk reports all of it and statfs counts the cluster once.
  usage_.total_bytes = s.kb * 1024 / replicas_;
  usage_.free_bytes = s.kb_avail * 1024 / replicas_;
  usage_.store_id = store_id_;
  // RADOS has no inode table: objects are limited by space alone.
  usage_.total_files = uint64_t{1} << 40;
  usage_.free_files = uint64_t{1} << 40;
  usage_at_ns_ = now;
  return usage_;
}

Status RadosDisk::SyncAll() {
  // Completed writes are committed already; this waits for the ones still in flight.
  const int rc = rados_aio_flush(ns_->ioctx());
  return rc < 0 ? ns_->Error(name_ + ": flush", rc) : Status::OK();
}

// ---- fsck ----

Status RadosDisk::CheckParts(bool repair, std::vector<RadosPartProblem>* out) {
  std::vector<std::string> names;
  TIPFS_RETURN_IF_ERROR(ns_->ListObjectNames(&names));
  std::map<ObjectId, std::set<uint64_t>> present;
  for (const std::string& name : names) {
    ObjectId object;
    uint64_t part;
    if (ParsePartName(name, &object, &part)) present[object].insert(part);
  }
  for (const auto& [object, parts] : present) {
    Result<std::vector<uint64_t>> recorded = RecordedParts(object);
    if (!recorded.ok() && recorded.error() != ENOENT) return recorded.status();
    const std::set<uint64_t> records = recorded.ok()
                                           ? std::set<uint64_t>(recorded->begin(), recorded->end())
                                           : std::set<uint64_t>();
    for (uint64_t p : parts) {
      if (p == 0 || records.count(p) != 0) continue;
      RadosPartProblem problem{RadosPartProblem::Kind::kUnrecorded, object, p};
      if (repair) {
        BeginMutation(object);
        problem.repair_error = Record(object, {p});
        EndMutation(object);
        problem.repaired = problem.repair_error.ok();
      }
      out->push_back(std::move(problem));
    }
    for (uint64_t p : records) {
      if (parts.count(p) != 0) continue;
      RadosPartProblem problem{RadosPartProblem::Kind::kStaleRecord, object, p};
      if (repair) {
        ForgetObject(object);
        BeginMutation(object);
        problem.repair_error = ForgetRecords(object, {p});
        EndMutation(object);
        problem.repaired = problem.repair_error.ok();
      }
      out->push_back(std::move(problem));
    }
  }
  return Status::OK();
}

}  // namespace tipfs::stripe
