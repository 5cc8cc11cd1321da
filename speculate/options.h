// SpecOptions: the knobs of libtipspec, read from the environment (TIPSPEC_*) by the preloaded
// library, or filled by a program through tipspec_start(). A plain struct; each field says its
// default and its variable. Constant once speculation has started.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "util/status.h"

namespace tipfs::spec {

// Which of the child's reads of data not cached wait for it (TIPSPEC_WAIT). Every child waits at
// the read it was forked at: the program is fetching those bytes anyway.
enum class WaitPolicy : uint8_t {
  kNever,    // 0: SpecHint's way, on with whatever the buffer holds
  kAlways,   // 1: follow every true data dependency, one read at a time
  kLearned,  // learned (the default): wait at the read sites learned to be data-critical
};

struct SpecOptions {
  // TIPSPEC_MOUNT: the mount whose files are speculated on. Empty: every mounted tipfs file
  // system (type fuse.tipfs in /proc/self/mountinfo).
  std::string mount;
  // TIPSPEC_WAIT=learned|0|1 (default learned; `auto` is a synonym): which of the child's reads
  // of data not cached wait for it. learned: only reads from call sites where a child that read
  // garbage ended or went off track soon after (data-critical sites, learned in this run and
  // kept per program between runs: site_store.h); 0: none (the child covers more ground, on
  // garbage); 1: all (it follows every true data dependency, one read at a time).
  WaitPolicy wait = WaitPolicy::kLearned;
  // TIPSPEC_PREDICT=0|1 (default 1; with TIPSPEC_WAIT=learned): at a learned site, a child's read
  // of data not cached returns bytes an earlier real read at that site returned, filled to the
  // read's length (read_predictor.h), and the child goes on without waiting; it waits only when
  // none it kept fits. 0: it waits there for the data.
  bool predict = true;
  // TIPSPEC_LEARN=0|1 (default 1): load the sites learned in earlier runs of the program at start
  // and save what this run learned at exit (in the state directory, see state_dir.h). 0: learn
  // for this run only.
  bool learn = true;
  // TIPSPEC_HISTORY=0|1 (default 1): record this run's reads of the mount and, at start, disclose
  // the last run's reads of the same command (executable, arguments, working directory) ahead of
  // the program as hints of source `history` (history.h), at most max_ahead_hints recorded reads
  // and max_ahead_bytes bytes ahead. 0: neither record nor replay.
  bool history = true;
  // TIPSPEC_MAX_TAINTED_BYTES (default 4M, K/M/G suffixes): once a child has read data it did not
  // get, it pauses while this many bytes it logged since are not yet consumed by the program:
  // the mount's tainted budget per process (tipfs(8)), which trims anything beyond it anyway.
  uint64_t max_tainted_bytes = 4ull << 20;
  // TIPSPEC_MAX_AHEAD_HINTS (default 512): the child pauses when this many logged reads are not
  // yet consumed by the program. Clamped to the log capacity.
  uint32_t max_ahead_hints = 512;
  // TIPSPEC_MAX_AHEAD_BYTES (default 32M, K/M/G suffixes): the same bound in bytes.
  uint64_t max_ahead_bytes = 32ull << 20;
  // TIPSPEC_STALL_USEC (default 200): a child is forked (the first one, and a fresh one after
  // speculation ended or went off track) only at a read that follows a read of the mount that
  // took at least this long (a stall worth hiding), so a program whose reads all hit the cache
  // never forks. 0: fork at every read where no child runs.
  uint32_t stall_usec = 200;
  // TIPSPEC_MAX_BEHIND (default 64): a child that has not yet logged the program's read is not
  // off track, only not ahead yet (it may still be starting, or be starved of CPU): the program
  // remembers up to this many reads it did before its child, checks them against what the
  // child logs later, and replaces the child only past that. At least 1.
  uint32_t max_behind_reads = 64;
  // TIPSPEC_MAX_OVERHEAD (percent, default 1; decimals allowed): a child is forked only while
  // what speculation has cost the program (forks, ending children, the copy-on-write faults a
  // fork causes, the children's CPU and reads) stays under this share of its run time. Children
  // that cost more than they saved also back off: after k in a row the next 2^k - 1 chances to fork
  // are skipped (at most 255), and the next fork needs a stall worth the last one's cost per used
  // hint (fork_policy.h). 0: no limit, neither budget nor back-off (tests). Neither applies in
  // lockstep mode.
  double max_overhead_percent = 1.0;
  // TIPSPEC_LOCKSTEP=0|1 (default 0; tests and debugging): when the hint log has fallen behind,
  // the program waits for the child instead of declaring it off track, and a fork waits for a
  // killed child to exit instead of being skipped while every hint log is still held. Makes runs
  // deterministic.
  bool lockstep = false;
  // TIPSPEC_HINT_LOG=PATH (tests): send hints to this file (one line each) instead of ioctls;
  // the mount may then be a plain directory.
  std::string hint_log;
  // TIPSPEC_STATS=1: print the counters to stderr at exit; TIPSPEC_STATS_FILE=PATH: append them
  // to PATH instead.
  bool print_stats = false;
  std::string stats_file;
};

// Reads the TIPSPEC_* variables through `getenv` (injectable for tests). Unset variables keep
// their defaults; a malformed value is an EINVAL Status naming the variable.
Result<SpecOptions> OptionsFromEnvironment(
    const std::function<const char*(const char*)>& getenv_fn);

// "64K" / "32M" / "1G" / "4096" -> bytes.
Result<uint64_t> ParseSize(const std::string& text);

}  // namespace tipfs::spec
