// TimerWakePlanner with explicit times: what SystemClock's timer thread learns from late wakes,
// and the bounds on how much it spins.
#include "util/timer_wake.h"

#include <gtest/gtest.h>

namespace tipfs {
namespace {

constexpr int64_t kUs = 1'000;

// A machine whose sleeps end on time: nothing to cover, the thread sleeps to each deadline.
TEST(TimerWakePlannerTest, SleepsToTheDeadlineWhileWakesAreOnTime) {
  TimerWakePlanner planner(0);
  int64_t now = 0;
  for (int i = 0; i < 100; ++i) {
    const int64_t deadline = now + 97 * kUs;
    EXPECT_EQ(planner.SleepUntil(deadline, now), deadline);
    planner.OnTimedWake(deadline, deadline);
    now = deadline;
  }
  EXPECT_EQ(planner.margin_ns(), 0);
}

// Sleeps that end 30 us late: the thread learns to wake about that much early, and a deadline
// inside that margin is spun to (SleepUntil returns now).
TEST(TimerWakePlannerTest, LearnsToWakeAsEarlyAsSleepsOverrun) {
  TimerWakePlanner planner(0);
  int64_t now = 0;
  for (int i = 0; i < 200; ++i) {
    const int64_t deadline = now + 1'000 * kUs;  // long gaps: the budget never runs out
    const int64_t target = planner.SleepUntil(deadline, now);
    ASSERT_LT(now, target);
    planner.OnTimedWake(target, target + 30 * kUs);
    now = deadline;
  }
  EXPECT_GE(planner.margin_ns(), 25 * kUs);
  EXPECT_LE(planner.margin_ns(), 30 * kUs);
  const int64_t deadline = now + 500 * kUs;
  EXPECT_EQ(planner.SleepUntil(deadline, now), deadline - planner.margin_ns());
  // Woken inside the margin: spin from here.
  const int64_t woke = deadline - 10 * kUs;
  EXPECT_EQ(planner.SleepUntil(deadline, woke), woke);
}

// A preempted thread's very late wake does not teach it to spin for milliseconds.
TEST(TimerWakePlannerTest, TheMarginIsCappedWhateverTheWakes) {
  TimerWakePlanner::Options options;
  options.max_spin_ns = 40 * kUs;
  TimerWakePlanner planner(options, 0);
  for (int i = 0; i < 100; ++i) planner.OnTimedWake(0, 5'000 * kUs);
  EXPECT_EQ(planner.margin_ns(), 40 * kUs);
}

// Spinning is bounded by a share of wall time: with deadlines back to back the budget runs out
// and the thread sleeps all the way to the deadline, then earns the budget back as time passes.
TEST(TimerWakePlannerTest, SpinsNoMoreThanItsShareOfWallTime) {
  TimerWakePlanner::Options options;
  options.max_spin_ns = 50 * kUs;
  options.spin_share = 0.25;
  options.max_budget_ns = 200 * kUs;
  TimerWakePlanner planner(options, 0);
  for (int i = 0; i < 50; ++i) planner.OnTimedWake(0, 50 * kUs);
  ASSERT_EQ(planner.margin_ns(), 50 * kUs);
  int64_t now = 1'000 * kUs;
  int64_t spun = 0;
  const int64_t start = now;
  for (int i = 0; i < 1'000; ++i) {
    // Each timer is found 40 us before its deadline: inside the margin, a spin if paid for.
    const int64_t deadline = now + 40 * kUs;
    if (planner.SleepUntil(deadline, now) == now) spun += 40 * kUs;
    now = deadline;
  }
  EXPECT_GT(spun, 0);
  EXPECT_LE(spun, (now - start) / 4 + options.max_budget_ns);
  // Idle for a while: the budget is back, capped.
  now += 10'000 * kUs;
  EXPECT_EQ(planner.SleepUntil(now + 40 * kUs, now), now);
  EXPECT_LE(planner.budget_ns(), options.max_budget_ns);
}

}  // namespace
}  // namespace tipfs
