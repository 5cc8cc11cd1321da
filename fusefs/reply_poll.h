// ReplyPoll: whether a FUSE ring queue's server spins for a reply before it sleeps in
// io_uring_enter, and for how long. A read that misses is answered from its disk completion on
// another thread, which queues the reply for the server (fusefs/fuse_ring.h) and wakes it. At
// queue depth 1 the server's CPU is idle meanwhile, and on a VM a halted CPU's wake-up costs
// 10-20 us (bench/fast/README.md), a fifth of an emulated NVMe read. So while few replies are
// owed, the server spins for a short while instead: the reply or the next request finds it awake.
//
// A spin pays only where the reply comes within it: on an emulated NVMe disk (21 us) it does, on an
// SSD (97 us) the spin runs out and the server sleeps anyway. So after `misses_to_stop` spins in a
// row that ran out, the server stops spinning and only tries again every `probe_every`-th wait.
//
// With more replies owed than `most_owed` the server does not spin: requests in flight keep it
// busy, a late wake-up answers several replies at once, and the CPU a spin takes is the one the
// programs and the disks' completions need. Spinning is bounded as SystemClock's is
// (util/timer_wake.h): at most `max_spin_ns` per wait and `spin_share` of wall time overall (a
// SpinBudget, util/spin_budget.h, saved up to `max_budget_ns`).
//
// Pure: no clock, no threads; the caller passes times. Thread-safety: none (the server's).
#pragma once

#include <algorithm>
#include <cstdint>

#include "util/spin_budget.h"

namespace tipfs::fusefs {

class ReplyPoll {
 public:
  struct Options {
    uint32_t most_owed = 2;             // spin only while at most this many replies are owed
    int64_t max_spin_ns = 50'000;       // the longest spin before one wait
    double spin_share = 0.25;           // of wall time, over the budget's window
    int64_t max_budget_ns = 2'000'000;  // budget saved up while idle, at most
    uint32_t misses_to_stop = 2;        // spins in a row that ran out before it stops
    uint32_t probe_every = 32;          // while stopped: the waits per trial spin
  };

  explicit ReplyPoll(int64_t now_ns) : ReplyPoll(Options(), now_ns) {}
  ReplyPoll(const Options& options, int64_t now_ns)
      : options_(options), budget_(options.spin_share, options.max_budget_ns, now_ns) {}

  // Whether a wait with `owed` replies owed may spin at all: no clock read is needed to know
  // that it may not (the budget accrues by elapsed time, whenever SpinFor next looks).
  bool MaySpin(uint32_t owed) const { return owed > 0 && owed <= options_.most_owed; }
  // Before a wait, with `owed` replies owed: how long to spin (0: sleep at once).
  int64_t SpinFor(int64_t now_ns, uint32_t owed) {
    budget_.Accrue(now_ns);
    if (!MaySpin(owed)) return 0;
    if (misses_ >= options_.misses_to_stop && ++waits_since_probe_ < options_.probe_every) return 0;
    waits_since_probe_ = 0;
    return std::min(options_.max_spin_ns, budget_.available_ns());
  }
  // A spin that began at `began_ns` ended at `ended_ns`, with work found (a reply, a request) or
  // run out: charged to the budget, and counted for whether spinning pays.
  void Spun(int64_t began_ns, int64_t ended_ns, bool found_work) {
    budget_.Charge(ended_ns - began_ns);
    misses_ = found_work ? 0 : misses_ + 1;
  }

  bool stopped() const { return misses_ >= options_.misses_to_stop; }

  int64_t budget_ns() const { return budget_.available_ns(); }

 private:
  const Options options_;
  SpinBudget budget_;
  uint32_t misses_ = 0;             // spins in a row that ran out
  uint32_t waits_since_probe_ = 0;  // while stopped
};

}  // namespace tipfs::fusefs
