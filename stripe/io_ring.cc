// IoRing implementation; the op states are described in io_ring.h.
#include "stripe/io_ring.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>

#include "util/clock.h"
#include "util/mutex.h"

namespace tipfs::stripe {

namespace {

constexpr uint32_t kMaxRetries = 64;
// A single SQE carries at most an unsigned int of bytes; bigger requests continue as "short".
constexpr uint64_t kMaxBytesPerSqe = uint64_t{1} << 30;
constexpr size_t kOpsPerChunk = 64;
constexpr size_t kMaxDeferredRings = 64;
// user_data of the eventfd read that wakes the ring thread (ops are aligned pointers, never 1).
constexpr uint64_t kWakeTag = 1;
// Waits between enters the kernel keeps refusing: short at first (a refusal may be momentary),
// doubling, and bounded so that a kernel that takes submissions again is used within 200 ms.
constexpr int64_t kFirstBackoffNs = 1'000'000;
constexpr int64_t kMaxBackoffNs = 200'000'000;
// While refusals last, a reminder at most this often (the first one is reported at once).
constexpr int64_t kRefusalReportNs = 10'000'000'000;

// The ring whose thread this is (a Submit from its finish callbacks only queues).
thread_local IoRing* t_ring_thread = nullptr;
// Rings this thread queued to inside a SubmitBatch scope, not yet woken.
thread_local int t_batch_depth = 0;
thread_local IoRing* t_deferred[kMaxDeferredRings];
thread_local size_t t_deferred_count = 0;

// Marks `ring` as needing a wake-up at scope end; false when the thread's table is full.
bool DeferWake(IoRing* ring) {
  for (size_t i = 0; i < t_deferred_count; ++i) {
    if (t_deferred[i] == ring) return true;
  }
  if (t_deferred_count == kMaxDeferredRings) return false;
  t_deferred[t_deferred_count++] = ring;
  return true;
}

// The ring set up on its own thread: single issuer, completions' task work run only when that
// thread asks for events (kernel 6.1); plain on older kernels. SUBMIT_ALL: an SQE that fails early
// (a bad fd) posts its error and the rest still go in.
int SetUpRing(uint32_t sq_entries, io_uring* ring) {
  io_uring_params params = {};
  params.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  int r = io_uring_queue_init_params(sq_entries, ring, &params);
  if (r == -EINVAL) {
    params = {};
    r = io_uring_queue_init_params(sq_entries, ring, &params);
  }
  return r;
}

}  // namespace

Result<std::unique_ptr<IoRing>> IoRing::Create(uint32_t entries, const std::string& name) {
  if (entries == 0) return Status::InvalidArgument("io_uring: ring_entries must be > 0");
  std::unique_ptr<IoRing> ring(new IoRing(entries));
  ring->wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (ring->wake_fd_ < 0) return ErrnoStatus("io_uring: eventfd");
  std::promise<int> ready;
  std::future<int> setup = ready.get_future();
  IoRing* raw = ring.get();
  const std::string thread_name = name.empty() ? "tipfs-ring" : name.substr(0, 15);
  ring->thread_ = std::thread([raw, &ready, thread_name] {
    pthread_setname_np(pthread_self(), thread_name.c_str());
    // One SQ slot beyond `entries` for the wake-up read.
    const int r = SetUpRing(raw->entries_ + 1, &raw->ring_);
    ready.set_value(r);
    if (r == 0) raw->Loop();
  });
  const int r = setup.get();
  if (r < 0) {
    ring->thread_.join();
    return ErrnoStatus("io_uring_queue_init", -r);
  }
  return ring;
}

IoRing::IoRing(uint32_t entries) : entries_(entries) {}

IoRing::~IoRing() {
  if (thread_.joinable()) {
    {
      MutexLock lock(&mu_);
      stopping_ = true;
      has_incoming_.store(true);
    }
    Wake();
    thread_.join();
    io_uring_queue_exit(&ring_);
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

IoRing::Op* IoRing::AllocOp() {
  MutexLock lock(&mu_);
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
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  {
    MutexLock lock(&mu_);
    if (incoming_tail_ != nullptr) {
      incoming_tail_->next = op;
    } else {
      incoming_head_ = op;
    }
    incoming_tail_ = op;
    has_incoming_.store(true);
  }
  if (t_ring_thread == this) return;  // the loop takes it before it sleeps again
  if (t_batch_depth > 0 && DeferWake(this)) return;
  Wake();
}

void IoRing::Wake() {
  if (backing_off_.load()) {
    MutexLock lock(&mu_);
    backoff_cv_.Signal();
  }
  if (!sleeping_.load() || wake_sent_.exchange(true)) return;
  const uint64_t one = 1;
  // An eventfd write of 8 bytes cannot be short; EAGAIN would mean the counter is saturated, in
  // which case the pending read completes anyway.
  (void)!::write(wake_fd_, &one, sizeof(one));
}

void IoRing::FlushThisThread() {
  const size_t count = t_deferred_count;
  t_deferred_count = 0;
  for (size_t i = 0; i < count; ++i) t_deferred[i]->Wake();
}

IoRing::SubmitBatch::SubmitBatch() { ++t_batch_depth; }

IoRing::SubmitBatch::~SubmitBatch() {
  if (--t_batch_depth == 0) FlushThisThread();
}

IoRing::Counters IoRing::counters() const {
  Counters c;
  c.ops = counters_.ops.load(std::memory_order_relaxed);
  c.enters = counters_.enters.load(std::memory_order_relaxed);
  c.wakeups = counters_.wakeups.load(std::memory_order_relaxed);
  c.queued = counters_.queued.load(std::memory_order_relaxed);
  c.submit_errors = counters_.submit_errors.load(std::memory_order_relaxed);
  c.refused_enters = counters_.refused_enters.load(std::memory_order_relaxed);
  return c;
}

void IoRing::Loop() {
  t_ring_thread = this;
  ArmWakeRead();
  while (true) {
    PrepareQueued();
    bool stop;
    {
      MutexLock lock(&mu_);
      stop = stopping_ && in_flight_.load(std::memory_order_acquire) == 0;
    }
    if (stop) break;
    // Sleep only with nothing to reap and nothing queued (see sleeping_ for the ordering).
    bool wait = io_uring_cq_ready(&ring_) == 0;
    if (wait) {
      sleeping_.store(true);
      if (has_incoming_.load()) wait = false;
    }
    Enter(wait);
    sleeping_.store(false);
    Reap();
    if (backoff_ns_ > 0) BackOff();
  }
  if (refused_in_run_ > 0) {
    std::fprintf(stderr,
                 "tipfs: io_uring_enter still refused when the ring stopped: %llu enters refused, "
                 "%llu requests failed\n",
                 static_cast<unsigned long long>(refused_in_run_),
                 static_cast<unsigned long long>(failed_in_run_));
  }
  t_ring_thread = nullptr;
}

void IoRing::PrepareQueued() {
  Op* list;
  {
    MutexLock lock(&mu_);
    list = incoming_head_;
    incoming_head_ = incoming_tail_ = nullptr;
    has_incoming_.store(false);
  }
  uint64_t arrived = 0;
  for (Op* op = list; op != nullptr;) {
    Op* next = op->next;
    op->next = nullptr;
    if (overflow_tail_ != nullptr) {
      overflow_tail_->next = op;
    } else {
      overflow_head_ = op;
    }
    overflow_tail_ = op;
    ++arrived;
    op = next;
  }
  while (overflow_head_ != nullptr && in_kernel_ < entries_) {
    Op* op = overflow_head_;
    overflow_head_ = op->next;
    if (overflow_head_ == nullptr) overflow_tail_ = nullptr;
    op->next = nullptr;
    Prepare(op);
  }
  if (overflow_head_ != nullptr && arrived > 0) {
    // FIFO: the ops still waiting are the newest ones.
    uint64_t waiting = 0;
    for (Op* op = overflow_head_; op != nullptr && waiting < arrived; op = op->next) ++waiting;
    Count(counters_.queued, waiting);
  }
}

void IoRing::Prepare(Op* op) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    // Cannot happen: SQEs prepared <= in_kernel_ + the wake read <= entries_ + 1 == SQ size.
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
  ++in_kernel_;
}

void IoRing::ArmWakeRead() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    std::fprintf(stderr, "INTERNAL ERROR: io_uring submission queue full (wake read)\n");
    std::abort();
  }
  io_uring_prep_read(sqe, wake_fd_, &wake_buffer_, sizeof(wake_buffer_), 0);
  io_uring_sqe_set_data64(sqe, kWakeTag);
  wake_armed_ = true;
}

