#include "speculate/fork_policy.h"

#include <algorithm>

namespace tipfs::spec {

void ForkPolicy::Start(int64_t now_nanos) {
  start_nanos_ = now_nanos;
  overhead_nanos_ = 0;
  failures_in_a_row_ = 0;
  skips_left_ = 0;
  deferred_backoff_ = 0;
  deferred_budget_ = 0;
}

bool ForkPolicy::ForkNow(int64_t now_nanos) {
  if (skips_left_ > 0) {
    --skips_left_;
    ++deferred_backoff_;
    return false;
  }
  if (options_.budget_fraction > 0) {
    const double allowed = static_cast<double>(options_.first_allowance_nanos) +
                           options_.budget_fraction * static_cast<double>(now_nanos - start_nanos_);
    if (static_cast<double>(overhead_nanos_) > allowed) {
      ++deferred_budget_;
      return false;
    }
  }
  return true;
}

void ForkPolicy::ChildEnded(uint64_t useful_hints) {
  if (useful_hints > 0) {
    failures_in_a_row_ = 0;
    skips_left_ = 0;
    return;
  }
  if (options_.max_backoff_skips == 0) return;
  failures_in_a_row_ = std::min<uint32_t>(failures_in_a_row_ + 1, 31);
  const uint64_t skips = (uint64_t{1} << failures_in_a_row_) - 1;
  skips_left_ = static_cast<uint32_t>(std::min<uint64_t>(skips, options_.max_backoff_skips));
}

}  // namespace tipfs::spec
