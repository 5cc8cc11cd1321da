// CrashDisk implementation; see crash_disk.h for the model.
#include "stripe/crash_disk.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <set>

#include "util/mutex.h"

namespace tipfs::stripe {

namespace {

// Runs one request on `disk` and waits for it.
Result<uint64_t> SubmitAndWait(Disk* disk, DiskRequest request) {
  Mutex mu;
  CondVar cv;
  bool finished = false;
  Result<uint64_t> result = uint64_t{0};
  request.done = [&](Result<uint64_t> r) {
    MutexLock lock(&mu);
    result = std::move(r);
    finished = true;
    cv.Signal();
  };
  disk->Submit(std::move(request));
  MutexLock lock(&mu);
  while (!finished) cv.Wait(&mu);
  return result;
}

}  // namespace

// Applies a snapshot of one object's held operations to the inner disk, in order, then syncs it.
// Writes complete either inline or later; `step_flag_` lets whichever of Submit's return and the
// completion comes second continue, so inline completions never recurse.
class CrashDisk::SyncJob {
 public:
  SyncJob(CrashDisk* disk, ObjectId object, std::vector<HeldOp> ops, uint64_t max_seq,
          std::vector<std::function<void(Result<uint64_t>)>> waiters)
      : disk_(disk),
        object_(object),
        ops_(std::move(ops)),
        max_seq_(max_seq),
        waiters_(std::move(waiters)) {}

  void Run() {
    while (next_ < ops_.size()) {
      const HeldOp& op = ops_[next_++];
      if (op.truncate) {
        Status s = disk_->inner_->Truncate(object_, op.offset);
        if (!s.ok()) return Finish(s);
        continue;
      }
      step_flag_.store(false);
      DiskRequest w;
      w.kind = DiskRequest::Kind::kWrite;
      w.object = object_;
      w.offset = op.offset;
      w.length = op.data->size();
      w.buffer = const_cast<char*>(op.data->data());
      w.done = [this](Result<uint64_t> r) {
        if (!r.ok()) error_ = r.status();
        if (step_flag_.exchange(true)) Continue();
      };
      disk_->inner_->Submit(std::move(w));
      if (!step_flag_.exchange(true)) return;  // the completion will continue
      if (!error_.ok()) return Finish(error_);
    }
    DiskRequest sync;
    sync.kind = DiskRequest::Kind::kSync;
    sync.object = object_;
    sync.done = [this](Result<uint64_t> r) { Finish(r.status()); };
    disk_->inner_->Submit(std::move(sync));
  }

 private:
  void Continue() {
    if (!error_.ok()) return Finish(error_);
    Run();
  }
  void Finish(const Status& s) {
    disk_->SyncFinished(object_, max_seq_, s, std::move(waiters_));
    delete this;
  }

