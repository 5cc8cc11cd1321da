#include "util/clock.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace tipfs {
namespace {

TEST(FakeClockTest, RunsCallbacksInDeadlineOrderAtTheirOwnTime) {
  FakeClock clock(0);
  std::vector<std::pair<int, int64_t>> ran;
  clock.RunAt(300, [&] { ran.push_back({3, clock.NowNanos()}); });
  clock.RunAt(100, [&] { ran.push_back({1, clock.NowNanos()}); });
  clock.RunAt(200, [&] {
    ran.push_back({2, clock.NowNanos()});
    clock.RunAt(250, [&] { ran.push_back({25, clock.NowNanos()}); });
  });
  clock.Advance(260);
  ASSERT_EQ(ran.size(), 3u);
  EXPECT_EQ(ran[0], (std::pair<int, int64_t>{1, 100}));
  EXPECT_EQ(ran[1], (std::pair<int, int64_t>{2, 200}));
  EXPECT_EQ(ran[2], (std::pair<int, int64_t>{25, 250}));
  EXPECT_EQ(clock.NowNanos(), 260);
  EXPECT_EQ(clock.pending(), 1u);
  EXPECT_TRUE(clock.AdvanceToNext());
  EXPECT_EQ(ran.back().first, 3);
  EXPECT_FALSE(clock.AdvanceToNext());
}

TEST(FakeClockTest, RunAtNeverRunsInline) {
  FakeClock clock(0);
  bool ran = false;
  clock.RunAt(0, [&] { ran = true; });
  EXPECT_FALSE(ran);
  clock.Advance(0);
  EXPECT_TRUE(ran);
}

TEST(SystemClockTest, RunsCallbackNoEarlierThanDeadline) {
  SystemClock clock;
  std::promise<int64_t> fired;
  int64_t deadline = clock.NowNanos() + 2 * kNanosPerMilli;
  clock.RunAt(deadline, [&] { fired.set_value(clock.NowNanos()); });
  EXPECT_GE(fired.get_future().get(), deadline);
}

// Timers back to back, closer than the thread's sleeps overrun (it spins the last stretch): each
// runs once, never before its deadline, in deadline order, also when an earlier one is added
// while the thread waits for a later one.
TEST(SystemClockTest, ManyCloseTimersRunOnceInOrderNeverEarly) {
  SystemClock clock;
  constexpr int kTimers = 400;
  std::atomic<int> ran{0};
  std::atomic<int> early{0};
  std::atomic<int> out_of_order{0};
  std::atomic<int64_t> last_deadline{0};
  std::promise<void> all;
  // Far enough ahead that every timer is in before the first is due, even on a loaded machine.
  const int64_t base = clock.NowNanos() + 200 * kNanosPerMilli;
  for (int i = 0; i < kTimers; ++i) {
    // Deadlines 20 us apart, added in an order that often puts an earlier one after a later one.
    const int64_t deadline = base + ((i * 7) % kTimers) * 20 * kNanosPerMicro;
    clock.RunAt(deadline, [&, deadline] {
      if (clock.NowNanos() < deadline) ++early;
      if (deadline < last_deadline.exchange(deadline)) ++out_of_order;
      if (++ran == kTimers) all.set_value();
    });
  }
  all.get_future().wait();
  EXPECT_EQ(ran.load(), kTimers);
  EXPECT_EQ(early.load(), 0);
  EXPECT_EQ(out_of_order.load(), 0);
}

TEST(SystemClockTest, EarlierTimerAddedLaterFiresFirst) {
  SystemClock clock;
  std::atomic<int> order{0};
  std::promise<void> both;
  int first_seen = 0;
  int64_t now = clock.NowNanos();
  clock.RunAt(now + 50 * kNanosPerMilli, [&] {
    if (++order == 2) both.set_value();
  });
  clock.RunAt(now + 1 * kNanosPerMilli, [&] {
    first_seen = order.load() + 1;
    if (++order == 2) both.set_value();
  });
  both.get_future().wait();
  EXPECT_EQ(first_seen, 1);
}

// A looping thread runs what is due itself (RunDue), on its own thread, and leaves what is not.
// The timer thread is held in a callback meanwhile, so the due timer is there for RunDue to take.
TEST(SystemClockTest, RunDueRunsWhatIsDueOnTheCallingThreadOnly) {
  std::promise<void> holding;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  SystemClock clock;  // after what its callbacks use: its destructor joins the timer thread first
  clock.RunAt(clock.NowNanos(), [&] {
    holding.set_value();
    released.wait();
  });
  holding.get_future().wait();
  EXPECT_FALSE(clock.RunDue()) << "the holding timer was taken; nothing else is pending";

  const int64_t now = clock.NowNanos();
  std::thread::id due_ran_on;
  bool later_ran = false;
  clock.RunAt(now, [&] { due_ran_on = std::this_thread::get_id(); });
  clock.RunAt(now + 3600 * kNanosPerSecond, [&] { later_ran = true; });
  EXPECT_TRUE(clock.RunDue());
  EXPECT_EQ(due_ran_on, std::this_thread::get_id());
  EXPECT_FALSE(later_ran);
  EXPECT_FALSE(clock.RunDue()) << "a timer runs once";
  release.set_value();  // the later timer is dropped with the clock
}

// A loop calling RunDue and the timer thread race for the same timers: each runs exactly once,
// and never before its deadline.
TEST(SystemClockTest, TimersRunOnceWhenALoopRacesTheTimerThread) {
  SystemClock clock;
  constexpr int kTimers = 2000;
  std::vector<std::atomic<int>> runs(kTimers);
  std::atomic<int> ran{0};
  std::atomic<int> early{0};
  std::atomic<bool> stop{false};
  std::thread loop([&] {
    while (!stop.load()) clock.RunDue();
  });
  const int64_t base = clock.NowNanos() + 20 * kNanosPerMilli;
  for (int i = 0; i < kTimers; ++i) {
    const int64_t deadline = base + (i % 200) * 10 * kNanosPerMicro;
    clock.RunAt(deadline, [&, i, deadline] {
      if (clock.NowNanos() < deadline) ++early;
      ++runs[i];
      ++ran;
    });
  }
  // Bounded, so that a lost timer fails the test instead of hanging it.
  const int64_t give_up = clock.NowNanos() + 30 * kNanosPerSecond;
  while (ran.load() < kTimers && clock.NowNanos() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop = true;
  loop.join();
  int not_once = 0;
  for (const std::atomic<int>& r : runs) not_once += r.load() != 1;
  EXPECT_EQ(not_once, 0);
  EXPECT_EQ(ran.load(), kTimers);
  EXPECT_EQ(early.load(), 0);
}

// The timer thread is started by the first RunAt's thread and would inherit its CPU affinity; a
// FUSE ring queue's thread is pinned to one CPU, so the completions of every emulated disk (at
// real-time priority) ran on that CPU alone. The timer thread takes the process's affinity.
TEST(SystemClockTest, TimerThreadTakesTheProcessAffinityNotItsStarters) {
  cpu_set_t process;
  ASSERT_EQ(sched_getaffinity(getpid(), sizeof(process), &process), 0);
  if (CPU_COUNT(&process) < 2) GTEST_SKIP() << "needs two CPUs to tell the affinities apart";
  int first = 0;
  while (!CPU_ISSET(first, &process)) ++first;

  SystemClock clock;
  std::promise<cpu_set_t> timer_affinity;
  bool starter_pinned = false;
  std::thread starter([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    starter_pinned = sched_setaffinity(0, sizeof(one), &one) == 0;
    if (!starter_pinned) return;  // no timer: the promise would never be kept
    clock.RunAt(clock.NowNanos(), [&] {
      cpu_set_t mine;
      CPU_ZERO(&mine);
      sched_getaffinity(0, sizeof(mine), &mine);
      timer_affinity.set_value(mine);
    });
  });
  starter.join();
  ASSERT_TRUE(starter_pinned) << "could not pin the starting thread to CPU " << first;
  cpu_set_t timer = timer_affinity.get_future().get();
  EXPECT_TRUE(CPU_EQUAL(&timer, &process))
      << "timer thread on " << CPU_COUNT(&timer) << " CPUs, process on " << CPU_COUNT(&process);
}

}  // namespace
}  // namespace tipfs