void IoRing::Enter(bool wait) {
  const int r = wait ? io_uring_submit_and_wait(&ring_, 1) : io_uring_submit_and_get_events(&ring_);
  Count(counters_.enters, 1);
  if (r >= 0) {
    if (refused_in_run_ > 0) EndRefusals();
    return;
  }
  if (r == -EINTR) return;  // what was not taken goes in with the next enter
  const uint32_t unsubmitted = UnsubmittedOps();
  const bool transient = r == -EAGAIN || r == -ENOMEM || r == -EBUSY;
  // Ops the kernel holds will complete and free what it ran short of: wait for one, then the
  // next loop submits the rest. Otherwise (or if it refuses even the wait) nothing would change:
  // fail what it refused.
  if (transient && in_kernel_ > unsubmitted) {
    const int w = io_uring_enter(ring_.ring_fd, 0, 1, IORING_ENTER_GETEVENTS, nullptr);
    if (w >= 0 || w == -EINTR) return;
  }
  Refused(-r, unsubmitted);
}

void IoRing::Refused(int err, uint32_t unsubmitted) {
  ++refused_in_run_;
  failed_in_run_ += unsubmitted;
  backoff_ns_ = backoff_ns_ == 0 ? kFirstBackoffNs : std::min(2 * backoff_ns_, kMaxBackoffNs);
  Count(counters_.refused_enters, 1);
  const int64_t now = SystemClock::Default()->NowNanos();
  if (refused_in_run_ == 1) {
    std::fprintf(stderr,
                 "tipfs: io_uring_enter: %s; failing %u requests; while it refuses, requests "
                 "fail with this error and the ring retries after waits of up to %lld ms\n",
                 std::strerror(err), unsubmitted,
                 static_cast<long long>(kMaxBackoffNs / 1'000'000));
    run_reported_ns_ = now;
  } else if (now - run_reported_ns_ >= kRefusalReportNs) {
    std::fprintf(stderr,
                 "tipfs: io_uring_enter: still refused (%s): %llu enters, %llu requests failed\n",
                 std::strerror(err), static_cast<unsigned long long>(refused_in_run_),
                 static_cast<unsigned long long>(failed_in_run_));
    run_reported_ns_ = now;
  }
  FailUnsubmitted(err);
}

