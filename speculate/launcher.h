// Running a command under speculation: what `tipfs run [--mount M] -- CMD [ARG...]` does.
// Sets LD_PRELOAD to libtipspec.so (prepended to any LD_PRELOAD already set), the mount to
// watch (TIPSPEC_MOUNT) and the knobs (TIPSPEC_*; see libtipspec(3)), then runs the command.
// Thread-safety: RunUnderSpeculation forks and waits; call it from one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "speculate/options.h"
#include "util/status.h"

namespace tipfs::spec {

struct RunOptions {
  // The mount to speculate on; empty: every tipfs mount (TIPSPEC_MOUNT unset).
  std::string mount;
  // False: run the program as it is, without libtipspec (a baseline with the same waiting for
  // the whole process tree and the same exit statuses).
  bool speculate = true;
  // libtipspec.so to preload; empty: FindSpeculationLibrary().
  std::string library_path;
  // Unset: keep the library's defaults (or the caller's TIPSPEC_* environment).
  std::optional<WaitPolicy> wait;           // TIPSPEC_WAIT
  std::optional<uint32_t> max_ahead_hints;  // TIPSPEC_MAX_AHEAD_HINTS
  std::optional<uint64_t> max_ahead_bytes;  // TIPSPEC_MAX_AHEAD_BYTES
  std::optional<uint32_t> stall_usec;       // TIPSPEC_STALL_USEC
  std::optional<bool> history;              // TIPSPEC_HISTORY
  std::optional<bool> predict;              // TIPSPEC_PREDICT
  bool print_stats = false;                 // TIPSPEC_STATS=1
  std::string stats_file;                   // TIPSPEC_STATS_FILE
  std::string hint_log;                     // TIPSPEC_HINT_LOG (tests)
  bool lockstep = false;                    // TIPSPEC_LOCKSTEP=1 (tests)
  // Run the tree in a CPU group of its own where cgroups allow it (speculate/cpu_group.h);
  // with print_stats, a line on stderr says why not where they don't.
  bool cpu_group = true;
};

// The library to preload: $TIPSPEC_LIBRARY, else <dir of this executable>/../lib/libtipspec.so,
// else the build tree's, else the installed one. ENOENT names every place tried.
Result<std::string> FindSpeculationLibrary();

// The environment for the command: `base` (NAME=VALUE strings) with the variables set.
Result<std::vector<std::string>> SpeculationEnvironment(const RunOptions& options,
                                                        const std::vector<std::string>& base);

// Runs argv (argv[0] looked up in PATH) under speculation and waits until it and every process
// it started (its speculating children, anything it left running) are gone: the calling process
// is a child subreaper meanwhile (PR_SET_CHILD_SUBREAPER; it reaps any child it has). Returns the
// program's exit status: the exit code, or 128 + signal number when a signal ended it, which is
// also stored in *killed_by (0 otherwise). A command that cannot be run is an error worded as a
// shell words it: ENOENT "CMD: command not found", EACCES / ENOEXEC "CMD: Permission denied"...
// Signals sent to the caller by another process (SIGTERM from timeout(1), SIGHUP, SIGINT,
// SIGQUIT, SIGUSR1/2, SIGWINCH, SIGALRM) are passed on to the program; the terminal's own
// signals reach it directly. With print_stats and no stats_file, the counters of every process
// of the tree are summed and printed on stderr once, after the last one ends.
Result<int> RunUnderSpeculation(const RunOptions& options, const std::vector<std::string>& argv,
                                int* killed_by = nullptr);

// Replaces the calling process with argv under speculation (returns only on failure).
Status ExecUnderSpeculation(const RunOptions& options, const std::vector<std::string>& argv);

}  // namespace tipfs::spec
