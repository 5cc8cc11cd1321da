// ReplyPoll with explicit times: when a ring queue's server spins for a reply, and how much.
#include "fusefs/reply_poll.h"

#include <gtest/gtest.h>

namespace tipfs::fusefs {
namespace {

constexpr int64_t kUs = 1'000;

TEST(ReplyPollTest, SpinsOnlyWhileFewRepliesAreOwed) {
  ReplyPoll poll(0);
  EXPECT_EQ(poll.SpinFor(0, 0), 0) << "nothing owed: nothing to wait for";
  EXPECT_EQ(poll.SpinFor(0, 1), 50 * kUs);
  EXPECT_EQ(poll.SpinFor(0, 2), 50 * kUs);
  EXPECT_EQ(poll.SpinFor(0, 3), 0) << "a queue this deep keeps the server busy";
  EXPECT_FALSE(poll.MaySpin(0));
  EXPECT_TRUE(poll.MaySpin(2));
  EXPECT_FALSE(poll.MaySpin(3));
}

// Spins back to back use the budget up; the server then sleeps at once, and earns the budget back
// at a quarter of the wall time that passes.
TEST(ReplyPollTest, SpinsNoMoreThanItsShareOfWallTime) {
  ReplyPoll::Options options;
  options.max_budget_ns = 200 * kUs;
  ReplyPoll poll(options, 0);
  int64_t now = 0;
  int64_t spun = 0;
  for (int i = 0; i < 100; ++i) {
    const int64_t spin = poll.SpinFor(now, 1);
    poll.Spun(now, now + spin, /*found_work=*/true);
    spun += spin;
    now += spin;  // nothing but spinning
  }
  // 200 us saved up, plus a quarter of the time spent spinning it: at most 4/3 of the budget.
  EXPECT_LE(spun, 200 * kUs * 4 / 3 + 50 * kUs);
  EXPECT_LT(poll.SpinFor(now, 1), 50 * kUs);
  now += 4'000 * kUs;  // idle
  EXPECT_EQ(poll.SpinFor(now, 1), 50 * kUs);
  EXPECT_EQ(poll.budget_ns(), 200 * kUs);
}

// A spin cut short by the reply costs only what it spun.
TEST(ReplyPollTest, ChargesWhatWasSpun) {
  ReplyPoll poll(0);
  const int64_t before = poll.budget_ns();
  ASSERT_GT(poll.SpinFor(0, 1), 0);
  poll.Spun(0, 7 * kUs, /*found_work=*/true);
  EXPECT_EQ(poll.budget_ns(), before - 7 * kUs);
}

// Spins that run out (the disk answers later than a spin lasts) stop the spinning; one trial
// spin every `probe_every` waits finds out when replies come sooner again.
TEST(ReplyPollTest, StopsSpinningWhenSpinsRunOutAndProbesNowAndThen) {
  ReplyPoll poll(0);
  int64_t now = 0;
  for (int i = 0; i < 2; ++i) {
    const int64_t spin = poll.SpinFor(now, 1);
    ASSERT_EQ(spin, 50 * kUs);
    poll.Spun(now, now + spin, /*found_work=*/false);
    now += 200 * kUs;
  }
  EXPECT_TRUE(poll.stopped());
  int spins = 0;
  for (int i = 0; i < 64; ++i) {
    if (poll.SpinFor(now, 1) > 0) {
      ++spins;
      poll.Spun(now, now + 50 * kUs, /*found_work=*/false);
    }
    now += 200 * kUs;
  }
  EXPECT_EQ(spins, 2) << "one trial per 32 waits";
  // A trial that finds its reply starts the spinning again.
  while (poll.SpinFor(now, 1) == 0) now += 200 * kUs;
  poll.Spun(now, now + 20 * kUs, /*found_work=*/true);
  EXPECT_FALSE(poll.stopped());
  EXPECT_EQ(poll.SpinFor(now + 200 * kUs, 1), 50 * kUs);
}

}  // namespace
}  // namespace tipfs::fusefs