  CrashDisk* const disk_;
  const ObjectId object_;
  const std::vector<HeldOp> ops_;
  const uint64_t max_seq_;
  std::vector<std::function<void(Result<uint64_t>)>> waiters_;
  size_t next_ = 0;
  std::atomic<bool> step_flag_{false};
  Status error_;
};

CrashDisk::CrashDisk(std::unique_ptr<Disk> inner) : DiskWrapper(std::move(inner)) {}

CrashDisk::~CrashDisk() = default;

uint64_t CrashDisk::Overlay(const std::vector<HeldOp>& ops, uint64_t offset, uint64_t length,
                            char* buffer, uint64_t inner_bytes) {
  const uint64_t end = offset + length;
  if (inner_bytes < length) std::memset(buffer + inner_bytes, 0, length - inner_bytes);
  // `size` stands for the object's length as far as this window can tell: exact after a short
  // inner read or a truncate, otherwise "at least the window's end" (which clamps the same).
  uint64_t size = offset + inner_bytes;
  for (const HeldOp& op : ops) {
    if (op.truncate) {
      if (op.offset < end) {
        const uint64_t from = std::max(op.offset, offset);
        std::memset(buffer + (from - offset), 0, end - from);
      }
      size = op.offset;
      continue;
    }
    const uint64_t op_end = op.offset + op.data->size();
    const uint64_t from = std::max(op.offset, offset);
    const uint64_t to = std::min(op_end, end);
    if (from < to)
      std::memcpy(buffer + (from - offset), op.data->data() + (from - op.offset), to - from);
    size = std::max(size, op_end);
  }
  return size > offset ? std::min(length, size - offset) : 0;
}

void CrashDisk::Submit(DiskRequest request) {
  switch (request.kind) {
    case DiskRequest::Kind::kWrite: {
      if (request.length == 0) {
        request.done(uint64_t{0});
        return;
      }
      auto data = std::make_shared<const std::string>(request.buffer, request.length);
      {
        MutexLock lock(&mu_);
        objects_[request.object].ops.push_back(HeldOp{next_seq_++, false, request.offset, data});
      }
      request.done(request.length);
      return;
    }
    case DiskRequest::Kind::kRead: {
      std::vector<HeldOp> snapshot;
      {
        MutexLock lock(&mu_);
        auto it = objects_.find(request.object);
        if (it != objects_.end()) snapshot = it->second.ops;
      }
      if (snapshot.empty()) {
        inner_->Submit(std::move(request));
        return;
      }
      // The snapshot is taken before the inner read starts, so ops a concurrent sync is applying
      // are laid over again: the result is the same bytes.
      auto done = std::move(request.done);
      const uint64_t offset = request.offset;
      const uint64_t length = request.length;
      char* buffer = request.buffer;
      request.done = [ops = std::move(snapshot), done = std::move(done), offset, length,
                      buffer](Result<uint64_t> r) {
        if (!r.ok()) return done(std::move(r));
        done(Overlay(ops, offset, length, buffer, std::min(*r, length)));
      };
      inner_->Submit(std::move(request));
      return;
    }
    case DiskRequest::Kind::kSync: {
      bool held = false;
      {
        MutexLock lock(&mu_);
        auto it = objects_.find(request.object);
        if (it != objects_.end()) {
          if (it->second.syncing) {
            // Serialized: the running sync's writes must land before this one's.
            it->second.waiting_syncs.push_back(std::move(request.done));
            return;
          }
          it->second.syncing = true;
          held = true;
        }
      }
      if (!held) {
        inner_->Submit(std::move(request));  // nothing held: straight through
        return;
      }
      std::vector<std::function<void(Result<uint64_t>)>> waiters;
      waiters.push_back(std::move(request.done));
      StartSync(request.object, std::move(waiters));
      return;
    }
  }
}

void CrashDisk::StartSync(ObjectId object,
                          std::vector<std::function<void(Result<uint64_t>)>> waiters) {
  std::vector<HeldOp> ops;
  {
    MutexLock lock(&mu_);
    ops = objects_[object].ops;
  }
  const uint64_t max_seq = ops.empty() ? 0 : ops.back().seq;
  (new SyncJob(this, object, std::move(ops), max_seq, std::move(waiters)))->Run();
}

void CrashDisk::SyncFinished(ObjectId object, uint64_t max_seq, const Status& status,
                             std::vector<std::function<void(Result<uint64_t>)>> waiters) {
  std::vector<std::function<void(Result<uint64_t>)>> next;
  bool removed = false;
  {
    MutexLock lock(&mu_);
    ObjectState& st = objects_[object];
    if (status.ok()) {
      // Applied and synced: these no longer need holding. On failure they stay held.
      std::erase_if(st.ops, [max_seq](const HeldOp& op) { return op.seq <= max_seq; });
    }
    removed = st.removed_while_syncing;
    st.removed_while_syncing = false;
    next = std::move(st.waiting_syncs);
    st.waiting_syncs.clear();
    st.syncing = !next.empty();
    if (!st.syncing && st.ops.empty()) objects_.erase(object);
  }
  Status final_status = status;
  // The job may have recreated an object removed meanwhile; the removal wins.
  if (removed) final_status = MergeDiskErrors(final_status, inner_->Remove(object));
  for (auto& w : waiters) {
    if (final_status.ok()) {
      w(uint64_t{0});
    } else {
      w(final_status);
    }
  }
  if (!next.empty()) StartSync(object, std::move(next));
}

Status CrashDisk::Truncate(ObjectId object, uint64_t size) {
  MutexLock lock(&mu_);
  objects_[object].ops.push_back(HeldOp{next_seq_++, true, size, nullptr});
  return Status::OK();
}

Status CrashDisk::Remove(ObjectId object) {
  {
    MutexLock lock(&mu_);
    auto it = objects_.find(object);
    if (it != objects_.end()) {
      if (it->second.syncing) {
        it->second.ops.clear();
        it->second.removed_while_syncing = true;
      } else {
        objects_.erase(it);
      }
    }
  }
  return inner_->Remove(object);
}

Result<ObjectInfo> CrashDisk::Stat(ObjectId object) {
  Result<ObjectInfo> inner = inner_->Stat(object);
  if (!inner.ok() && inner.error() != ENOENT) return inner;
  bool exists = inner.ok();
  ObjectInfo info = exists ? *inner : ObjectInfo{};
  MutexLock lock(&mu_);
  auto it = objects_.find(object);
  if (it != objects_.end()) {
    for (const HeldOp& op : it->second.ops) {
      if (op.truncate) {
        if (exists || op.offset > 0) {
          exists = true;
          info.size = op.offset;
        }
      } else {
        exists = true;
        info.size = std::max(info.size, op.offset + op.data->size());
      }
    }
  }
  if (!exists) return inner;
  return info;
}

Status CrashDisk::ListObjects(std::vector<ObjectId>* out) {
  std::vector<ObjectId> inner;
  TIPFS_RETURN_IF_ERROR(inner_->ListObjects(&inner));
  std::set<ObjectId> all(inner.begin(), inner.end());
  {
    MutexLock lock(&mu_);
    for (const auto& [object, st] : objects_) {
      for (const HeldOp& op : st.ops) {
        if (!op.truncate || op.offset > 0) {
          all.insert(object);
          break;
        }
      }
    }
  }
  out->insert(out->end(), all.begin(), all.end());
  return Status::OK();
}

Status CrashDisk::SyncAll() {
  std::vector<ObjectId> held;
  {
    MutexLock lock(&mu_);
    for (const auto& [object, st] : objects_) held.push_back(object);
  }
  Status merged;
  for (ObjectId object : held) {
    DiskRequest sync;
    sync.kind = DiskRequest::Kind::kSync;
    sync.object = object;
    merged = MergeDiskErrors(merged, SubmitAndWait(this, std::move(sync)).status());
  }
  return MergeDiskErrors(merged, inner_->SyncAll());
}

Status CrashDisk::InnerWrite(ObjectId object, uint64_t offset, const char* data, uint64_t length) {
  DiskRequest w;
  w.kind = DiskRequest::Kind::kWrite;
  w.object = object;
  w.offset = offset;
  w.length = length;
  w.buffer = const_cast<char*>(data);
  return SubmitAndWait(inner_.get(), std::move(w)).status();
}

Status CrashDisk::Crash(const CrashOptions& options) {
  std::map<ObjectId, ObjectState> held;
  {
    MutexLock lock(&mu_);
    held.swap(objects_);
  }
  std::mt19937_64 rng(options.seed);
  const uint64_t sector = std::max<uint32_t>(options.granularity, 1);
  Status merged;
  auto apply_truncate = [&](ObjectId object, const HeldOp& op) {
    merged = MergeDiskErrors(merged, inner_->Truncate(object, op.offset));
  };
  for (auto& [object, st] : held) {  // std::map: object order, so the seed alone decides
    std::vector<HeldOp>& ops = st.ops;
    size_t keep = 0;
    switch (options.mode) {
      case CrashMode::kDropAll:
        keep = 0;
        break;
      case CrashMode::kKeepAll:
        keep = ops.size();
        break;
      case CrashMode::kRandomPrefix:
        keep = static_cast<size_t>(rng() % (ops.size() + 1));
        break;
      case CrashMode::kTear:
        for (const HeldOp& op : ops) {
          if (op.truncate) {
            if (rng() & 1) apply_truncate(object, op);
            continue;
          }
          const uint64_t end = op.offset + op.data->size();
          for (uint64_t from = op.offset; from < end;) {
            const uint64_t to = std::min(end, (from / sector + 1) * sector);
            if (rng() & 1) {
              merged = MergeDiskErrors(
                  merged,
                  InnerWrite(object, from, op.data->data() + (from - op.offset), to - from));
            }
            from = to;
          }
        }
        continue;
    }
    for (size_t i = 0; i < keep; ++i) {
      const HeldOp& op = ops[i];
      if (op.truncate) {
        apply_truncate(object, op);
      } else {
        merged = MergeDiskErrors(merged,
                                 InnerWrite(object, op.offset, op.data->data(), op.data->size()));
      }
    }
  }
  return merged;
}

uint64_t CrashDisk::held_ops() const {
  MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [object, st] : objects_) n += st.ops.size();
  return n;
}

uint64_t CrashDisk::held_bytes() const {
  MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [object, st] : objects_) {
    for (const HeldOp& op : st.ops) n += op.truncate ? 0 : op.data->size();
  }
  return n;
}

}  // namespace tipfs::stripe
