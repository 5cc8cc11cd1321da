// WaitWatchdog: the thread that times the waits of the FUSE ring's serving threads, so that they
// need no timer of their own (util/wait_notice.h).
//
// A ring queue's server tells the watchdog when it begins a wait for the disks inside a handler;
// every kGrace while such waits happen the watchdog asks the ring to pass on each queue whose
// server has waited since before now - kGrace (fusefs/fuse_ring.cc, Queue::PassOnIfWaitingSince).
// A write on fast disks ends well inside the grace and costs its thread a clock read and a few
// atomic operations; a timed sleep per wait cost more than the hand-off it saved on a VM, where
// arming a timer leaves the guest. Once no wait has begun for kIdleRounds periods the watchdog
// parks, and the next wait wakes it.
//
// Thread-safety: WaitBegan() from any thread; Start() and Stop() from one owner.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "util/mutex.h"
#include "util/status.h"

namespace tipfs::fusefs {

class WaitWatchdog {
 public:
  // How long a server may wait for the disks before its ring passes on; also the period.
  static constexpr std::chrono::microseconds kGrace{500};
  static constexpr int kIdleRounds = 100;  // 50 ms without a wait: park

  // Passes on the rings whose server has waited since before `deadline_ns` (SystemClock's time,
  // CLOCK_MONOTONIC, as the servers stamp their waits);
  // returns whether a server is waiting still.
  using CheckFn = bool (*)(void* context, int64_t deadline_ns);

  WaitWatchdog(CheckFn check, void* context) : check_(check), context_(context) {}
  ~WaitWatchdog();  // Stop()
  WaitWatchdog(const WaitWatchdog&) = delete;
  WaitWatchdog& operator=(const WaitWatchdog&) = delete;

  Status Start();
  void Stop();  // idempotent

  // A server began a wait: wakes the watchdog if it is parked.
  void WaitBegan();

 private:
  void Run();

  const CheckFn check_;
  void* const context_;
  std::atomic<uint64_t> waits_began_{0};
  std::atomic<bool> parked_{false};
  Mutex mu_;
  CondVar wake_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tipfs::fusefs
