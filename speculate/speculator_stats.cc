// The Speculator's counters: tipspec_query's struct, and the text block it writes at exit or exec
// (TIPSPEC_STATS, TIPSPEC_STATS_FILE: one block per process, appended; `tipfs run` sums the blocks
// of the whole process tree). hints_consumed is the mount's count of this process's consumed
// hinted blocks, so it agrees with `tipfs stats`; reads_on_track is what the program's own
// on-track check saw.
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <string>

#include "speculate/child.h"
#include "speculate/speculator.h"
#include "tipfs/hint.h"

namespace tipfs::spec {

void Speculator::QueryMount(tipspec_counters* out) const {
  uint64_t consumed[5];
  if (!sink_.QueryConsumed(stream_, consumed)) {
    out->hints_consumed = out->reads_on_track;  // log mode: no mount to ask
    return;
  }
  out->mount_consumed_clean = consumed[TIPFS_SOURCE_SPECULATIVE];
  out->mount_consumed_tainted = consumed[TIPFS_SOURCE_SPECULATIVE_TAINTED];
  out->hints_consumed = out->mount_consumed_clean + out->mount_consumed_tainted;
  out->mount_consumed_history = consumed[TIPFS_SOURCE_HISTORY];
}

void Speculator::Query(tipspec_counters* out) {
  {
    Locked lock(&mu_);
    RecordPendingRead();  // the last read counts in history_recorded
    *out = counters_;
    if (child_pid_ > 0) {  // include the running child's work so far
      const uint64_t appended = log_->appended.load();
      const uint64_t tainted = log_->tainted_appended.load();
      out->hints_issued += appended;
      out->hints_clean += appended - tainted;
      out->hints_tainted += tainted;
      out->waits_at_sites += log_->waits_at_sites.load();
      out->reads_predicted += log_->reads_predicted.load();
      out->reads_predicted_whole += log_->reads_predicted_whole.load();
      out->hint_bytes_issued += log_->bytes_appended.load();
      out->hint_bytes_consumed += log_->bytes_consumed.load();
      out->reads_without_data += log_->reads_without_data.load();
    }
    out->epoch = epoch_;
    out->active = active() ? 1 : 0;
    out->forks_deferred_backoff = policy_.deferred_backoff();
    out->forks_deferred_break_even = policy_.deferred_break_even();
    out->forks_deferred_budget = policy_.deferred_budget();
    out->forks_deferred_no_log = forks_without_slot_;
    out->forks_deferred = out->forks_deferred_backoff + out->forks_deferred_break_even +
                          out->forks_deferred_budget + out->forks_deferred_no_log;
    out->overhead_nanos = static_cast<uint64_t>(policy_.overhead_nanos());
    out->saved_nanos = static_cast<uint64_t>(policy_.saved_nanos());
    out->children_paid = policy_.children_paid();
    out->children_lost = policy_.children_lost();
    out->child_cpu_nanos = static_cast<uint64_t>(child_cpu_nanos_);
    out->children_waiting = children_waiting_;
    out->sites_known = sites_known_;
    out->sites_learned = sites_learned_;
    const HistoryCounters& history = replay_.counters();
    out->history_hints = history.hints;
    out->history_hint_bytes = history.hint_bytes;
    out->history_cancelled = history.cancelled;
    out->history_files_changed = history.files_changed;
    out->history_recorded = recorder_.reads();
  }
  QueryMount(out);  // ioctls: not under the lock
}

void Speculator::PrintStatsIfAsked() {
  if (!options_.print_stats || InSpeculativeChild()) return;
  tipspec_counters c;
  Query(&c);
  const std::pair<const char*, uint64_t> fields[] = {
      {"reads_checked", c.reads_checked},
      {"hints_issued", c.hints_issued},
      {"hints_clean", c.hints_clean},
      {"hints_tainted", c.hints_tainted},
      {"hint_bytes_issued", c.hint_bytes_issued},
      {"hints_consumed", c.hints_consumed},
      {"mount_consumed_clean", c.mount_consumed_clean},
      {"mount_consumed_tainted", c.mount_consumed_tainted},
      {"reads_on_track", c.reads_on_track},
      {"reads_without_data", c.reads_without_data},
      {"forks", c.forks},
      {"forks_at_once", c.forks_at_once},
      {"restarts", c.restarts},
      {"offtrack_mismatch", c.offtrack_mismatch},
      {"offtrack_behind", c.offtrack_behind},
      {"child_ended_program_exit", c.child_ended_program_exit},
      {"child_ended_forbidden", c.child_ended_forbidden},
      {"child_ended_stream_read", c.child_ended_stream_read},
      {"child_ended_shared_write", c.child_ended_shared_write},
      {"child_ended_signal", c.child_ended_signal},
      {"child_killed_by_sandbox", c.child_killed_by_sandbox},
      {"child_died_by_signal", c.child_died_by_signal},
      {"start_failures", c.start_failures},
      {"last_forbidden_syscall", c.last_forbidden_syscall},
      {"epoch", c.epoch},
      {"hint_bytes_consumed", c.hint_bytes_consumed},
      {"reads_behind", c.reads_behind},
      {"forks_deferred", c.forks_deferred},
      {"overhead_nanos", c.overhead_nanos},
      {"children_waiting", c.children_waiting},
      {"sites_known", c.sites_known},
      {"sites_learned", c.sites_learned},
      {"waits_at_sites", c.waits_at_sites},
      {"reads_predicted", c.reads_predicted},
      {"sites_unpredictable", c.sites_unpredictable},
      {"reads_predicted_whole", c.reads_predicted_whole},
      {"sites_not_whole", c.sites_not_whole},
      {"history_hints", c.history_hints},
      {"history_hint_bytes", c.history_hint_bytes},
      {"history_cancelled", c.history_cancelled},
      {"history_files_changed", c.history_files_changed},
      {"history_recorded", c.history_recorded},
      {"mount_consumed_history", c.mount_consumed_history},
      {"children_paid", c.children_paid},
      {"children_lost", c.children_lost},
      {"saved_nanos", c.saved_nanos},
      {"child_cpu_nanos", c.child_cpu_nanos},
      {"forks_deferred_backoff", c.forks_deferred_backoff},
      {"forks_deferred_break_even", c.forks_deferred_break_even},
      {"forks_deferred_budget", c.forks_deferred_budget},
      {"forks_deferred_no_log", c.forks_deferred_no_log},
      {"ended_over_budget", c.ended_over_budget},
      {"site_waits_dropped", c.site_waits_dropped},
      {"sites_refuted", c.sites_refuted},
  };
  std::string text = "tipspec.pid " + std::to_string(getpid()) + "\n";
  for (const auto& [name, value] : fields) {
    text += std::string("tipspec.") + name + " " + std::to_string(value) + "\n";
  }
  int fd = 2;
  if (!options_.stats_file.empty()) {
    fd = open(options_.stats_file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
  }
  // One write: the blocks of processes ending at once do not interleave.
  ssize_t ignored = write(fd, text.data(), text.size());
  (void)ignored;
  if (fd != 2) close(fd);
}

}  // namespace tipfs::spec