void IoRing::BackOff() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(backoff_ns_);
  MutexLock lock(&mu_);
  backing_off_.store(true);
  // in_flight_ drops only on this thread, so a stop cannot become possible while it waits.
  while (incoming_head_ == nullptr &&
         !(stopping_ && in_flight_.load(std::memory_order_acquire) == 0)) {
    if (!backoff_cv_.WaitUntil(&mu_, deadline)) break;
  }
  backing_off_.store(false);
}

void IoRing::EndRefusals() {
  std::fprintf(stderr,
               "tipfs: io_uring_enter works again after %llu refused enters (%llu requests "
               "failed)\n",
               static_cast<unsigned long long>(refused_in_run_),
               static_cast<unsigned long long>(failed_in_run_));
  refused_in_run_ = 0;
  failed_in_run_ = 0;
  backoff_ns_ = 0;
}

uint32_t IoRing::UnsubmittedOps() const {
  uint32_t ops = 0;
  const unsigned head = __atomic_load_n(ring_.sq.khead, __ATOMIC_ACQUIRE);
  for (unsigned i = head; i != ring_.sq.sqe_tail; ++i) {
    if (ring_.sq.sqes[i & ring_.sq.ring_mask].user_data != kWakeTag) ++ops;
  }
  return ops;
}

void IoRing::FailUnsubmitted(int err) {
  // Without SQPOLL the kernel reads the SQ only inside io_uring_enter, which only this thread
  // calls, so moving the tail back to the kernel's head withdraws the SQEs it did not take.
  const unsigned head = __atomic_load_n(ring_.sq.khead, __ATOMIC_ACQUIRE);
  for (unsigned i = head; i != ring_.sq.sqe_tail; ++i) {
    io_uring_sqe* sqe = &ring_.sq.sqes[i & ring_.sq.ring_mask];
    if (sqe->user_data == kWakeTag) {
      wake_armed_ = false;
      continue;
    }
    Op* op = reinterpret_cast<Op*>(static_cast<uintptr_t>(sqe->user_data));
    --in_kernel_;
    finished_.emplace_back(op, -static_cast<int64_t>(err));
  }
  ring_.sq.sqe_tail = head;
  ring_.sq.sqe_head = head;
  __atomic_store_n(ring_.sq.ktail, head, __ATOMIC_RELEASE);
  Count(counters_.submit_errors, finished_.size());
}

bool IoRing::HandleResult(Op* op, int res, int64_t* final_result) {
  if (res == -EINTR || res == -EAGAIN) {
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
  if (op->transferred < op->length && !op->short_read_ends) return false;  // short: the rest
  *final_result = static_cast<int64_t>(op->transferred);
  return true;
}

void IoRing::Reap() {
  unsigned head;
  unsigned seen = 0;
  uint64_t wakeups = 0;
  io_uring_cqe* cqe;
  // Ops to prepare again (retried or short) keep their slots: their CQE freed one.
  Op* again = nullptr;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    ++seen;
    if (cqe->user_data == kWakeTag) {
      wake_armed_ = false;
      wake_sent_.store(false);
      ++wakeups;
      continue;
    }
    Op* op = static_cast<Op*>(io_uring_cqe_get_data(cqe));
    --in_kernel_;
    int64_t result = 0;
    if (HandleResult(op, cqe->res, &result)) {
      finished_.emplace_back(op, result);
    } else {
      op->next = again;
      again = op;
    }
  }
  io_uring_cq_advance(&ring_, seen);
  while (again != nullptr) {
    Op* op = again;
    again = op->next;
    op->next = nullptr;
    Prepare(op);
  }
  if (!wake_armed_) ArmWakeRead();
  if (wakeups > 0) Count(counters_.wakeups, wakeups);
  if (finished_.empty()) return;
  // Counted before the callbacks, as in_flight_ is: a caller woken by its callback may read
  // counters() at once and must see its own op among those finished (the wake orders it).
  Count(counters_.ops, finished_.size());
  for (auto& [op, result] : finished_) {
    // Counted out first: a caller woken by its callback may look at in_flight() at once.
    in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    op->finish(op, result);
    op->done = nullptr;
    op->owner = nullptr;
    op->owner_data = nullptr;
    op->short_read_ends = false;
  }
  {
    MutexLock lock(&mu_);
    for (auto& [op, result] : finished_) {
      op->next = free_list_;
      free_list_ = op;
    }
  }
  finished_.clear();
}

}  // namespace tipfs::stripe
