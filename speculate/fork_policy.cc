#include "speculate/fork_policy.h"

#include <algorithm>

namespace tipfs::spec {

void ForkPolicy::Start(int64_t now_nanos) {
  const ForkPolicyOptions options = options_;
  *this = ForkPolicy();
  options_ = options;
  start_nanos_ = now_nanos;
}

bool ForkPolicy::ForkNow(int64_t now_nanos, int64_t last_read_nanos) {
  if (skips_left_ > 0) {
    --skips_left_;
    ++deferred_backoff_;
    return false;
  }
  if (last_read_nanos < break_even_nanos_) {
    ++deferred_break_even_;
    return false;
  }
  if (options_.budget_fraction > 0 && static_cast<double>(overhead_nanos_) > Allowed(now_nanos)) {
    ++deferred_budget_;
    return false;
  }
  return true;
}

bool ForkPolicy::ChildOverBudget(int64_t unbilled_nanos, int64_t saved_nanos) const {
  if (options_.budget_fraction <= 0) return false;
  return child_cost_nanos_ + std::max<int64_t>(unbilled_nanos, 0) -
             std::max<int64_t>(saved_nanos, 0) >
         options_.first_allowance_nanos;
}

double ForkPolicy::Allowed(int64_t now_nanos) const {
  return static_cast<double>(options_.first_allowance_nanos) +
         options_.budget_fraction * static_cast<double>(now_nanos - start_nanos_);
}

void ForkPolicy::ChargeChild(int64_t nanos) {
  if (nanos <= 0) return;  // a clock step back is no refund
  overhead_nanos_ += nanos;
  child_cost_nanos_ += nanos;
}

void ForkPolicy::ChildEnded(uint64_t used_hints, int64_t saved_nanos) {
  saved_nanos = std::max<int64_t>(saved_nanos, 0);
  saved_nanos_ += saved_nanos;
  const int64_t cost = child_cost_nanos_;
  child_cost_nanos_ = 0;
  if (used_hints > 0 && saved_nanos > cost) {
    ++children_paid_;
    failures_in_a_row_ = 0;
    skips_left_ = 0;
    break_even_nanos_ = 0;
    return;
  }
  ++children_lost_;
  if (options_.max_backoff_skips == 0) return;
  break_even_nanos_ = cost / static_cast<int64_t>(std::max<uint64_t>(used_hints, 1));
  failures_in_a_row_ = std::min<uint32_t>(failures_in_a_row_ + 1, 31);
  const uint64_t skips = (uint64_t{1} << failures_in_a_row_) - 1;
  skips_left_ = static_cast<uint32_t>(std::min<uint64_t>(skips, options_.max_backoff_skips));
}

}  // namespace tipfs::spec
