// Wait notices (util/wait_notice.h): a wait on a thread with an observer tells it once, without
// the waiter's lock, when the wait outlasts the grace; a wait that need not sleep tells nobody,
// and threads without an observer wait as before.
#include "util/wait_notice.h"

#include <gtest/gtest.h>

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
    while (!done) noticed.Wait(&cv, &mu, &lock);
  }
};

// Counts notices, and whether the waiter's mutex was free at each.
class CountingObserver : public WaitObserver {
 public:
  explicit CountingObserver(Mutex* waiter_mu) : waiter_mu_(waiter_mu) {}
  void WillWait() override {
    ++notices;
    if (waiter_mu_->TryLock()) {
      ++with_lock_free;
      waiter_mu_->Unlock();
    }
  }
  int notices = 0;
  int with_lock_free = 0;

 private:
  Mutex* waiter_mu_;
};

// Sets the observer for the test's thread and clears it on the way out.
struct ObserverScope {
  explicit ObserverScope(WaitObserver* o) { SetWaitObserver(o); }
  ~ObserverScope() { SetWaitObserver(nullptr); }
};

TEST(WaitNoticeTest, AWaitPastTheGraceIsNoticedOnceWithoutTheWaitersLock) {
  Waited waited;
  CountingObserver observer(&waited.mu);
  ObserverScope scope(&observer);
  ASSERT_TRUE(HasWaitObserver());
  // Far past the grace (100 us); how far does not matter, only that the wait outlasts it.
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    waited.Finish();
  });
  waited.Wait();
  finisher.join();
  EXPECT_EQ(observer.notices, 1);
  EXPECT_EQ(observer.with_lock_free, 1) << "the observer ran while the waiter held its mutex";
}

TEST(WaitNoticeTest, AWaitThatNeedNotSleepIsNotNoticed) {
  Waited waited;
  CountingObserver observer(&waited.mu);
  ObserverScope scope(&observer);
  waited.Finish();
  waited.Wait();
  EXPECT_EQ(observer.notices, 0);
}

TEST(WaitNoticeTest, ThreadsWithoutAnObserverWaitAsBefore) {
  Waited waited;
  CountingObserver observer(&waited.mu);
  EXPECT_FALSE(HasWaitObserver());
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    waited.Finish();
  });
  waited.Wait();
  finisher.join();
  NoticeWait();  // nobody to tell
  EXPECT_EQ(observer.notices, 0);
}

}  // namespace
}  // namespace tipfs
