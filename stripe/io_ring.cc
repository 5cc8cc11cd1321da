// IoRing implementation; the op states are described in io_ring.h.
#include "stripe/io_ring.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer cannot see the ordering io_uring gives (the kernel reads an op's SQE after the
// submitter's release store and posts its CQE before the completion thread's acquire load), so
// the hand-off of an Op from submitter to completion thread is annotated.
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define TIPFS_TSAN_ACQUIRE(p) __tsan_acquire(p)
#define TIPFS_TSAN_RELEASE(p) __tsan_release(p)
#else
#define TIPFS_TSAN_ACQUIRE(p) ((void)(p))
#define TIPFS_TSAN_RELEASE(p) ((void)(p))
#endif

namespace tipfs::stripe {

namespace {

constexpr uint32_t kMaxRetries = 64;
// A single SQE carries at most an unsigned int of bytes; bigger requests continue as "short".
constexpr uint64_t kMaxBytesPerSqe = uint64_t{1} << 30;
constexpr size_t kOpsPerChunk = 64;
constexpr size_t kMaxDeferredRings = 8;

// Rings with SQEs this thread prepared inside a SubmitBatch scope, not yet submitted.
thread_local int t_batch_depth = 0;
thread_local IoRing* t_deferred[kMaxDeferredRings];
thread_local size_t t_deferred_count = 0;
// > 0 while this thread runs finish callbacks (it then never reaps inline).
thread_local int t_reap_depth = 0;

// Marks `ring` as needing a flush at scope end; false when the thread's table is full.
bool DeferSubmit(IoRing* ring) {
  for (size_t i = 0; i < t_deferred_count; ++i) {
    if (t_deferred[i] == ring) return true;
  }
  if (t_deferred_count == kMaxDeferredRings) return false;
  t_deferred[t_deferred_count++] = ring;
  return true;
}

}  // namespace

Result<std::unique_ptr<IoRing>> IoRing::Create(uint32_t entries) {
  if (entries == 0) return Status::InvalidArgument("io_uring: ring_entries must be > 0");
  std::unique_ptr<IoRing> ring(new IoRing(entries));
  const int r = io_uring_queue_init(entries, &ring->ring_, 0);
  if (r < 0) return ErrnoStatus("io_uring_queue_init", -r);
  ring->completion_thread_ = std::thread([raw = ring.get()] { raw->CompletionLoop(); });
  return ring;
}

IoRing::IoRing(uint32_t entries) : entries_(entries) {}

IoRing::~IoRing() {
  if (!completion_thread_.joinable()) return;  // io_uring_queue_init failed; nothing to tear down
  {
    std::lock_guard<std::mutex> lock(idle_mu_);
    stopping_ = true;
    idle_cv_.notify_one();
  }
  completion_thread_.join();
  io_uring_queue_exit(&ring_);
}

IoRing::Op* IoRing::AllocOp() {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_list_ == nullptr) {
    op_chunks_.emplace_back(new Op[kOpsPerChunk]);
    Op* chunk = op_chunks_.back().get();
    for (size_t i = 0; i < kOpsPerChunk; ++i) {
      chunk[i].next = free_list_;
      free_list_ = &chunk[i];
    }
  }
  Op* op = free_list_;
  free_list_ = op->next;
  op->next = nullptr;
  return op;
}

void IoRing::Submit(Op* op) {
  op->transferred = 0;
  op->retries = 0;
  op->next = nullptr;
  std::unique_lock<std::mutex> lock(mu_);
  if (in_flight_ >= entries_) {
    // Ring full: queue in FIFO order; a completion will prepare it (never dropped).
    ++queued_total_;
    if (pending_tail_ != nullptr) {
      pending_tail_->next = op;
    } else {
      pending_head_ = op;
    }
    pending_tail_ = op;
    return;
  }
  ++in_flight_;
  PrepareLocked(op);
  if (t_batch_depth > 0 && DeferSubmit(this)) return;
  SubmitLocked();
  lock.unlock();
  ReapInline();
  WakeCompletionThreadIfNeeded();
}

