// The speculating child: what a process becomes right after libtipspec forks it from the
// program, which does not wait for it. BecomeSpeculativeChild() lowers its priority, records
// its inherited descriptors (offsets and directory positions from the program's FdSnapshot),
// points stdout/stderr at /dev/null, makes inherited shared mappings read-only, attaches to the
// mount, installs the SIGSYS handler and the seccomp sandbox, and returns, so the child goes on
// running the program's own code ahead of the program. No code of the program runs in the
// child before the sandbox is in place.
//
// From then on every system call the sandbox traps lands in the handler in child.cc, which
// emulates it without touching anything the program shares with the child: reads become pread
// at private shadow offsets and are logged and hinted; directory reads use private re-opens;
// lseek, fcntl(F_SETFL) and flock change only the child's view; writes are swallowed; opens are
// read-only. Anything else ends the child. Single-threaded by construction (only the forking
// thread exists in the child); everything here is async-signal-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "speculate/fd_snapshot.h"
#include "speculate/mount_watch.h"
#include "speculate/read_site.h"
#include "speculate/seccomp_filter.h"
#include "speculate/shared_log.h"

namespace tipfs::spec {

struct ChildConfig {
  const MountWatch* watch;
  const HintSink* sink;
  const SandboxFilter* filter;
  const FdSnapshot* snapshot;  // taken by the program right before the fork
  SharedLog* log;
  uint64_t log_mapping_bytes;
  uint64_t stream;  // the program's tgid: the hint stream the child speaks for
  uint32_t epoch;
  WaitPolicy wait;
  bool predict;                // SpecOptions::predict
  const ObjectTable* objects;  // refreshed by the program right before the fork
  const CriticalSites* sites;  // the program's learned sites at the fork
  pid_t parent_pid;
  // Learned sites where a predicted read (ReadPredictor) sent a child astray in this run: reads
  // there wait instead.
  const CriticalSites* unpredictable;
  // Learned sites where a whole file predicted there sent a child astray in this run (a program
  // that checks what it read against the file's size): reads there get padded predictions.
  const CriticalSites* not_whole;
};

// REQUIRES: called in the child, right after the fork, by the only thread. Returns when the
// child is sandboxed and should run ahead; on any failure it records why in the log and exits.
void BecomeSpeculativeChild(const ChildConfig& config);

// True in a speculating child (after BecomeSpeculativeChild started).
bool InSpeculativeChild();

}  // namespace tipfs::spec
