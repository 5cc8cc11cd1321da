// util/mutex.h: the wrappers keep the standard locks' semantics (exclusion, shared readers, the
// lock released while a CondVar waits and held again after). Each test orders its threads with
// the locks themselves, never with sleeps.
#include "util/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <utility>

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
