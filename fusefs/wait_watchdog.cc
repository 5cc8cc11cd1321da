#include "fusefs/wait_watchdog.h"

#include <pthread.h>

#include <string>
#include <system_error>

#include "util/clock.h"

namespace tipfs::fusefs {

WaitWatchdog::~WaitWatchdog() { Stop(); }

Status WaitWatchdog::Start() {
  try {
    thread_ = std::thread([this] { Run(); });
  } catch (const std::system_error& e) {
    return Status::FromErrno(e.code().value(), std::string("FUSE ring: the watchdog: ") + e.what());
  }
  return Status::OK();
}

void WaitWatchdog::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  wake_.Signal();
  if (thread_.joinable()) thread_.join();
}

void WaitWatchdog::WaitBegan() {
  // Sequentially consistent with Run's store of parked_ and its load of the count: either the
  // watchdog sees this wait's count, or this sees it parked and wakes it.
  waits_began_.fetch_add(1);
  if (parked_.load()) {
    MutexLock lock(&mu_);
    wake_.Signal();
  }
}

void WaitWatchdog::Run() {
  pthread_setname_np(pthread_self(), "tipfs-ringdog");
  uint64_t seen = waits_began_.load();
  int idle_rounds = 0;
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (idle_rounds >= kIdleRounds) {
        parked_.store(true);
        while (!stop_ && waits_began_.load() == seen) wake_.Wait(&mu_);
        parked_.store(false);
        idle_rounds = 0;
      }
      if (stop_) return;
    }
    std::this_thread::sleep_for(kGrace);
    const uint64_t began = waits_began_.load();
    const int64_t deadline = SystemClock::Default()->NowNanos() -
                             std::chrono::duration_cast<std::chrono::nanoseconds>(kGrace).count();
    const bool waiting = check_(context_, deadline);
    idle_rounds = waiting || began != seen ? 0 : idle_rounds + 1;
    seen = began;
  }
}

}  // namespace tipfs::fusefs