void IoRing::PrepareLocked(Op* op) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    // Cannot happen: prepared-but-unsubmitted SQEs <= in_flight_ <= entries_ == SQ size.
    std::fprintf(stderr, "INTERNAL ERROR: io_uring submission queue full\n");
    std::abort();
  }
  const uint64_t rest = op->length - op->transferred;
  const unsigned n = static_cast<unsigned>(std::min(rest, kMaxBytesPerSqe));
  switch (op->kind) {
    case OpKind::kRead:
      io_uring_prep_read(sqe, op->fd, op->buffer + op->transferred, n,
                         op->offset + op->transferred);
      break;
    case OpKind::kWrite:
      io_uring_prep_write(sqe, op->fd, op->buffer + op->transferred, n,
                          op->offset + op->transferred);
      break;
    case OpKind::kFdatasync:
      io_uring_prep_fsync(sqe, op->fd, IORING_FSYNC_DATASYNC);
      break;
  }
  io_uring_sqe_set_data(sqe, op);
  TIPFS_TSAN_RELEASE(op);
  in_kernel_.fetch_add(1);
}

void IoRing::SubmitLocked() {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int r = io_uring_submit(&ring_);
    if (r >= 0) return;
    if (r != -EINTR && r != -EAGAIN && r != -EBUSY) {
      // The SQEs stay in the ring and go out with the next successful submit.
      std::fprintf(stderr, "tipfs: io_uring_submit: %s\n", std::strerror(-r));
      return;
    }
  }
}

void IoRing::Flush() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    SubmitLocked();
  }
  ReapInline();
  WakeCompletionThreadIfNeeded();
}

bool IoRing::CqNonEmpty() const {
  // An unlocked peek with atomic loads (io_uring_cq_ready reads the head non-atomically, which
  // races with a reaper advancing it on another thread).
  return __atomic_load_n(ring_.cq.ktail, __ATOMIC_ACQUIRE) !=
         __atomic_load_n(ring_.cq.khead, __ATOMIC_RELAXED);
}

void IoRing::WakeCompletionThreadIfNeeded() {
  // Ops still in the kernel (not finished inside io_uring_submit) need the completion thread.
  // Dekker-style with CompletionLoop: we stored in_kernel_ before loading idle_, it stores idle_
  // before loading in_kernel_ (all seq_cst), so one of us sees the other.
  if (in_kernel_.load() == 0 || !completion_idle_.load()) return;
  std::lock_guard<std::mutex> lock(idle_mu_);
  idle_cv_.notify_one();
}

void IoRing::ReapInline() {
  // Nested inside a finish callback: leave it to the completion thread (bounded recursion).
  if (t_reap_depth > 0) return;
  // A buffered read that hits the page cache completes inside io_uring_submit; finishing it here
  // saves two thread wake-ups (completion thread, then the waiting caller).
  if (!CqNonEmpty()) return;
  std::unique_lock<std::mutex> cq_lock(cq_mu_, std::try_to_lock);
  if (!cq_lock.owns_lock()) return;  // the completion thread is draining; it will finish them
  Reap(std::move(cq_lock));
}

void IoRing::FlushThisThread() {
  const size_t count = t_deferred_count;
  t_deferred_count = 0;
  for (size_t i = 0; i < count; ++i) t_deferred[i]->Flush();
}

IoRing::SubmitBatch::SubmitBatch() { ++t_batch_depth; }

IoRing::SubmitBatch::~SubmitBatch() {
  if (--t_batch_depth == 0) FlushThisThread();
}

uint32_t IoRing::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

uint64_t IoRing::queued_total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_total_;
}

