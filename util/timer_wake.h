// TimerWakePlanner: when SystemClock's timer thread stops sleeping and spins to its next deadline.
// A sleeping thread wakes late by the machine's timer-interrupt and scheduling latency: on the
// shared 2-vCPU VM (haltpoll, no guest halt polling) a clock_nanosleep to an absolute deadline
// returns 30 us late at the median and 63 us at p90 even at SCHED_FIFO with 1 ns timer slack,
// which put every emulated ssd completion (97 us of service) about a third late. The planner
// learns how late this thread's sleeps end and has it sleep until that much before a deadline,
// then spin the rest, so a completion lands on its deadline instead of after it.
//
// Spinning costs CPU that speculation and the benchmark's own processes need, so it is bounded
// twice: at most `max_spin_ns` per wake (a wake-up later than that is not covered: the machine is
// too busy for a spin to help), and at most `spin_share` of wall time overall (a SpinBudget,
// util/spin_budget.h, saved up to `max_budget_ns`); without budget the thread sleeps to the
// deadline as before. On a machine whose sleeps end on time the estimate stays near zero and
// nothing spins.
//
// Pure: no clock, no threads; the caller passes times. Thread-safety: none (the timer thread's).
#pragma once

#include <cstdint>

#include "util/spin_budget.h"

namespace tipfs {

class TimerWakePlanner {
 public:
  struct Options {
    int64_t max_spin_ns = 60'000;       // the longest spin before one deadline
    double spin_share = 0.25;           // of wall time, over the budget's window
    int64_t max_budget_ns = 2'000'000;  // budget saved up while idle, at most
  };

  explicit TimerWakePlanner(int64_t now_ns) : TimerWakePlanner(Options(), now_ns) {}
  TimerWakePlanner(const Options& options, int64_t now_ns);

  // For the earliest timer, due at `deadline_ns` > `now_ns`: the time to sleep until. Equal to
  // `now_ns` means spin to the deadline now (the budget is charged for it); `deadline_ns` means
  // sleep all the way (no budget, or nothing learnt to cover).
  int64_t SleepUntil(int64_t deadline_ns, int64_t now_ns);
  // A sleep asked to end at `target_ns` ended, by its timeout, at `woke_ns`: learns the lateness.
  // Not for sleeps another thread cut short (a new earlier timer): those say nothing of it.
  void OnTimedWake(int64_t target_ns, int64_t woke_ns);

  // How long before a deadline the thread now wakes (the learnt lateness, capped).
  int64_t margin_ns() const;
  int64_t budget_ns() const { return budget_.available_ns(); }
  // The lateness learnt: it moves up by a fourth of the gap to a later wake and down by a
  // sixteenth to an earlier one, so it settles in the upper part of recent wakes' spread: most
  // wakes then come a little early and spin briefly, few come late.
  int64_t lateness_estimate_ns() const { return estimate_ns_; }

 private:
  const Options options_;
  int64_t estimate_ns_ = 0;
  SpinBudget budget_;
};

}  // namespace tipfs
