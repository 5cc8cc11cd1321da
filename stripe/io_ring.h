// IoRing: one io_uring shared by all PosixDisks of a volume, with a completion thread.
//
// A caller fills an IoRing::Op (fd, offset, buffer, length, what to call when finished) and hands
// it to Submit. An op moves through these states:
//   submitted  -> prepared as an SQE (or queued in FIFO order when `entries` ops are in flight;
//                 queued ops are prepared as completions free slots, never dropped)
//   completed  -> the completion thread reads its CQE (io_uring_for_each_cqe, then one
//                 io_uring_cq_advance for the whole batch); a submitter that finds CQEs ready
//                 right after io_uring_submit (page-cache hits complete inside the syscall)
//                 drains them itself, saving two thread wake-ups
//   short read/write resubmitted -> a read that returned fewer bytes than asked (but not 0) or a
//                 short write is prepared again for the rest; a read returning 0 is the end of the
//                 object: finished, short
//   retried    -> -EINTR / -EAGAIN, or -EFAULT of a read/write whose submitting thread exited,
//                 is prepared again unchanged (bounded)
//   failed / finished -> op->finish(op, bytes or -errno) runs on the thread that drained the CQE
//                 (the completion thread, or inline in Submit/Flush), then the op goes back to the
//                 ring's free list. A Submit made from inside a finish callback never drains
//                 inline, so callbacks do not recurse.
// At most `entries` ops are in flight, so neither the SQ nor the CQ (2 x entries) can overflow.
//
// Batching: inside an IoRing::SubmitBatch scope, Submit prepares SQEs but the io_uring_submit
// syscall is issued once per ring when the outermost scope on that thread ends.
//
// Thread-safety: Submit, AllocOp and Flush may be called from any thread, including from `finish`
// callbacks on the completion thread. mu_ guards the submission queue, the pending list and the
// free list; it is held across io_uring_submit (which does not wait for I/O) but never across
// io_uring_wait_cqe or a finish callback.
#pragma once

#include <liburing.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "util/status.h"

namespace tipfs::stripe {

class IoRing {
 public:
  enum class OpKind : uint8_t { kRead, kWrite, kFdatasync };

  struct Op {
    OpKind kind = OpKind::kRead;
    int fd = -1;
    char* buffer = nullptr;
    uint64_t offset = 0;
    uint64_t length = 0;
    // Called once with the bytes transferred (>= 0) or -errno; then the op is recycled.
    void (*finish)(Op* op, int64_t result) = nullptr;
    void* owner = nullptr;                       // for finish: the PosixDisk
    void* owner_data = nullptr;                  // for finish: the fd handle
    std::function<void(Result<uint64_t>)> done;  // the caller's completion, moved in by owner

    // Ring-private.
    uint64_t transferred = 0;
    uint32_t retries = 0;
    Op* next = nullptr;
  };

  // Fails (with the errno of io_uring_queue_init) when io_uring is unavailable.
  static Result<std::unique_ptr<IoRing>> Create(uint32_t entries);
  // REQUIRES: no op in flight (owners wait for their ops before the ring goes).
  ~IoRing();

  IoRing(const IoRing&) = delete;
  IoRing& operator=(const IoRing&) = delete;

  // An empty op (fields at defaults); give it back only through Submit.
  Op* AllocOp();
  void Submit(Op* op);

  // Submits SQEs this thread prepared inside SubmitBatch scopes (call before blocking on them).
  static void FlushThisThread();

  class SubmitBatch {
   public:
    SubmitBatch();
    ~SubmitBatch();
    SubmitBatch(const SubmitBatch&) = delete;
    SubmitBatch& operator=(const SubmitBatch&) = delete;
  };

  uint32_t entries() const { return entries_; }
  // Ops prepared or in the kernel (not counting queued ones); for tests.
  uint32_t in_flight() const;
  uint64_t queued_total() const;  // ops that ever had to wait for a slot

 private:
  explicit IoRing(uint32_t entries);

  // REQUIRES: mu_ held, a free slot. Fills one SQE for the unfinished part of op.
  void PrepareLocked(Op* op);
  // REQUIRES: mu_ held.
  void SubmitLocked();
  void Flush();
  void CompletionLoop();
  // Finishes completions already in the CQ on the calling thread, if no one else is draining.
  void ReapInline();
  // Drains the CQ (cq_lock held on entry, released inside) and finishes what completed.
  void Reap(std::unique_lock<std::mutex> cq_lock);
  void WakeCompletionThreadIfNeeded();
  bool CqNonEmpty() const;
  // Decides what a CQE means for its op: true when the op is finished.
  bool HandleResult(Op* op, int res, int64_t* final_result);

  const uint32_t entries_;
  io_uring ring_;
  std::thread completion_thread_;

  // Serializes reading the completion queue (the completion thread and inline reapers).
  // Lock order: cq_mu_ is released before mu_ is taken; they are never held together.
  std::mutex cq_mu_;
  mutable std::mutex mu_;
  uint32_t in_flight_ = 0;                        // GUARDED_BY(mu_)
  Op* pending_head_ = nullptr;                    // GUARDED_BY(mu_), FIFO of ops waiting for a slot
  Op* pending_tail_ = nullptr;                    // GUARDED_BY(mu_)
  Op* free_list_ = nullptr;                       // GUARDED_BY(mu_)
  std::vector<std::unique_ptr<Op[]>> op_chunks_;  // GUARDED_BY(mu_)
  uint64_t queued_total_ = 0;                     // GUARDED_BY(mu_)

  // SQEs prepared and not yet reaped. The completion thread sleeps on idle_cv_ while it is 0.
  std::atomic<uint64_t> in_kernel_{0};
  std::atomic<bool> completion_idle_{false};
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  bool stopping_ = false;  // GUARDED_BY(idle_mu_)
};

}  // namespace tipfs::stripe
