// WaitWatchdog (fusefs/wait_watchdog.h): it asks the ring to pass on waits that began more than
// the grace ago, keeps asking while a wait lasts, parks when waits stop, and wakes for the next.
#include "fusefs/wait_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "util/clock.h"

namespace tipfs::fusefs {
namespace {

// A ring with one server: `began_ns` is its wait's start (0: none); a check past the grace
// "passes the ring on" (counts, and ends the wait).
struct FakeRing {
  std::atomic<int64_t> began_ns{0};
  std::atomic<int> checks{0};
  std::atomic<int> passed{0};

  static bool Check(void* self, int64_t deadline_ns) {
    auto* r = static_cast<FakeRing*>(self);
    ++r->checks;
    const int64_t began = r->began_ns.load();
    if (began == 0) return false;
    if (began > deadline_ns) return true;
    int64_t expected = began;
    if (r->began_ns.compare_exchange_strong(expected, 0)) ++r->passed;
    return false;
  }
};

// Polls `done` for up to a minute: a bound on a hang, not a measure.
template <class Done>
bool Eventually(Done done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(WaitWatchdogTest, AWaitPastTheGraceIsPassedOnAndALaterOneWakesItFromParking) {
  FakeRing ring;
  WaitWatchdog watchdog(FakeRing::Check, &ring);
  ASSERT_TRUE(watchdog.Start().ok());

  ring.began_ns = SystemClock::Default()->NowNanos();
  watchdog.WaitBegan();
  EXPECT_TRUE(Eventually([&] { return ring.passed.load() == 1; }));
  EXPECT_EQ(ring.began_ns.load(), 0);

  // No waits: it parks after kIdleRounds checks and stops checking.
  EXPECT_TRUE(Eventually([&] {
    const int before = ring.checks.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return ring.checks.load() == before;
  }));

  ring.began_ns = SystemClock::Default()->NowNanos();
  watchdog.WaitBegan();  // wakes it
  EXPECT_TRUE(Eventually([&] { return ring.passed.load() == 2; }));
  watchdog.Stop();
  watchdog.Stop();  // again: returns
}

TEST(WaitWatchdogTest, StopsWhenNeverWoken) {
  FakeRing ring;
  WaitWatchdog watchdog(FakeRing::Check, &ring);
  ASSERT_TRUE(watchdog.Start().ok());
  watchdog.Stop();
  EXPECT_EQ(ring.passed.load(), 0);
}

}  // namespace
}  // namespace tipfs::fusefs
