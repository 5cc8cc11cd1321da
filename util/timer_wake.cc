#include "util/timer_wake.h"

#include <algorithm>

namespace tipfs {

TimerWakePlanner::TimerWakePlanner(const Options& options, int64_t now_ns)
    : options_(options), budget_(options.spin_share, options.max_budget_ns, now_ns) {}

int64_t TimerWakePlanner::margin_ns() const { return std::min(estimate_ns_, options_.max_spin_ns); }

int64_t TimerWakePlanner::SleepUntil(int64_t deadline_ns, int64_t now_ns) {
  budget_.Accrue(now_ns);
  const int64_t margin = margin_ns();
  const int64_t left = deadline_ns - now_ns;
  if (margin <= 0) return deadline_ns;
  if (left > margin) {
    // Wake `margin` early, unless the spin that would follow cannot be paid for.
    return budget_.available_ns() >= margin ? deadline_ns - margin : deadline_ns;
  }
  if (budget_.available_ns() < left) return deadline_ns;
  budget_.Charge(left);
  return now_ns;
}

void TimerWakePlanner::OnTimedWake(int64_t target_ns, int64_t woke_ns) {
  // A wake far past any spin's reach (the thread was preempted) would only drag the estimate up
  // to spins that cannot help: it counts as one just past the cap.
  const int64_t late = std::clamp<int64_t>(woke_ns - target_ns, 0, 2 * options_.max_spin_ns);
  if (late > estimate_ns_) {
    estimate_ns_ += (late - estimate_ns_ + 3) / 4;
  } else {
    estimate_ns_ -= (estimate_ns_ - late) / 16;
  }
}

}  // namespace tipfs
