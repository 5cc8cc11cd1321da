#include "util/clock.h"

#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <chrono>

#include "util/cpu_relax.h"

namespace tipfs {

int64_t SystemClock::NowNanos() const {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * kNanosPerSecond + ts.tv_nsec;
}

int64_t SystemClock::ThreadCpuNanos() const {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * kNanosPerSecond + ts.tv_nsec;
}

SystemClock* SystemClock::Default() {
  static SystemClock* clock = new SystemClock();  // never destroyed: used until exit
  return clock;
}

SystemClock::~SystemClock() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void SystemClock::RunAt(int64_t deadline_ns, std::function<void()> fn) {
  bool earliest;
  {
    MutexLock lock(&mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { TimerLoop(); });
    earliest = timers_.empty() || deadline_ns < timers_.top().deadline;
    PushTimer(deadline_ns, std::move(fn));
    if (earliest) earlier_timer_.store(true, std::memory_order_relaxed);
  }
  // Signalled after the lock is released: the timer thread runs at real-time priority, often on
  // this CPU, so a signal under the lock made it preempt this thread, block on the lock, preempt
  // it again at the unlock and sleep: four context switches per emulated request (issue 11). The
  // timer is in the heap before the signal, so the thread cannot miss it. The clock outlives
  // every RunAt (REQUIRES of the destructor's callers), so cv_ is still there.
  if (earliest) cv_.Signal();
}

bool SystemClock::RunDue() {
  const int64_t earliest = earliest_ns_.load(std::memory_order_relaxed);
  if (earliest == kNoTimer) return false;
  const int64_t now = NowNanos();
  if (earliest > now) return false;
  bool ran = false;
  MutexLock lock(&mu_);
  // Only what was due when it looked: a callback's new timer waits for its own time.
  while (!timers_.empty() && timers_.top().deadline <= now) {
    std::function<void()> fn = PopTimer();
    lock.Unlock();
    fn();
    ran = true;
    lock.Lock();
  }
  return ran;
}

void SystemClock::TimerLoop() {
  // Its own name (else it bears its starter's, e.g. a FUSE ring queue's), for top, perf and
  // bench/fast/thread_cost.sh.
  pthread_setname_np(pthread_self(), "tipfs-timer");
  // Started by whichever thread first sets a timer, this thread inherits that thread's CPU
  // affinity; over the FUSE ring that is a queue's thread, pinned to one CPU (fusefs/fuse_ring.h),
  // and the timer thread, at real-time priority, then ran every completion on that CPU alone,
  // preempting the requests of that CPU's queue. It takes the process's affinity (its main
  // thread's) instead.
  cpu_set_t cpus;
  if (sched_getaffinity(getpid(), sizeof(cpus), &cpus) == 0) {
    (void)sched_setaffinity(0, sizeof(cpus), &cpus);
  }
  // Default slack is 50 µs; the disk model wants completions within a few µs of their deadline.
  prctl(PR_SET_TIMERSLACK, 1UL);
  // On a busy machine a normal thread wakes milliseconds late, and every emulated completion
  // with it. Where allowed (root), the lowest real-time priority makes it wake on time; the
  // callbacks are short (complete a request, wake a reader), so it cannot starve anyone.
  sched_param param{};
  param.sched_priority = 1;
  if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0) {
    Mutex::SetTriesOnThisThread(Mutex::kRealTimeTries);
  }
  TimerWakePlanner planner(NowNanos());
  MutexLock lock(&mu_);
  while (!stopping_) {
    if (timers_.empty()) {
      cv_.Wait(&mu_);
      continue;
    }
    int64_t now = NowNanos();
    const int64_t deadline = timers_.top().deadline;
    if (deadline > now) {
      const int64_t wake = planner.SleepUntil(deadline, now);
      earlier_timer_.store(false, std::memory_order_relaxed);
      if (wake > now) {
        // CondVar waits on steady_clock, which is CLOCK_MONOTONIC on Linux, as NowNanos is.
        auto when = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(wake));
        const bool signalled = cv_.WaitUntil(&mu_, when);
        now = NowNanos();
        if (!signalled && now >= wake) planner.OnTimedWake(wake, now);
        continue;
      }
      // The last stretch: spin without the lock, so RunAt is never kept waiting, until the
      // deadline or until an earlier timer arrives.
      lock.Unlock();
      while (NowNanos() < deadline) {
        CpuRelax();
        if (earlier_timer_.load(std::memory_order_relaxed)) break;
      }
      lock.Lock();
      continue;
    }
    std::function<void()> fn = PopTimer();
    lock.Unlock();
    fn();
    lock.Lock();
  }
}

int64_t FakeClock::NowNanos() const {
  MutexLock lock(&mu_);
  return now_;
}

void FakeClock::RunAt(int64_t deadline_ns, std::function<void()> fn) {
  MutexLock lock(&mu_);
  PushTimer(deadline_ns, std::move(fn));
}

void FakeClock::Advance(int64_t ns) {
  MutexLock lock(&mu_);
  const int64_t target = now_ + ns;
  while (!timers_.empty() && timers_.top().deadline <= target) {
    if (timers_.top().deadline > now_) now_ = timers_.top().deadline;
    std::function<void()> fn = PopTimer();
    lock.Unlock();
    fn();
    lock.Lock();
  }
  now_ = target;
}

bool FakeClock::AdvanceToNext() {
  int64_t delta;
  {
    MutexLock lock(&mu_);
    if (timers_.empty()) return false;
    delta = timers_.top().deadline > now_ ? timers_.top().deadline - now_ : 0;
  }
  Advance(delta);
  return true;
}

size_t FakeClock::pending() const {
  MutexLock lock(&mu_);
  return timers_.size();
}

}  // namespace tipfs
