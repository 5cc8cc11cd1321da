// Clock: the one seam for time. Everything that measures or waits (the disk model, the TIP
// estimators, stall accounting) takes a Clock*, so unit tests run on a FakeClock: deterministic
// and instant. Thread-safe: NowNanos and RunAt may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <queue>
#include <thread>
#include <vector>

#include "util/mutex.h"
#include "util/timer_wake.h"

namespace tipfs {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic nanoseconds since an arbitrary origin.
  virtual int64_t NowNanos() const = 0;
  // CPU time of the calling thread, for costs defined as CPU time (TIP's T_hit, T_driver): unlike
  // wall time it does not grow while the thread is preempted on a busy machine. A FakeClock
  // returns NowNanos(), so on it CPU work takes no time, as everything else.
  virtual int64_t ThreadCpuNanos() const { return NowNanos(); }
  // Calls fn once, at or after `deadline_ns`, never from inside RunAt itself (so the caller may
  // hold its locks). Waiting sleeps; SystemClock spins only the last microseconds its sleeps are
  // measured to overrun, within a CPU budget (util/timer_wake.h).
  virtual void RunAt(int64_t deadline_ns, std::function<void()> fn) = 0;
};

// Timer-heap base shared by both clocks: pending callbacks ordered by deadline, FIFO on ties.
// mu_ is the clock's one lock, the innermost of the tree: callbacks run without it.
class TimerHeap {
 protected:
  struct Timer {
    int64_t deadline;
    uint64_t seq;
    std::function<void()> fn;
  };
  struct Later {
    bool operator()(const Timer& a, const Timer& b) const {
      return a.deadline != b.deadline ? a.deadline > b.deadline : a.seq > b.seq;
    }
  };
  void PushTimer(int64_t deadline, std::function<void()> fn) REQUIRES(mu_) {
    timers_.push(Timer{deadline, next_seq_++, std::move(fn)});
    earliest_ns_.store(timers_.top().deadline, std::memory_order_relaxed);
  }
  // Takes the earliest timer's callback off the heap.
  std::function<void()> PopTimer() REQUIRES(mu_) {
    std::function<void()> fn = std::move(const_cast<Timer&>(timers_.top()).fn);
    timers_.pop();
    earliest_ns_.store(timers_.empty() ? kNoTimer : timers_.top().deadline,
                       std::memory_order_relaxed);
    return fn;
  }
  static constexpr int64_t kNoTimer = INT64_MAX;
  mutable Mutex mu_;
  // The earliest deadline (kNoTimer: none), written under mu_, for a look without it.
  std::atomic<int64_t> earliest_ns_{kNoTimer};
  std::priority_queue<Timer, std::vector<Timer>, Later> timers_ GUARDED_BY(mu_);
  uint64_t next_seq_ GUARDED_BY(mu_) = 0;
};

// Real time (CLOCK_MONOTONIC). Callbacks run on one timer thread, started on first use, with a
// 1 µs timer slack so emulated disk completions land close to their deadlines; the thread wakes
// as early as its sleeps overrun and spins to the deadline (TimerWakePlanner).
class SystemClock : public Clock, private TimerHeap {
 public:
  SystemClock() = default;
  ~SystemClock() override;  // pending callbacks that are not yet due are dropped
  SystemClock(const SystemClock&) = delete;
  SystemClock& operator=(const SystemClock&) = delete;

  int64_t NowNanos() const override;
  int64_t ThreadCpuNanos() const override;
  void RunAt(int64_t deadline_ns, std::function<void()> fn) override;

  // The process-wide instance.
  static SystemClock* Default();

  // Runs the timers already due on the calling thread, ahead of the timer thread, and returns
  // whether it ran any. For a thread that loops anyway (a FUSE ring queue's server, between
  // requests and while it spins for a reply): a completion it runs needs no hand-off to the
  // timer thread, and the reply it makes is this thread's own to send. Cheap when nothing is
  // due: an atomic load, and a clock read while a timer is pending. The caller must hold no lock
  // a callback takes.
  bool RunDue();

 private:
  void TimerLoop();

  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  // Set by RunAt when it adds a timer earlier than all others (the timer thread, maybe spinning,
  // must look at the heap again).
  std::atomic<bool> earlier_timer_{false};
  std::thread thread_ GUARDED_BY(mu_);  // started lazily
};

// Manual time for tests. Time moves only in Advance(); due callbacks run there, in deadline
// order, on the calling thread, with the clock reading each callback's own deadline.
class FakeClock : public Clock, private TimerHeap {
 public:
  explicit FakeClock(int64_t start_ns = 1'000'000'000) : now_(start_ns) {}

  int64_t NowNanos() const override;
  void RunAt(int64_t deadline_ns, std::function<void()> fn) override;

  // Moves time forward by `ns` (0 runs what is already due) and runs every callback that falls
  // due, including ones scheduled by those callbacks.
  void Advance(int64_t ns);
  // Advances to the next pending deadline, if any; returns false when nothing is pending.
  bool AdvanceToNext();
  size_t pending() const;

 private:
  int64_t now_ GUARDED_BY(mu_);
};

constexpr int64_t kNanosPerMicro = 1'000;
constexpr int64_t kNanosPerMilli = 1'000'000;
constexpr int64_t kNanosPerSecond = 1'000'000'000;

}  // namespace tipfs
