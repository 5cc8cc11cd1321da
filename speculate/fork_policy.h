// ForkPolicy: when the program may fork a speculating child, so that speculation never costs the
// program more than it wins. Pure decision logic on times the caller passes in (no clock, no
// system calls), so unit tests drive it directly.
//
// Each child is judged by what it won against what it cost: the stall time its used hints saved
// the program (ChildEnded's `saved_nanos`) against what was charged to it (ChargeChild: the
// fork, ending it, its CPU time beyond the program's stalls, the daemon's work for its reads, the
// copy-on-write faults it caused). It paid when it won more; otherwise it lost. Rules 1-4 are
// checked at each fork opportunity (a read of the mount that follows a stall while no child runs):
//  1. A stall: the read before took at least `stall_nanos` (a program whose reads all hit the
//     cache never forks).
//  2. Back-off: after k lost children in a row the next 2^k - 1 opportunities are skipped (at
//     most max_backoff_skips). A child that paid resets it; one that merely had a hint used
//     does not. A program whose speculation keeps losing (data-dependent reads on garbage, a
//     path that exits at once, a child that never gets ahead) forks rarely.
//  3. Break-even (with the back-off): after a lost child, a fork needs a stall at least as long
//     as that child's cost divided by its used hints (by 1 if none): what each used hint would
//     have had to save for it to pay. Shorter stalls are the situation it lost in (reads faster
//     than a fork, for one); a child that pays clears the bar.
//  4. Budget: what speculation has cost the program stays under `budget_fraction` of the time
//     since Start, plus a small first allowance so that the first child can be tried at all.
//     What children saved does not widen it: the saving is an estimate (a read another hint or
//     the history would have sped up counts too), and with that credit real GNU ld forked 161
//     children where 24 did as well (bench/spec/README.md).
//  5. A running child that has not been ahead of the program for a while is ended once what it
//     cost so far, less what it saved, passes the first allowance (ChildOverBudget): a child
//     that never gets ahead is judged before it has spent the whole run.
// Not thread-safe: the Speculator calls it under its lock.
#pragma once

#include <cstdint>

namespace tipfs::spec {

struct ForkPolicyOptions {
  int64_t stall_nanos = 200'000;  // rule 1; 0: every read is a fork opportunity
  double budget_fraction = 0.01;  // rules 4 and 5; 0 or less: neither
  int64_t first_allowance_nanos = 2'000'000;
  uint32_t max_backoff_skips = 255;  // rules 2 and 3; 0: neither
};

class ForkPolicy {
 public:
  void Configure(const ForkPolicyOptions& options) { options_ = options; }
  // Starts afresh (counters too) at `now_nanos`.
  void Start(int64_t now_nanos);

  // Rule 1 alone, for the fast path: no child to fork unless the last read stalled.
  bool Stalled(int64_t last_read_nanos) const { return last_read_nanos >= options_.stall_nanos; }

  // A fork opportunity (rule 1 already holds, or the caller forks at once after a child that
  // paid) after a read that took `last_read_nanos`: true when rules 2 to 4 allow a fork now.
  // Counts the opportunities it turns down, by rule.
  bool ForkNow(int64_t now_nanos, int64_t last_read_nanos);

  // Rule 5 for the running child: true when it has cost `unbilled_nanos` on top of what was
  // charged to it, less the `saved_nanos` it saved so far, more than the first allowance.
  bool ChildOverBudget(int64_t unbilled_nanos, int64_t saved_nanos) const;

  // A cost of speculation no child is answerable for (faults between children).
  void Charge(int64_t nanos) { overhead_nanos_ += nanos > 0 ? nanos : 0; }
  // A cost of the running (or just ended) child: charged to the budget and to its account.
  void ChargeChild(int64_t nanos);
  // The child ended: `used_hints` of its hints were used by the program and saved it
  // `saved_nanos` of stall. Judges it against what was charged to it, and credits the saving.
  void ChildEnded(uint64_t used_hints, int64_t saved_nanos);

  int64_t overhead_nanos() const { return overhead_nanos_; }
  int64_t saved_nanos() const { return saved_nanos_; }
  uint64_t children_paid() const { return children_paid_; }
  uint64_t children_lost() const { return children_lost_; }
  uint64_t deferred_backoff() const { return deferred_backoff_; }
  uint64_t deferred_break_even() const { return deferred_break_even_; }
  uint64_t deferred_budget() const { return deferred_budget_; }
  uint32_t failures_in_a_row() const { return failures_in_a_row_; }
  // Rule 3's bar (0: none).
  int64_t break_even_nanos() const { return break_even_nanos_; }

 private:
  // Rule 4: what speculation may have cost (net of savings) by `now_nanos`.
  double Allowed(int64_t now_nanos) const;

  ForkPolicyOptions options_;
  int64_t start_nanos_ = 0;
  int64_t overhead_nanos_ = 0;
  int64_t saved_nanos_ = 0;
  int64_t child_cost_nanos_ = 0;  // charged to the running child so far
  int64_t break_even_nanos_ = 0;
  uint32_t failures_in_a_row_ = 0;
  uint32_t skips_left_ = 0;
  uint64_t children_paid_ = 0;
  uint64_t children_lost_ = 0;
  uint64_t deferred_backoff_ = 0;
  uint64_t deferred_break_even_ = 0;
  uint64_t deferred_budget_ = 0;
};

}  // namespace tipfs::spec