bool IoRing::HandleResult(Op* op, int res, int64_t* final_result) {
  // -EFAULT: io_uring fails a buffered read or write whose completion must be retried in the
  // context of its submitter when that thread has exited meanwhile (liburing issue #1595); FUSE
  // retires idle worker threads, and those submit prefetches. The buffer is still good: retry.
  if (res == -EINTR || res == -EAGAIN || (res == -EFAULT && op->kind != OpKind::kFdatasync)) {
    if (++op->retries <= kMaxRetries) return false;  // retried unchanged
    *final_result = res;
    return true;
  }
  if (res < 0) {
    *final_result = res;  // failed
    return true;
  }
  if (op->kind == OpKind::kFdatasync) {
    *final_result = 0;
    return true;
  }
  if (res == 0) {
    // Read: end of object (a short read, the caller zero-fills). Write: no progress at all.
    *final_result = op->kind == OpKind::kRead ? static_cast<int64_t>(op->transferred) : -EIO;
    return true;
  }
  op->transferred += static_cast<uint64_t>(res);
  if (op->transferred < op->length) return false;  // short: resubmitted for the rest
  *final_result = static_cast<int64_t>(op->transferred);
  return true;
}

void IoRing::CompletionLoop() {
  while (true) {
    {
      // Sleep while nothing is in the kernel: then no CQE can arrive, and a page-cache hit that
      // completes inside io_uring_submit does not wake this thread at all.
      std::unique_lock<std::mutex> lock(idle_mu_);
      completion_idle_.store(true);
      idle_cv_.wait(lock, [this] { return in_kernel_.load() > 0 || stopping_; });
      completion_idle_.store(false);
      if (stopping_ && in_kernel_.load() == 0) return;
    }
    // Waits without holding any lock; the CQEs themselves are read under cq_mu_ in Reap. Not
    // io_uring_wait_cqe: it reads the CQ head non-atomically, racing with an inline reaper.
    if (!CqNonEmpty()) {
      const int r = io_uring_enter(ring_.ring_fd, 0, 1, IORING_ENTER_GETEVENTS, nullptr);
      if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
        std::fprintf(stderr, "INTERNAL ERROR: io_uring_enter: %s\n", std::strerror(-r));
        std::abort();
      }
    }
    Reap(std::unique_lock<std::mutex>(cq_mu_));
  }
}

void IoRing::Reap(std::unique_lock<std::mutex> cq_lock) {
  // Per-thread scratch: Reap never nests on one thread (t_reap_depth), so no allocation per call.
  thread_local std::vector<Op*> again;
  thread_local std::vector<std::pair<Op*, int64_t>> finished;
  unsigned head;
  unsigned seen = 0;
  io_uring_cqe* cqe;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    ++seen;
    Op* op = static_cast<Op*>(io_uring_cqe_get_data(cqe));
    TIPFS_TSAN_ACQUIRE(op);
    int64_t result = 0;
    if (HandleResult(op, cqe->res, &result)) {
      finished.emplace_back(op, result);
    } else {
      again.push_back(op);
    }
  }
  io_uring_cq_advance(&ring_, seen);
  in_kernel_.fetch_sub(seen);
  cq_lock.unlock();

  if (!again.empty()) {
    // These ops keep their slots, so there is room in the SQ for them.
    std::lock_guard<std::mutex> lock(mu_);
    for (Op* op : again) PrepareLocked(op);
    SubmitLocked();
    again.clear();
  }
  if (finished.empty()) return;
  ++t_reap_depth;
  for (auto& [op, result] : finished) op->finish(op, result);
  --t_reap_depth;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [op, result] : finished) {
      op->done = nullptr;
      op->owner = nullptr;
      op->owner_data = nullptr;
      op->next = free_list_;
      free_list_ = op;
    }
    in_flight_ -= static_cast<uint32_t>(finished.size());
    bool prepared = false;
    while (pending_head_ != nullptr && in_flight_ < entries_) {
      Op* op = pending_head_;
      pending_head_ = op->next;
      if (pending_head_ == nullptr) pending_tail_ = nullptr;
      op->next = nullptr;
      ++in_flight_;
      PrepareLocked(op);
      prepared = true;
    }
    if (prepared) SubmitLocked();
  }
  finished.clear();
}

}  // namespace tipfs::stripe
