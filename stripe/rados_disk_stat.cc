// RadosDisk's Stat: an object's size and the bytes its parts hold, asked without waiting
// (StatAsync), so the file system can ask every disk of a file, and about every entry of a
// READDIRPLUS reply, at once; and what a Stat learned, kept while the lease makes this mount the
// volume's only writer (rados_disk.h).
//
// A stat moves through these states: answered from what is known (no I/O, `done` inline) | the
// head's read op sent (its size and first page of part records, one round trip) -> completed
// (no head: NotFound; an error: OpError, where a timeout is EIO as for reads) -> (more records
// than a page: the next page sent, completed, again) -> a stat of each recorded part sent, all at
// once -> the last completion sums them (a recorded part never written is a hole) and runs
// `done` on librados' completion thread. Stat is StatAsync and a wait, so both map errors alike.
#include <algorithm>
#include <atomic>

#include "stripe/rados_disk.h"

namespace tipfs::stripe {

namespace {

// Objects whose size Stat knows before that cache starts over (each about a hundred bytes).
constexpr size_t kMaxKnownInfos = size_t{1} << 20;

}  // namespace

struct RadosDisk::StatRequest {
  // What an aio_stat of one part fills in.
  struct PartStat {
    StatRequest* request = nullptr;
    uint64_t size = 0;
    time_t mtime = 0;
    int rc = 0;
  };

