// StripedIo: splits file ranges into per-disk pieces (Layout::Map), submits every piece before
// waiting for any, and merges the per-disk results (MergeDiskErrors).
//
// A read keeps one heap-allocated ReadState for all its pieces; the per-piece completion lambdas
// capture only two pointers so std::function stores them inline (no allocation per piece). The last
// piece to complete runs the caller's callback and frees the state.
#include "stripe/striped_io.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "stripe/io_ring.h"
#include "util/mutex.h"
#include "util/wait_notice.h"

namespace tipfs::stripe {

namespace {

// Map() output reused across calls on one thread, so steady-state reads allocate nothing for it.
std::vector<Extent>& ScratchExtents() {
  thread_local std::vector<Extent> scratch;
  scratch.clear();
  return scratch;
}

// Blocks a caller until `pending` completions arrived; collects their merged status.
class Waiter {
 public:
  explicit Waiter(uint32_t pending) : pending_(pending) {}

  void Complete(const Status& s) {
    MutexLock lock(&mu_);
    if (!s.ok()) status_ = MergeDiskErrors(status_, s);
    // Notify under the lock: the waiter may destroy *this as soon as it sees pending_ == 0.
    if (--pending_ == 0) cv_.Signal();
  }

  Status Wait() {
    IoRing::FlushThisThread();  // SQEs this thread prepared must be in the kernel before we sleep
    MutexLock lock(&mu_);
    NoticedWait wait;  // a FUSE ring thread passes its ring on if the disks take long
    while (pending_ != 0) wait.Wait(&cv_, &mu_);
    return status_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  uint32_t pending_ GUARDED_BY(mu_);
  Status status_ GUARDED_BY(mu_);
};

struct ReadState {
  static constexpr size_t kInlinePieces = 4;

  explicit ReadState(const std::vector<Extent>& pieces) : pending(pieces.size()) {
    if (pieces.size() <= kInlinePieces) {
      extents = inline_extents;
    } else {
      heap_extents.reset(new Extent[pieces.size()]);
      extents = heap_extents.get();
    }
    std::copy(pieces.begin(), pieces.end(), extents);
  }

