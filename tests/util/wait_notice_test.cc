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
  int long_waits = 0;
  int begun = 0;
  int ended = 0;
  int misordered = 0;
};

// Sets the observer for the test's thread and clears it on the way out.
struct ObserverScope {
  explicit ObserverScope(WaitObserver* o) { SetWaitObserver(o); }
  ~ObserverScope() { SetWaitObserver(nullptr); }
};

// Runs `finish` on another thread after `ms`, joined at the end of the scope.
struct Later {
  template <class F>
  Later(int ms, F finish)
      : thread([ms, finish] {
          std::this_thread::sleep_for(std::chrono::milliseconds(ms));
          finish();
        }) {}
  ~Later() { thread.join(); }
  std::thread thread;
};

TEST(WaitNoticeTest, AWaitThatSleepsIsBracketedOnce) {
  Waited waited;
  CountingObserver observer;
  ObserverScope scope(&observer);
  ASSERT_TRUE(HasWaitObserver());
  {
    Later finish(20, [&] { waited.Finish(); });
    waited.Wait();
  }
  EXPECT_EQ(observer.begun, 1);
  EXPECT_EQ(observer.ended, 1);
  EXPECT_EQ(observer.misordered, 0);
  EXPECT_EQ(observer.long_waits, 0);
}

TEST(WaitNoticeTest, AWaitThatNeedNotSleepIsNotBracketed) {
  Waited waited;
  CountingObserver observer;
  ObserverScope scope(&observer);
  waited.Finish();
  waited.Wait();
  EXPECT_EQ(observer.begun, 0);
  EXPECT_EQ(observer.ended, 0);
}

TEST(WaitNoticeTest, ALockHeldElsewhereIsBracketedAFreeOneIsNot) {
  SharedMutex io;
  CountingObserver observer;
  ObserverScope scope(&observer);
  { NoticedExclusiveLock lock(&io); }
  { NoticedSharedLock lock(&io); }
  EXPECT_EQ(observer.begun, 0) << "nobody held the lock";

  std::atomic<bool> held{false};
  std::atomic<bool> release{false};
  std::thread holder([&] {
    ExclusiveLock lock(&io);
    held = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!held) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  {
    Later let_go(20, [&] { release = true; });
    NoticedSharedLock lock(&io);  // waits for the holder
  }
  holder.join();
  EXPECT_EQ(observer.begun, 1);
  EXPECT_EQ(observer.ended, 1);
  EXPECT_EQ(observer.misordered, 0);
}

TEST(WaitNoticeTest, NoticeWaitAnnouncesALongWaitOnlyToTheThreadsObserver) {
  CountingObserver observer;
  NoticeWait();  // nobody to tell
  EXPECT_FALSE(HasWaitObserver());
  ObserverScope scope(&observer);
  NoticeWait();
  EXPECT_EQ(observer.long_waits, 1);
  std::thread other([] { NoticeWait(); });  // another thread, without an observer
  other.join();
  EXPECT_EQ(observer.long_waits, 1);
}

TEST(WaitNoticeTest, ThreadsWithoutAnObserverWaitAsBefore) {
  Waited waited;
  EXPECT_FALSE(HasWaitObserver());
  {
    Later finish(20, [&] { waited.Finish(); });
    waited.Wait();
  }
  SharedMutex io;
  { NoticedExclusiveLock lock(&io); }
}

}  // namespace
}  // namespace tipfs