  RadosDisk* disk = nullptr;
  ObjectId object = 0;
  uint64_t ticket = 0;  // InfoTicket: whether the answer may be kept
  StatDone done;
  // The head's read ops: the first also stats the head; each returns a page of records.
  rados_read_op_t op = nullptr;
  bool head_seen = false;  // the first page came back: the object exists
  uint64_t head_size = 0;
  time_t head_mtime = 0;
  int stat_rc = 0;
  rados_omap_iter_t iter = nullptr;
  unsigned char more = 0;
  int keys_rc = 0;
  std::string after;  // the last record key read
  std::vector<uint64_t> parts;
  std::vector<PartStat> part_stats;  // sized once before any is sent: completions point into it
  // Part stats not yet completed, plus one for the sender until it has sent them all.
  std::atomic<size_t> parts_left{0};
  int rc = 0;  // the error of a head read op or of sending one
};

Result<ObjectInfo> RadosDisk::Stat(ObjectId object) {
  Mutex mu;
  CondVar answered;
  bool finished = false;
  Result<ObjectInfo> answer = Status::IOError("stat pending");
  StatAsync(object, [&](Result<ObjectInfo> info) {
    MutexLock lock(&mu);
    answer = std::move(info);
    finished = true;
    answered.SignalAll();
  });
  MutexLock lock(&mu);
  while (!finished) answered.Wait(&mu);
  return answer;
}

void RadosDisk::StatAsync(ObjectId object, StatDone done) {
  ObjectInfo known;
  if (LookUpInfo(object, &known)) return done(known);
  auto* r = new StatRequest;
  r->disk = this;
  r->object = object;
  r->ticket = InfoTicket(object);
  r->done = std::move(done);
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  SendRecordsPage(r);
}

void RadosDisk::SendRecordsPage(StatRequest* r) {
  r->op = rados_create_read_op();
  if (!r->head_seen) rados_read_op_stat(r->op, &r->head_size, &r->head_mtime, &r->stat_rc);
  // librados encodes `after` into the op here, so the string may change before it completes.
  rados_read_op_omap_get_keys2(r->op, r->after.c_str(), kKeysPerCall, &r->iter, &r->more,
                               &r->keys_rc);
  stats_.Operation();
  rados_completion_t c = nullptr;
  rados_aio_create_completion2(r, &RadosDisk::RecordsPageDone, &c);
  const int rc =
      rados_aio_read_op_operate(r->op, ns_->ioctx(), c, PartName(r->object, 0).c_str(), 0);
  if (rc < 0) {
    rados_aio_release(c);
    rados_release_read_op(r->op);
    r->op = nullptr;
    r->rc = rc;
    FinishStat(r);
  }
}

void RadosDisk::RecordsPageDone(rados_completion_t completion, void* arg) {
  auto* r = static_cast<StatRequest*>(arg);
  int rc = rados_aio_get_return_value(completion);
  rados_aio_release(completion);
  rados_release_read_op(r->op);
  r->op = nullptr;
  if (rc >= 0) rc = r->stat_rc < 0 ? r->stat_rc : r->keys_rc;
  if (rc < 0) {
    if (r->iter != nullptr) rados_omap_get_end(r->iter);
    r->iter = nullptr;
    r->rc = rc;
    return r->disk->FinishStat(r);
  }
  r->head_seen = true;
  TakeRecords(r->iter, &r->parts, &r->after);
  r->iter = nullptr;
  if (r->more) return r->disk->SendRecordsPage(r);
  r->disk->SendPartStats(r);
}

void RadosDisk::SendPartStats(StatRequest* r) {
  if (r->parts.empty()) return FinishStat(r);
  std::sort(r->parts.begin(), r->parts.end());
  r->part_stats.resize(r->parts.size());
  r->parts_left.store(r->parts.size() + 1, std::memory_order_relaxed);
  for (size_t i = 0; i < r->parts.size(); ++i) {
    StatRequest::PartStat& p = r->part_stats[i];
    p.request = r;
    rados_completion_t c = nullptr;
    rados_aio_create_completion2(&p, &RadosDisk::PartStatDone, &c);
    stats_.Operation();
    const int sent = rados_aio_stat(ns_->ioctx(), PartName(r->object, r->parts[i]).c_str(), c,
                                    &p.size, &p.mtime);
    if (sent < 0) {
      rados_aio_release(c);
      p.rc = sent;
      r->parts_left.fetch_sub(1, std::memory_order_relaxed);  // the sender's one keeps it above 0
    }
  }
  if (r->parts_left.fetch_sub(1, std::memory_order_acq_rel) == 1) FinishStat(r);
}

void RadosDisk::PartStatDone(rados_completion_t completion, void* arg) {
  auto* p = static_cast<StatRequest::PartStat*>(arg);
  p->rc = rados_aio_get_return_value(completion);
  rados_aio_release(completion);
  StatRequest* r = p->request;
  if (r->parts_left.fetch_sub(1, std::memory_order_acq_rel) == 1) r->disk->FinishStat(r);
}

void RadosDisk::FinishStat(StatRequest* r) {
  int rc = r->rc;
  ObjectInfo info{r->head_size, r->head_size};
  for (size_t i = 0; i < r->part_stats.size(); ++i) {
    const StatRequest::PartStat& p = r->part_stats[i];
    if (p.rc == -ENOENT) continue;  // recorded, never written: a hole
    if (p.rc < 0) {
      rc = p.rc;
      continue;
    }
    info.size = std::max(info.size, r->parts[i] * object_size_ + p.size);
    info.allocated_bytes += p.size;
  }
  Result<ObjectInfo> result = info;
  if (rc == -ENOENT && !r->head_seen) {
    result =
        Status::NotFound(name_ + ": stat object " + PartName(r->object, 0) + ": no such object");
  } else if (rc < 0) {
    result = OpError("stat", r->object, 0, rc);
  } else {
    KeepInfo(r->object, r->ticket, info);
  }
  StatDone done = std::move(r->done);
  delete r;
  done(std::move(result));
  RequestEnded();
}

// ---- what Stat knows without asking ----

bool RadosDisk::LookUpInfo(ObjectId object, ObjectInfo* info) const {
  if (!CachesInfo()) return false;
  MutexLock lock(&info_mu_);
  auto it = info_.find(object);
  if (it == info_.end() || !it->second.known) return false;
  *info = it->second.info;
  return true;
}

uint64_t RadosDisk::InfoTicket(ObjectId object) const {
  if (!CachesInfo()) return 0;
  MutexLock lock(&info_mu_);
  auto it = info_.find(object);
  if (it != info_.end() && it->second.mutating > 0) return 0;
  return info_clock_;
}

void RadosDisk::KeepInfo(ObjectId object, uint64_t ticket, const ObjectInfo& info) {
  if (ticket == 0) return;
  MutexLock lock(&info_mu_);
  if (ticket <= info_cleared_at_) return;
  if (info_.size() >= kMaxKnownInfos) {
    // Start over, keeping what in-flight mutations need (the clock orders the rest).
    std::erase_if(info_, [](const auto& entry) { return entry.second.mutating == 0; });
    info_cleared_at_ = info_clock_++;
    return;
  }
  KnownInfo& known = info_[object];
  if (known.mutating > 0 || known.changed_at >= ticket) return;
  known.known = true;
  known.info = info;
}

void RadosDisk::BeginMutation(ObjectId object) {
  MutexLock lock(&info_mu_);
  KnownInfo& known = info_[object];
  known.known = false;
  ++known.mutating;
  known.changed_at = info_clock_++;
}

void RadosDisk::EndMutation(ObjectId object) {
  MutexLock lock(&info_mu_);
  KnownInfo& known = info_[object];
  if (known.mutating > 0) --known.mutating;
  known.changed_at = info_clock_++;
}

}  // namespace tipfs::stripe
