// The explicit API (include/tipfs/spec.h) and the preloaded library's start and end: the
// constructor starts speculation when `tipfs run` asked for it (TIPSPEC_AUTOSTART=1 or
// TIPSPEC_MOUNT set); the destructor ends the child and prints the counters if asked.
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "speculate/child.h"
#include "speculate/speculator.h"
#include "tipfs/spec.h"

#define TIPSPEC_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using tipfs::spec::SpecOptions;
using tipfs::spec::Speculator;

void AfterForkInChild() { Speculator::Instance().AfterForkInChild(); }

int StartWith(const SpecOptions& options) {
  tipfs::Status status = Speculator::Instance().Start(options);
  if (!status.ok()) return -status.error();
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, [] { pthread_atfork(nullptr, nullptr, AfterForkInChild); });
  return 0;
}

void Complain(const tipfs::Status& status) {
  // Only when the user asked for speculation: say once why it is off, then run the program as is.
  fprintf(stderr, "libtipspec: speculation off: %s\n", status.ToString().c_str());
}

__attribute__((constructor)) void StartFromEnvironment() {
  const char* autostart = getenv("TIPSPEC_AUTOSTART");
  const char* mount = getenv("TIPSPEC_MOUNT");
  bool wanted = (autostart != nullptr && strcmp(autostart, "1") == 0) ||
                (mount != nullptr && mount[0] != '\0');
  if (!wanted) return;
  tipfs::Result<SpecOptions> options = tipfs::spec::OptionsFromEnvironment(getenv);
  if (!options.ok()) {
    Complain(options.status());
    return;
  }
  int rc = StartWith(*options);
  // No tipfs mount at all is not worth a message: there is nothing to speed up.
  if (rc != 0 && !(rc == -ENODEV && options->mount.empty())) {
    Complain(tipfs::Status::FromErrno(-rc, "start"));
  }
}

__attribute__((destructor)) void EndAtExit() {
  if (tipfs::spec::InSpeculativeChild()) return;
  Speculator& speculator = Speculator::Instance();
  if (!speculator.active()) return;
  speculator.Stop();
  speculator.PrintStatsIfAsked();
}

}  // namespace

TIPSPEC_EXPORT void tipspec_options_init(struct tipspec_options* options) {
  SpecOptions defaults;
  memset(options, 0, sizeof(*options));
  options->version = TIPSPEC_API_VERSION;
  options->wait_for_data = TIPSPEC_WAIT_LEARNED;
  options->max_ahead_hints = defaults.max_ahead_hints;
  options->max_ahead_bytes = defaults.max_ahead_bytes;
  options->stall_usec = defaults.stall_usec;
  options->max_behind_reads = defaults.max_behind_reads;
  options->overhead_permille = static_cast<uint32_t>(defaults.max_overhead_percent * 10 + 0.5);
}

TIPSPEC_EXPORT int tipspec_start(const struct tipspec_options* options) {
  if (options == nullptr) {
    tipfs::Result<SpecOptions> from_env = tipfs::spec::OptionsFromEnvironment(getenv);
    if (!from_env.ok()) return -from_env.error();
    return StartWith(*from_env);
  }
  // Version 2 changed only the counters (tipspec_query_counters); the options are version 1's.
  if (options->version != 1 && options->version != TIPSPEC_API_VERSION) return -EPROTO;
  SpecOptions converted;
  converted.mount = options->mount != nullptr ? options->mount : "";
  switch (options->wait_for_data) {
    case TIPSPEC_WAIT_NEVER:
      converted.wait = tipfs::spec::WaitPolicy::kNever;
      break;
    case TIPSPEC_WAIT_ALWAYS:
      converted.wait = tipfs::spec::WaitPolicy::kAlways;
      break;
    case TIPSPEC_WAIT_LEARNED:
      converted.wait = tipfs::spec::WaitPolicy::kLearned;
      break;
    default:
      return -EINVAL;
  }
  converted.max_ahead_hints = options->max_ahead_hints != 0 ? options->max_ahead_hints : 1;
  converted.max_ahead_bytes = options->max_ahead_bytes;
  converted.stall_usec = options->stall_usec;
  converted.lockstep = options->lockstep != 0;
  converted.print_stats = options->print_stats != 0;
  converted.hint_log = options->hint_log != nullptr ? options->hint_log : "";
  converted.stats_file = options->stats_file != nullptr ? options->stats_file : "";
  if (options->max_behind_reads != 0) converted.max_behind_reads = options->max_behind_reads;
  if (options->overhead_permille == UINT32_MAX) {
    converted.max_overhead_percent = 0;  // no limit
  } else if (options->overhead_permille != 0) {
    converted.max_overhead_percent = options->overhead_permille / 10.0;
  }
  return StartWith(converted);
}

TIPSPEC_EXPORT int tipspec_stop(void) {
  Speculator& speculator = Speculator::Instance();
  if (!speculator.active()) return -EALREADY;
  speculator.Stop();
  return 0;
}

TIPSPEC_EXPORT int tipspec_query_counters(struct tipspec_counters* counters, size_t size) {
  if (counters == nullptr) return -EINVAL;
  struct tipspec_counters all;
  Speculator::Instance().Query(&all);
  memcpy(counters, &all, size < sizeof(all) ? size : sizeof(all));
  return 0;
}

// A program built against version 1 passes a struct that ends at reserved[3].
TIPSPEC_EXPORT int tipspec_query(struct tipspec_counters* counters) {
  return tipspec_query_counters(counters, offsetof(struct tipspec_counters, hints_clean));
}
