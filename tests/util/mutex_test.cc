// util/mutex.h: the wrappers keep the standard locks' semantics (exclusion, shared readers, the
// lock released while a CondVar waits and held again after), Mutex's tries before it sleeps
// included. Each test orders its threads with
// the locks themselves, never with sleeps.
#include "util/mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

namespace tipfs {
namespace {

TEST(MutexTest, MutexLockExcludesOtherThreadsAndUnlockLetsThemIn) {
  Mutex mu;
  MutexLock lock(&mu);
  bool taken_while_held = false;
  std::thread([&] {
    if (mu.TryLock()) {
      taken_while_held = true;
      mu.Unlock();
    }
  }).join();
  EXPECT_FALSE(taken_while_held);
  lock.Unlock();
  bool taken_after_unlock = false;
  std::thread([&] {
    if (mu.TryLock()) {
      taken_after_unlock = true;
      mu.Unlock();
    }
  }).join();
  EXPECT_TRUE(taken_after_unlock);
  lock.Lock();  // the destructor releases it again
}

// Lock tries again for a short while before it sleeps; either way every locker gets in, one at a
// time.
void CountUnderContention(int tries) {
  Mutex mu;
  int count = 0;  // written under mu only
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      Mutex::SetTriesOnThisThread(tries);
      for (int i = 0; i < 20000; ++i) {
        MutexLock lock(&mu);
        if (inside.fetch_add(1) != 0) overlapped = true;
        ++count;
        inside.fetch_sub(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(overlapped.load());
  EXPECT_EQ(count, 4 * 20000);
}

TEST(MutexTest, ContendedLockersGetInOneAtATime) { CountUnderContention(Mutex::kTries); }

TEST(MutexTest, ContendedLockersWithFewTriesGetInOneAtATime) {
  CountUnderContention(Mutex::kRealTimeTries);
}

TEST(MutexTest, ContendedLockersThatNeverTryAgainGetInOneAtATime) { CountUnderContention(0); }

// A holder that keeps the lock past the locker's tries: the locker sleeps and still gets in,
// after the release.
TEST(MutexTest, ALockHeldLongerThanTheTriesIsWaitedFor) {
  Mutex mu;
  std::atomic<bool> trying{false};
  bool released = false;  // written under mu
  bool saw_release = false;
  MutexLock lock(&mu);
  std::thread locker([&] {
    trying = true;
    MutexLock inner(&mu);
    saw_release = released;
  });
  while (!trying.load()) {
  }
  // Hold it for 2 ms of the caller's own spinning: far past the tries (a few microseconds).
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
  while (std::chrono::steady_clock::now() < until) {
  }
  released = true;
  lock.Unlock();
  locker.join();
  EXPECT_TRUE(saw_release);
}

TEST(MutexTest, CondVarReleasesTheMutexWhileWaitingAndHoldsItAfter) {
  Mutex mu;
  CondVar cv;
  int stage = 0;  // written under mu
  std::thread other([&] {
    MutexLock lock(&mu);  // only possible while the main thread waits
    stage = 1;
    cv.SignalAll();
  });
  {
    MutexLock lock(&mu);
    while (stage == 0) cv.Wait(&mu);
    EXPECT_EQ(stage, 1);
    bool taken = false;
    std::thread([&] {
      if (mu.TryLock()) {
        taken = true;
        mu.Unlock();
      }
    }).join();
    EXPECT_FALSE(taken) << "Wait returned without the mutex held";
  }
  other.join();
}

TEST(MutexTest, WaitUntilAPassedDeadlineReportsTheTimeout) {
  Mutex mu;
  CondVar cv;
  MutexLock lock(&mu);
  EXPECT_FALSE(cv.WaitUntil(&mu, std::chrono::steady_clock::now() - std::chrono::seconds(1)));
  EXPECT_FALSE(cv.WaitFor(&mu, std::chrono::nanoseconds(0)));
}

// What another thread can take of `mu` right now: {shared, exclusive}.
std::pair<bool, bool> WhatAnotherThreadGets(SharedMutex* mu) {
  std::pair<bool, bool> got{false, false};
  std::thread([&] {
    if (mu->TryLockShared()) {
      got.first = true;
      mu->UnlockShared();
    }
    if (mu->TryLock()) {
      got.second = true;
      mu->Unlock();
    }
  }).join();
  return got;
}

TEST(SharedMutexTest, ReadersShareItAndAWriterExcludesEveryone) {
  SharedMutex mu;
  {
    SharedLock reader(&mu);
    EXPECT_EQ(WhatAnotherThreadGets(&mu), std::make_pair(true, false));
  }
  {
    ExclusiveLock writer(&mu);
    EXPECT_EQ(WhatAnotherThreadGets(&mu), std::make_pair(false, false));
  }
  EXPECT_EQ(WhatAnotherThreadGets(&mu), std::make_pair(true, true));
}

}  // namespace
}  // namespace tipfs
