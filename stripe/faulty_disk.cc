#include "stripe/faulty_disk.h"

#include <cstring>

#include "util/mutex.h"

namespace tipfs::stripe {

FaultyDisk::FaultyDisk(std::unique_ptr<Disk> inner) : DiskWrapper(std::move(inner)) {}

void FaultyDisk::FailAlways(unsigned ops, int err) { FailAfter(0, ops, err); }

void FaultyDisk::FailAfter(uint64_t ok_requests, unsigned ops, int err) {
  MutexLock lock(&mu_);
  rules_.push_back(Rule{ops, err, ok_requests, std::nullopt});
}

void FaultyDisk::FailObject(ObjectId object, unsigned ops, int err) {
  MutexLock lock(&mu_);
  rules_.push_back(Rule{ops, err, 0, object});
}

void FaultyDisk::Disappear(int err) {
  MutexLock lock(&mu_);
  disappeared_err_ = err;
}

void FaultyDisk::Heal() {
  MutexLock lock(&mu_);
  rules_.clear();
  disappeared_err_ = 0;
}

uint64_t FaultyDisk::injected() const {
  MutexLock lock(&mu_);
  return injected_;
}

Status FaultyDisk::Check(unsigned op, std::optional<ObjectId> object, const char* what) {
  MutexLock lock(&mu_);
  int err = disappeared_err_;
  if (err == 0) {
    for (Rule& rule : rules_) {
      if ((rule.ops & op) == 0) continue;
      if (rule.object.has_value() && rule.object != object) continue;
      if (rule.ok_left > 0) {
        --rule.ok_left;
        continue;
      }
      err = rule.err;
      break;
    }
  }
  if (err == 0) return Status::OK();
  ++injected_;
  return Status::FromErrno(err, inner_->name() + ": " + what + ": injected fault");
}

void FaultyDisk::Submit(DiskRequest request) {
  const bool is_read = request.kind == DiskRequest::Kind::kRead;
  const char* what = is_read                                     ? "read"
                     : request.kind == DiskRequest::Kind::kWrite ? "write"
                                                                 : "sync";
  Status s = Check(is_read ? kReads : kWrites, request.object, what);
  if (!s.ok()) {
    request.done(std::move(s));
    return;
  }
  inner_->Submit(std::move(request));
}

Status FaultyDisk::Truncate(ObjectId object, uint64_t size) {
  TIPFS_RETURN_IF_ERROR(Check(kWrites, object, "truncate"));
  return inner_->Truncate(object, size);
}

Status FaultyDisk::Remove(ObjectId object) {
  TIPFS_RETURN_IF_ERROR(Check(kWrites, object, "remove"));
  return inner_->Remove(object);
}

Result<ObjectInfo> FaultyDisk::Stat(ObjectId object) {
  TIPFS_RETURN_IF_ERROR(Check(kReads, object, "stat"));
  return inner_->Stat(object);
}

void FaultyDisk::StatAsync(ObjectId object, StatDone done) {
  Status fault = Check(kReads, object, "stat");
  if (!fault.ok()) return done(std::move(fault));
  inner_->StatAsync(object, std::move(done));
}

Result<uint64_t> FaultyDisk::Seek(ObjectId object, uint64_t offset, SeekKind kind) {
  TIPFS_RETURN_IF_ERROR(Check(kReads, object, "seek"));
  return inner_->Seek(object, offset, kind);
}

Status FaultyDisk::ListObjects(std::vector<ObjectId>* out) {
  // Only a vanished disk fails these: rules target requests (reads/writes), not the whole disk.
  TIPFS_RETURN_IF_ERROR(Check(0, std::nullopt, "list objects"));
  return inner_->ListObjects(out);
}

Result<DiskUsage> FaultyDisk::Usage() {
  TIPFS_RETURN_IF_ERROR(Check(0, std::nullopt, "usage"));
  return inner_->Usage();
}

Status FaultyDisk::SyncAll() {
  TIPFS_RETURN_IF_ERROR(Check(kWrites, std::nullopt, "sync all"));
  return inner_->SyncAll();
}

}  // namespace tipfs::stripe
