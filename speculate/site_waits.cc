#include "speculate/site_waits.h"

namespace tipfs::spec {

void SiteWaitJudge::ChildJudged(bool given_sites, uint64_t logged_reads, uint64_t waits,
                                bool paid) {
  if (!given_sites) {
    if (dropped_ && paid) refuted_ = true;
    return;
  }
  if (dropped_) return;  // forked before the drop: judged by what came after it
  if (paid) {
    losses_in_a_row_ = 0;
    return;
  }
  if (logged_reads == 0 || waits * 2 <= logged_reads) return;  // the waits were not its reads
  if (++losses_in_a_row_ >= kDropAfter) dropped_ = true;
}

}  // namespace tipfs::spec
