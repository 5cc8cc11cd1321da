// SiteWaitJudge: whether the learned read sites (read_site.h) still earn their keep in this run.
// A wait at a learned site pays only when the child has other work to overlap with it: a program
// with one read site (GNU grep -r) whose site was learned has every child wait at every read, one
// read ahead of the program at most, and speculation wins nothing. Pure decision logic on what
// the caller reports of each ended child (no clock, no system calls), so unit tests drive it.
//  - A child given the sites whose waits there were most of its logged reads (more than half)
//    and that lost (ForkPolicy) adds to a streak; one given the sites that paid ends the streak.
//    After kDropAfter such losses in a row (none paid in between) the waits are dropped: later
//    children of this run get no sites.
//  - Once dropped, the first child without the waits that pays refutes the sites: the program
//    forgets them (and the caller keeps them from being learned again). Children without the
//    waits that lose change nothing (the waits stay dropped for the run).
// Not thread-safe: the Speculator calls it under its lock.
#pragma once

#include <cstdint>

namespace tipfs::spec {

class SiteWaitJudge {
 public:
  static constexpr uint32_t kDropAfter = 2;

  // Later children get the learned sites.
  bool GiveSites() const { return !dropped_; }
  // A child ended: `given_sites` it was forked with the learned sites, `logged_reads` it logged,
  // `waits` of them waited at a learned site, and the policy judged it `paid` (or lost).
  void ChildJudged(bool given_sites, uint64_t logged_reads, uint64_t waits, bool paid);

  bool dropped() const { return dropped_; }
  bool refuted() const { return refuted_; }
  uint32_t losses_in_a_row() const { return losses_in_a_row_; }

 private:
  uint32_t losses_in_a_row_ = 0;
  bool dropped_ = false;
  bool refuted_ = false;
};

}  // namespace tipfs::spec
