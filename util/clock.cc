#include "util/clock.h"

#include <pthread.h>
#include <sched.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

namespace {

int MakeTimerFd() {
  const int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
  if (fd < 0) {
    std::fprintf(stderr, "INTERNAL ERROR: timerfd_create: %s\n", std::strerror(errno));
    std::abort();
  }
  return fd;
}

}  // namespace

SystemClock::SystemClock() : timer_fd_(MakeTimerFd()) {}

SystemClock::~SystemClock() {
  std::thread thread;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    ArmLocked(0);  // expires at once: a sleeping thread wakes and sees stopping_
    thread = std::move(thread_);
  }
  if (thread.joinable()) thread.join();
  ::close(timer_fd_);
}

void SystemClock::ArmLocked(int64_t when) {
  itimerspec spec{};
  if (when != kNever) {
    when = std::max<int64_t>(when, 1);  // an all-zero it_value would disarm it
    spec.it_value.tv_sec = static_cast<time_t>(when / kNanosPerSecond);
    spec.it_value.tv_nsec = static_cast<long>(when % kNanosPerSecond);
  }
  // Cannot fail with a valid descriptor and a normalised time.
  (void)timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr);
  armed_at_ = when;
}

void SystemClock::RunAt(int64_t deadline_ns, std::function<void()> fn) {
  MutexLock lock(&mu_);
  if (!thread_.joinable()) thread_ = std::thread([this] { TimerLoop(); });
  const bool earliest = timers_.empty() || deadline_ns < timers_.top().deadline;
  PushTimer(deadline_ns, std::move(fn));
  if (!earliest) return;  // the thread's wake-up already comes before this deadline
  earlier_timer_.store(true, std::memory_order_relaxed);  // a spinning thread looks again
  if (!sleeping_) return;  // awake: it looks at the heap before it sleeps again
  const int64_t wake = deadline_ns - margin_ns_.load(std::memory_order_relaxed);
  if (wake < armed_at_) {
    ArmLocked(wake);
    ++counters_.rearms_by_caller;
  }
}

SystemClock::Counters SystemClock::counters() const {
  MutexLock lock(&mu_);
  return counters_;
}

void SystemClock::TimerLoop() {
  // On a busy machine a normal thread wakes milliseconds late, and every emulated completion
  // with it. Where allowed (root), the lowest real-time priority makes it wake on time; the
  // callbacks are short (complete a request, wake a reader), so it cannot starve anyone.
  sched_param param{};
  param.sched_priority = 1;
  (void)pthread_setschedparam(pthread_self(), SCHED_FIFO, &param);
  TimerWakePlanner planner(NowNanos());
  MutexLock lock(&mu_);
  while (!stopping_) {
    int64_t now = NowNanos();
    int64_t wake = kNever;
    if (!timers_.empty()) {
      const int64_t deadline = timers_.top().deadline;
      if (deadline <= now) {
        std::function<void()> fn = PopTimer();
        lock.Unlock();
        fn();
        lock.Lock();
        continue;
      }
      wake = planner.SleepUntil(deadline, now);
      earlier_timer_.store(false, std::memory_order_relaxed);
      if (wake <= now) {
        // The last stretch: spin without the lock, so RunAt is never kept waiting, until the
        // deadline or until an earlier timer arrives.
        lock.Unlock();
        while (NowNanos() < deadline) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
          if (earlier_timer_.load(std::memory_order_relaxed)) break;
        }
        lock.Lock();
        continue;
      }
    }
    // Sleep until `wake`, or until a RunAt arms the timerfd earlier (or the destructor at once).
    ArmLocked(wake);
    sleeping_ = true;
    ++counters_.sleeps;
    lock.Unlock();
    uint64_t expiries = 0;
    const ssize_t n = ::read(timer_fd_, &expiries, sizeof(expiries));  // EINTR: loop again
    now = NowNanos();
    lock.Lock();
    sleeping_ = false;
    // An expiry of the time last armed (by this thread or by a RunAt): how late this sleep ended.
    if (n == static_cast<ssize_t>(sizeof(expiries)) && !stopping_ && armed_at_ != kNever &&
        now >= armed_at_) {
      planner.OnTimedWake(armed_at_, now);
      // Published where it is learnt: a thread woken by a RunAt's arming often finds its timer
      // already due and never plans, so RunAt would keep arming with a stale margin.
      margin_ns_.store(planner.margin_ns(), std::memory_order_relaxed);
    }
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
