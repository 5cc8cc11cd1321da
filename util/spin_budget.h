// SpinBudget: how long a thread that spins instead of sleeping may still spin. A spin saves the
// wake-up a sleep would cost, but it keeps a CPU busy that speculation, the programs and the
// disks' completions need (on a 2-CPU machine, half of it).
// So spinning is bounded to `spin_share` of wall time: the budget accrues at that share of the
// time that passes and each spin is charged to it. What is not spent is saved up to
// `max_budget_ns`, so a burst after a quiet spell may spin at once, while a thread that spins all
// the time soon runs dry and sleeps as it would without the spin.
//
// Used by SystemClock's timer thread (util/timer_wake.h) and a FUSE ring queue's server
// (fusefs/reply_poll.h). Touched once per wait, never inside a spin.
//
// Pure: no clock, no threads; the caller passes times. Thread-safety: none (its owner's thread's).
#pragma once

#include <algorithm>
#include <cstdint>

namespace tipfs {

class SpinBudget {
 public:
  // Starts full: a thread that has not spun yet may spin as if it had been idle.
  SpinBudget(double spin_share, int64_t max_budget_ns, int64_t now_ns)
      : spin_share_(spin_share),
        max_budget_ns_(max_budget_ns),
        budget_ns_(max_budget_ns),
        accrued_to_ns_(now_ns) {}

  // Earns `spin_share` of the time since the last Accrue, up to `max_budget_ns`. A time not after
  // that one (a reading taken earlier, on another CPU) earns nothing: no time passed that counts.
  void Accrue(int64_t now_ns) {
    if (now_ns <= accrued_to_ns_) return;
    const double earned = static_cast<double>(now_ns - accrued_to_ns_) * spin_share_;
    budget_ns_ = std::min<int64_t>(max_budget_ns_, budget_ns_ + static_cast<int64_t>(earned));
    accrued_to_ns_ = now_ns;
  }

  int64_t available_ns() const { return budget_ns_; }

  // A spin of `ns` was made (or is about to be): the budget pays for it. A spin may overrun what
  // was available (it stops only when it looks at the clock); the budget then stays at 0 rather
  // than owing, and a negative length charges nothing.
  void Charge(int64_t ns) {
    budget_ns_ = std::max<int64_t>(0, budget_ns_ - std::max<int64_t>(0, ns));
  }

 private:
  const double spin_share_;
  const int64_t max_budget_ns_;
  int64_t budget_ns_;
  int64_t accrued_to_ns_;
};

}  // namespace tipfs
