// SpinBudget with explicit times: what a thread that spins may still spend, as time passes and
// spins are charged.
#include "util/spin_budget.h"

#include <gtest/gtest.h>

namespace tipfs {
namespace {

constexpr int64_t kUs = 1'000;

// A thread that has not spun yet may spin the whole saved-up budget at once.
TEST(SpinBudgetTest, StartsFull) {
  SpinBudget budget(0.25, 2'000 * kUs, 5'000 * kUs);
  EXPECT_EQ(budget.available_ns(), 2'000 * kUs);
  budget.Accrue(5'000 * kUs);
  EXPECT_EQ(budget.available_ns(), 2'000 * kUs);
}

// Spent budget comes back at the share of the wall time that passes.
TEST(SpinBudgetTest, EarnsItsShareOfTheTimeThatPasses) {
  SpinBudget budget(0.25, 2'000 * kUs, 0);
  budget.Charge(2'000 * kUs);
  EXPECT_EQ(budget.available_ns(), 0);
  budget.Accrue(400 * kUs);
  EXPECT_EQ(budget.available_ns(), 100 * kUs);
  budget.Accrue(1'000 * kUs);  // 600 us more, counted once
  EXPECT_EQ(budget.available_ns(), 250 * kUs);
}

// A long idle spell saves up no more than the cap: a thread back from it cannot spin for seconds.
TEST(SpinBudgetTest, SavesUpToTheCap) {
  SpinBudget budget(0.25, 2'000 * kUs, 0);
  budget.Charge(500 * kUs);
  budget.Accrue(60'000'000 * kUs);  // a minute
  EXPECT_EQ(budget.available_ns(), 2'000 * kUs);
}

// A spin that ran past what was left leaves nothing, not a debt that would keep the thread from
// spinning long after the budget has come back.
TEST(SpinBudgetTest, AChargeBeyondWhatIsLeftLeavesZero) {
  SpinBudget budget(0.25, 100 * kUs, 0);
  budget.Charge(150 * kUs);
  EXPECT_EQ(budget.available_ns(), 0);
  budget.Accrue(400 * kUs);
  EXPECT_EQ(budget.available_ns(), 100 * kUs);
  budget.Charge(-50 * kUs);  // a spin that "ended before it began" earns nothing
  EXPECT_EQ(budget.available_ns(), 100 * kUs);
}

// A time before the last one (a clock read earlier, passed later) earns nothing, and the time
// after it is not counted twice.
TEST(SpinBudgetTest, TimeGoingBackwardsEarnsNothing) {
  SpinBudget budget(0.5, 2'000 * kUs, 1'000 * kUs);
  budget.Charge(2'000 * kUs);
  budget.Accrue(1'200 * kUs);
  EXPECT_EQ(budget.available_ns(), 100 * kUs);
  budget.Accrue(900 * kUs);
  EXPECT_EQ(budget.available_ns(), 100 * kUs);
  budget.Accrue(1'400 * kUs);  // 200 us past the latest time seen
  EXPECT_EQ(budget.available_ns(), 200 * kUs);
}

}  // namespace
}  // namespace tipfs
