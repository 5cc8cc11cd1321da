// ForkPolicy: when the program may fork a speculating child, so that speculation never makes it
// slower than running without it. Pure decision logic on times the caller passes in (no clock,
// no system calls), so unit tests drive it directly.
//
// Three rules, checked at each fork opportunity (a read of the mount that follows a stall while
// no child runs):
//  1. A stall: the read before took at least `stall_nanos` (a program whose reads all hit the
//     cache never forks).
//  2. Back-off: a child that ended without one of its hints being used by the program was a
//     failure; after k failures in a row the next 2^k - 1 opportunities are skipped (at most
//     max_backoff_skips). One useful child resets it. A program whose speculation keeps failing
//     (data-dependent reads on garbage, a path that exits at once) forks rarely.
//  3. Budget: what speculation has cost the program (the caller charges the time spent forking
//     and ending children, and an estimate of the copy-on-write faults every fork causes in the
//     program afterwards) stays under `budget_fraction` of the time since Start, plus a small
//     first allowance so the first child can be tried at all.
// Not thread-safe: the Speculator calls it under its lock.
#pragma once

#include <cstdint>

namespace tipfs::spec {

struct ForkPolicyOptions {
  int64_t stall_nanos = 200'000;  // rule 1; 0: every read is a fork opportunity
  double budget_fraction = 0.01;  // rule 3; 0 or less: no budget (always allowed)
  int64_t first_allowance_nanos = 2'000'000;
  uint32_t max_backoff_skips = 255;  // rule 2; 0: no back-off
};

class ForkPolicy {
 public:
  void Configure(const ForkPolicyOptions& options) { options_ = options; }
  // Starts afresh (counters too) at `now_nanos`.
  void Start(int64_t now_nanos);

  // Rule 1 alone, for the fast path: no child to fork unless the last read stalled.
  bool Stalled(int64_t last_read_nanos) const { return last_read_nanos >= options_.stall_nanos; }

  // A fork opportunity (rule 1 already holds): true when rules 2 and 3 allow a fork now.
  // Counts the opportunities it turns down.
  bool ForkNow(int64_t now_nanos);

  // Cost charged to speculation (rule 3).
  void Charge(int64_t nanos) { overhead_nanos_ += nanos > 0 ? nanos : 0; }
  // A child ended; `useful_hints` of its hints were used by the program (rule 2).
  void ChildEnded(uint64_t useful_hints);

  int64_t overhead_nanos() const { return overhead_nanos_; }
  uint64_t deferred_backoff() const { return deferred_backoff_; }
  uint64_t deferred_budget() const { return deferred_budget_; }
  uint32_t failures_in_a_row() const { return failures_in_a_row_; }

 private:
  ForkPolicyOptions options_;
  int64_t start_nanos_ = 0;
  int64_t overhead_nanos_ = 0;
  uint32_t failures_in_a_row_ = 0;
  uint32_t skips_left_ = 0;
  uint64_t deferred_backoff_ = 0;
  uint64_t deferred_budget_ = 0;
};

}  // namespace tipfs::spec
