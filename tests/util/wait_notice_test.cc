// Wait notices (util/wait_notice.h): a wait that sleeps is bracketed once for the thread's
// observer, and a wait that need not sleep is not; a lock held elsewhere is bracketed, a free one
// is not; NoticeWait() announces a long wait; threads without an observer wait as before.
#include "util/wait_notice.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "util/mutex.h"

namespace tipfs {
namespace {

struct Waited {
  Mutex mu;
  CondVar cv;
  bool done GUARDED_BY(mu) = false;

  void Finish() {
    MutexLock lock(&mu);
    done = true;
    cv.SignalAll();
  }
  void Wait() {
    MutexLock lock(&mu);
    NoticedWait noticed;
    while (!done) noticed.Wait(&cv, &mu);
  }
};

// Counts what it is told; read by the thread that ends the wait, so atomic.
class CountingObserver : public WaitObserver {
 public:
  void WillWait() override { ++long_waits; }
  void WaitBegins() override {
    ++begun;
    if (ended != begun - 1) ++misordered;
  }
  void WaitEnds() override {
    ++ended;
    if (ended != begun) ++misordered;
  }
  // Until a wait has begun, or a minute (a bound on a hang: then the test's counts fail).
  void AwaitBegun() const {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (begun == 0 && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::atomic<int> long_waits{0};
  std::atomic<int> begun{0};
  std::atomic<int> ended{0};
  std::atomic<int> misordered{0};
};

// Sets the observer for the test's thread and clears it on the way out.
struct ObserverScope {
  explicit ObserverScope(WaitObserver* o) { SetWaitObserver(o); }
  ~ObserverScope() { SetWaitObserver(nullptr); }
};

// Runs `finish` on another thread once `observer` has been told a wait began (the waiter is
// about to sleep, or sleeps), joined at the end of the scope.
struct OnceBegun {
  template <class F>
  OnceBegun(const CountingObserver* observer, F finish)
      : thread([observer, finish] {
          observer->AwaitBegun();
          finish();
        }) {}
  ~OnceBegun() { thread.join(); }
  std::thread thread;
};

TEST(WaitNoticeTest, AWaitThatSleepsIsBracketedOnce) {
  Waited waited;
  CountingObserver observer;
  ObserverScope scope(&observer);
  ASSERT_TRUE(HasWaitObserver());
  {
    OnceBegun finish(&observer, [&] { waited.Finish(); });
    waited.Wait();
  }
  EXPECT_EQ(observer.begun.load(), 1);
  EXPECT_EQ(observer.ended.load(), 1);
  EXPECT_EQ(observer.misordered.load(), 0);
  EXPECT_EQ(observer.long_waits.load(), 0);
}

TEST(WaitNoticeTest, AWaitThatNeedNotSleepIsNotBracketed) {
  Waited waited;
  CountingObserver observer;
  ObserverScope scope(&observer);
  waited.Finish();
  waited.Wait();
  EXPECT_EQ(observer.begun.load(), 0);
  EXPECT_EQ(observer.ended.load(), 0);
}

TEST(WaitNoticeTest, ALockHeldElsewhereIsBracketedAFreeOneIsNot) {
  SharedMutex io;
  CountingObserver observer;
  ObserverScope scope(&observer);
  { NoticedExclusiveLock lock(&io); }
  { NoticedSharedLock lock(&io); }
  EXPECT_EQ(observer.begun.load(), 0) << "nobody held the lock";

  std::atomic<bool> held{false};
  std::atomic<bool> release{false};
  std::thread holder([&] {
    ExclusiveLock lock(&io);
    held = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!held) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  {
    OnceBegun let_go(&observer, [&] { release = true; });
    NoticedSharedLock lock(&io);  // waits for the holder
  }
  holder.join();
  EXPECT_EQ(observer.begun.load(), 1);
  EXPECT_EQ(observer.ended.load(), 1);
  EXPECT_EQ(observer.misordered.load(), 0);
}

TEST(WaitNoticeTest, NoticeWaitAnnouncesALongWaitOnlyToTheThreadsObserver) {
  CountingObserver observer;
  NoticeWait();  // nobody to tell
  EXPECT_FALSE(HasWaitObserver());
  ObserverScope scope(&observer);
  NoticeWait();
  EXPECT_EQ(observer.long_waits.load(), 1);
  std::thread other([] { NoticeWait(); });  // another thread, without an observer
  other.join();
  EXPECT_EQ(observer.long_waits.load(), 1);
}

TEST(WaitNoticeTest, ThreadsWithoutAnObserverWaitAsBefore) {
  Waited waited;
  EXPECT_FALSE(HasWaitObserver());
  {
    std::thread finisher([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      waited.Finish();
    });
    waited.Wait();  // sleeps, or finds it done: either way it returns
    finisher.join();
  }
  SharedMutex io;
  { NoticedExclusiveLock lock(&io); }
}

}  // namespace
}  // namespace tipfs