  void PieceDone(const Extent* piece, Result<uint64_t> result) {
    char* dst = buffer + (piece->file_offset - file_offset);
    if (result.ok()) {
      // A short read is a hole or the end of the object: the rest of the piece reads as zeros.
      const uint64_t n = std::min(*result, piece->length);
      if (n < piece->length) std::memset(dst + n, 0, piece->length - n);
    } else {
      MutexLock lock(&mu);
      status = MergeDiskErrors(status, result.status());
    }
    if (pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    Status final_status;
    {
      MutexLock lock(&mu);
      final_status = std::move(status);
    }
    auto callback = std::move(done);
    delete this;
    callback(std::move(final_status));
  }

  std::atomic<size_t> pending;
  char* buffer = nullptr;
  uint64_t file_offset = 0;
  std::function<void(Status)> done;
  Mutex mu;
  Status status GUARDED_BY(mu);
  Extent* extents = nullptr;
  Extent inline_extents[kInlinePieces];
  std::unique_ptr<Extent[]> heap_extents;
};

}  // namespace

StripedIo::StripedIo(Volume* volume) : volume_(volume) {}

void StripedIo::ReadAsync(ObjectId ino, uint64_t offset, uint64_t length, char* buffer,
                          DiskRequest::Priority priority, DiskRequest::Purpose purpose,
                          std::function<void(Status)> done) {
  if (length == 0) {
    done(Status::OK());
    return;
  }
  std::vector<Extent>& pieces = ScratchExtents();
  layout().Map(ino, offset, length, &pieces);
  auto* state = new ReadState(pieces);
  state->buffer = buffer;
  state->file_offset = offset;
  state->done = std::move(done);
  const size_t count = pieces.size();
  Extent* extents = state->extents;
  // `state` may be freed by the last piece's completion (even inline, inside Submit), so nothing
  // below touches it after the final Submit.
  // One io_uring_submit for all pieces; a single piece needs no batch (it saves a lock round).
  std::optional<IoRing::SubmitBatch> batch;
  if (count > 1) batch.emplace();
  for (size_t i = 0; i < count; ++i) {
    const Extent* piece = &extents[i];
    DiskRequest request;
    request.kind = DiskRequest::Kind::kRead;
    request.priority = priority;
    request.purpose = purpose;
    request.object = ino;
    request.offset = piece->object_offset;
    request.length = piece->length;
    request.buffer = buffer + (piece->file_offset - offset);
    request.done = [state, piece](Result<uint64_t> r) { state->PieceDone(piece, std::move(r)); };
    volume_->disk(piece->disk)->Submit(std::move(request));
  }
}  // NOLINT(clang-analyzer-cplusplus.NewDeleteLeaks): the last piece's completion frees `state`

Status StripedIo::Read(ObjectId ino, uint64_t offset, uint64_t length, char* buffer) {
  Waiter waiter(1);
  ReadAsync(ino, offset, length, buffer, DiskRequest::Priority::kDemand,
            [&waiter](Status s) { waiter.Complete(s); });
  return waiter.Wait();
}

Status StripedIo::Write(ObjectId ino, uint64_t offset, const char* data, uint64_t length) {
  if (length == 0) return Status::OK();
  std::vector<Extent>& scratch = ScratchExtents();
  layout().Map(ino, offset, length, &scratch);
  // Copy out of the thread-local scratch: an inline completion may re-enter StripedIo.
  std::vector<Extent> pieces(scratch.begin(), scratch.end());
  Waiter waiter(static_cast<uint32_t>(pieces.size()));
  {
    IoRing::SubmitBatch batch;
    for (const Extent& piece : pieces) {
      DiskRequest request;
      request.kind = DiskRequest::Kind::kWrite;
      request.object = ino;
      request.offset = piece.object_offset;
      request.length = piece.length;
      // Disk never modifies a write's buffer; the field is shared with reads.
      request.buffer = const_cast<char*>(data + (piece.file_offset - offset));
      const uint64_t expected = piece.length;
      Disk* disk = volume_->disk(piece.disk);
      request.done = [&waiter, disk, expected](Result<uint64_t> r) {
        if (r.ok() && *r != expected) {
          waiter.Complete(Status::IOError(disk->name() + ": short write"));
        } else {
          waiter.Complete(r.status());
        }
      };
      disk->Submit(std::move(request));
    }
  }
  return waiter.Wait();
}

Status StripedIo::Truncate(ObjectId ino, uint64_t old_size, uint64_t new_size) {
  Status merged;
  for (uint32_t d = 0; d < volume_->disk_count(); ++d) {
    const uint64_t before = layout().ObjectSize(ino, d, old_size);
    const uint64_t after = layout().ObjectSize(ino, d, new_size);
    if (before == after) continue;
    Disk* disk = volume_->disk(d);
    Status s;
    if (after > before) {
      // Growth must expose zeros. A failed earlier write may have left bytes past the old end on
      // this disk; cutting back to the old end first guarantees they cannot reappear.
      s = disk->Truncate(ino, before);
      if (s.ok()) s = disk->Truncate(ino, after);
    } else {
      s = disk->Truncate(ino, after);
    }
    merged = MergeDiskErrors(merged, s);
  }
  return merged;
}

Status StripedIo::Sync(ObjectId ino) {
  Waiter waiter(volume_->disk_count());
  {
    IoRing::SubmitBatch batch;
    for (uint32_t d = 0; d < volume_->disk_count(); ++d) {
      DiskRequest request;
      request.kind = DiskRequest::Kind::kSync;
      request.object = ino;
      request.done = [&waiter](Result<uint64_t> r) { waiter.Complete(r.status()); };
      volume_->disk(d)->Submit(std::move(request));
    }
  }
  return waiter.Wait();
}

Status StripedIo::Remove(ObjectId ino) {
  Status merged;
  for (uint32_t d = 0; d < volume_->disk_count(); ++d) {
    merged = MergeDiskErrors(merged, volume_->disk(d)->Remove(ino));
  }
  return merged;
}

}  // namespace tipfs::stripe
