// IoRing: one io_uring and the one thread that owns it. The volume makes one per disk, so a
// disk's requests never wait behind another disk's, and no request belongs to a thread that can
// exit before it completes: io_uring work belongs to the task that submitted it, and the kernel
// cancels it (-ECANCELED) or fails its retry (-EFAULT) when that task exits — libfuse retires idle
// FUSE workers, which used to submit. Here callers only queue; the ring's thread submits.
//
// A caller fills an IoRing::Op (fd, offset, buffer, length, what to call when finished) and hands
// it to Submit. An op moves through these states:
//   queued     -> on the ring's incoming list (a mutex held for a pointer swap, never across a
//                 syscall); the ring thread is woken through an eventfd only when it sleeps
//   prepared   -> the ring thread takes the whole list and prepares one SQE per op while fewer
//                 than `entries` ops are in the kernel; the rest wait in FIFO order (never dropped)
//   submitted  -> one io_uring_enter per loop submits every prepared SQE and waits for completions
//   completed  -> the ring thread reads the CQEs (io_uring_for_each_cqe, one io_uring_cq_advance)
//   short read/write resubmitted -> a read that returned fewer bytes than asked (but not 0) or a
//                 short write is prepared again for the rest; a read returning 0 is the end of the
//                 object: finished, short
//   retried    -> -EINTR / -EAGAIN is prepared again unchanged (bounded)
//   failed / finished -> op->finish(op, bytes or -errno) runs on the ring thread, then the op
//                 goes back to the free list. A submission the kernel refuses (io_uring_enter
//                 failing with anything but EINTR, or EAGAIN/ENOMEM while nothing is in flight to
//                 free resources) fails the ops it carried with that errno: no waiter hangs and
//                 nothing is retried in a loop.
//   backing off -> while the kernel keeps refusing, the ring thread waits before it enters
//                 again (1 ms, doubling to 200 ms), woken early by a Submit so that new ops are
//                 tried (and, if refused, failed) at once. One message when the refusals start,
//                 one every 10 s while they last, one with their count when an enter succeeds.
// At most `entries` ops are in the kernel, so neither the SQ nor the CQ can overflow.
//
// Batching: inside an IoRing::SubmitBatch scope, Submit queues but the wake-up of a sleeping
// ring thread is sent once per ring when the outermost scope on that thread ends.
//
// Thread-safety: Submit, AllocOp and FlushThisThread may be called from any thread, including
// finish callbacks on the ring thread (a Submit from there only queues). mu_ guards the incoming
// list and the free list and is never held across a syscall or a callback; the counters are
// atomics the ring thread alone writes.
#pragma once

#include <liburing.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "util/mutex.h"
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
    // A short read is the end of the object, not resubmitted: O_DIRECT reads (the rest would
    // start at an unaligned offset, which O_DIRECT refuses).
    bool short_read_ends = false;
    // Called once on the ring thread with the bytes transferred (>= 0) or -errno; then the op is
    // recycled.
    void (*finish)(Op* op, int64_t result) = nullptr;
    void* owner = nullptr;                       // for finish: the PosixDisk
    void* owner_data = nullptr;                  // for finish: the fd handle
    std::function<void(Result<uint64_t>)> done;  // the caller's completion, moved in by owner

    // Ring-private.
    uint64_t transferred = 0;
    uint32_t retries = 0;
    Op* next = nullptr;
  };

  // What the ring did since it was made (for stats and tests).
  struct Counters {
    uint64_t ops = 0;             // ops finished (counted before their callbacks run)
    uint64_t enters = 0;          // io_uring_enter calls (each submits a batch and/or waits)
    uint64_t wakeups = 0;         // eventfd wake-ups of a sleeping ring thread
    uint64_t queued = 0;          // ops that waited for a free slot in the kernel
    uint64_t submit_errors = 0;   // ops failed because io_uring_enter refused them
    uint64_t refused_enters = 0;  // io_uring_enter calls refused (each followed by a backoff)
  };

  // Starts the ring thread, which sets up the ring. Fails with the errno of io_uring_queue_init
  // when io_uring is unavailable. `name` names the thread (at most 15 characters shown).
  static Result<std::unique_ptr<IoRing>> Create(uint32_t entries, const std::string& name = "");
  // Finishes every op already submitted, then stops the thread.
  ~IoRing();

  IoRing(const IoRing&) = delete;
  IoRing& operator=(const IoRing&) = delete;

  // An empty op (fields at defaults); give it back only through Submit.
  Op* AllocOp();
  void Submit(Op* op);

  // Wakes the rings this thread queued to inside SubmitBatch scopes (call before blocking on
  // their ops).
  static void FlushThisThread();

  class SubmitBatch {
   public:
    SubmitBatch();
    ~SubmitBatch();
    SubmitBatch(const SubmitBatch&) = delete;
    SubmitBatch& operator=(const SubmitBatch&) = delete;
  };

  uint32_t entries() const { return entries_; }
  // Ops queued, prepared or in the kernel; for tests.
  uint32_t in_flight() const { return in_flight_.load(std::memory_order_acquire); }
  Counters counters() const;

 private:
  explicit IoRing(uint32_t entries);

  void Loop();
  // Wakes the ring thread if it sleeps in io_uring_enter (or is about to).
  void Wake();
  // Moves queued ops into SQEs while slots are free. Ring thread only.
  void PrepareQueued();
  void Prepare(Op* op);
  void ArmWakeRead();
  // Submits the prepared SQEs and, when `wait`, waits for at least one completion. Ring thread.
  void Enter(bool wait);
  // Ops with an SQE prepared that the kernel has not taken yet.
  uint32_t UnsubmittedOps() const;
  // Fails the ops whose SQEs the kernel did not take with -err.
  void FailUnsubmitted(int err);
  // An enter the kernel refused with -err: fails what it carried, reports, doubles the backoff.
  void Refused(int err, uint32_t unsubmitted);
  // After a refusal: waits out the backoff, or until an op is queued or the ring may stop.
  void BackOff();
  // An enter succeeded: ends a run of refusals (reports it once).
  void EndRefusals();
  void Reap();
  // Decides what a CQE means for its op: true when the op is finished.
  bool HandleResult(Op* op, int res, int64_t* final_result);
  void Finish(Op* op, int64_t result);

  const uint32_t entries_;
  io_uring ring_;
  int wake_fd_ = -1;
  std::thread thread_;

  // The ring thread's own state (touched only by it).
  Op* overflow_head_ = nullptr;  // ops taken from the incoming list, waiting for a slot (FIFO)
  Op* overflow_tail_ = nullptr;
  uint32_t in_kernel_ = 0;  // ops with an SQE prepared or in the kernel (the wake read excluded)
  uint64_t wake_buffer_ = 0;
  bool wake_armed_ = false;
  std::vector<std::pair<Op*, int64_t>> finished_;
  // The current run of refused enters (none when refused_in_run_ == 0).
  uint64_t refused_in_run_ = 0;
  uint64_t failed_in_run_ = 0;   // ops failed by those refusals
  int64_t backoff_ns_ = 0;       // the wait before the next enter; 0 when not refused
  int64_t run_reported_ns_ = 0;  // steady_clock time of the run's last message

  mutable Mutex mu_;
  Op* incoming_head_ GUARDED_BY(mu_) = nullptr;  // FIFO
  Op* incoming_tail_ GUARDED_BY(mu_) = nullptr;
  Op* free_list_ GUARDED_BY(mu_) = nullptr;
  std::vector<std::unique_ptr<Op[]>> op_chunks_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;

  // Counters' fields, written by the ring thread alone (a load and a store: no lock, no locked
  // instruction), read by counters() from any thread.
  struct RingCounters {
    std::atomic<uint64_t> ops{0};
    std::atomic<uint64_t> enters{0};
    std::atomic<uint64_t> wakeups{0};
    std::atomic<uint64_t> queued{0};
    std::atomic<uint64_t> submit_errors{0};
    std::atomic<uint64_t> refused_enters{0};
  };
  static void Count(std::atomic<uint64_t>& counter, uint64_t n) {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  RingCounters counters_;

  // Ops submitted and not finished (queued ones included).
  std::atomic<uint32_t> in_flight_{0};
  // Set while the incoming list is non-empty; read by the ring thread before it sleeps.
  std::atomic<bool> has_incoming_{false};
  // Dekker pair with has_incoming_: the thread stores sleeping_ before it loads has_incoming_, a
  // submitter stores has_incoming_ before it loads sleeping_, so one of them sees the other.
  std::atomic<bool> sleeping_{false};
  // One eventfd write per sleep: set by the submitter that writes, cleared by the ring thread
  // when it reads the eventfd.
  std::atomic<bool> wake_sent_{false};
  // Set under mu_ by the ring thread while it backs off on backoff_cv_ (the eventfd cannot wake
  // it: its read goes through the io_uring_enter the kernel refuses). Wake() signals it under
  // mu_, so a Submit that appended before the flag was set is seen by the thread's own check.
  std::atomic<bool> backing_off_{false};
  CondVar backoff_cv_;
};

}  // namespace tipfs::stripe
