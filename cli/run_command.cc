// `tipfs run`: runs an unmodified program with automatic hints from speculative execution
// (libtipspec preloaded; see libtipspec(3)), and ends as the program ended: its exit code, or
// the signal that killed it.
#include <signal.h>
#include <sys/resource.h>

#include <cinttypes>
#include <cstdio>
#include <ctime>

#include "cli/commands.h"
#include "cli/mount_table.h"
#include "speculate/history_file.h"
#include "speculate/launcher.h"
#include "speculate/state_dir.h"
#include "util/units.h"

namespace tipfs::cli {
namespace {

struct RunArgs {
  std::string mount;
  std::string wait;  // "", "on", "off"
  bool stats = false;
  bool no_speculation = false;
  std::string stats_file;
  std::string timeline;  // SVG file
  std::string history;   // "", "on", "off"
  std::string predict;   // "", "on", "off"
  std::string cpu_group = "on";
  bool history_list = false;
  bool history_clear = false;
  bool sites_clear = false;
  std::vector<std::string> command;
};

// The tipfs mount a timeline is recorded on: --mount, else the only one there is.
Result<std::string> TimelineMount(const std::string& named) {
  if (!named.empty()) return named;
  std::vector<TipfsMount> mounts = AllTipfsMounts();
  if (mounts.size() == 1) return mounts[0].mountpoint;
  return Status::InvalidArgument(mounts.empty()
                                     ? "--timeline: no tipfs mount to record"
                                     : "--timeline: several tipfs mounts; name one with --mount");
}

// Ends this process by the signal that ended the program, so that whoever waits for `tipfs run`
// (a shell, make) sees what it would have seen of the program itself.
int DieBy(int sig, int fallback_status) {
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // the program dumped its own core, if any
  signal(sig, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  sigprocmask(SIG_UNBLOCK, &only, nullptr);
  raise(sig);
  return fallback_status;  // a signal whose default is not to terminate
}

std::string ShellWords(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& word : argv) {
    if (!out.empty()) out += ' ';
    if (!word.empty() && word.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;#~") == std::string::npos) {
      out += word;
      continue;
    }
    out += '\'';
    for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

// --history-list: one line per recording, oldest first (the first to go past the limit).
int ListHistory() {
  Result<std::vector<spec::RecordingEntry>> entries = spec::ListRecordings();
  if (!entries.ok()) return Fail("run", entries.status());
  for (const spec::RecordingEntry& e : *entries) {
    char when[32] = "?";
    time_t saved = static_cast<time_t>(e.saved_seconds);
    struct tm local;
    if (localtime_r(&saved, &local) != nullptr) strftime(when, sizeof(when), "%F %T", &local);
    if (!e.problem.empty()) {
      std::printf("%s  %s  not a recording: %s\n", e.name.c_str(), when, e.problem.c_str());
      continue;
    }
    std::printf("%s  %s  %zu reads of %zu files, %s, %" PRIu64 " bytes on disk  in %s: %s\n",
                e.name.c_str(), when, e.recording.reads.size(), e.recording.files.size(),
                FormatSize(e.recording.bytes()).c_str(), e.file_bytes, e.recording.cwd.c_str(),
                ShellWords(e.recording.argv).c_str());
  }
  return 0;
}

int ClearHistory() {
  Result<size_t> removed = spec::ClearRecordings();
  if (!removed.ok()) return Fail("run", removed.status());
  std::printf("removed %zu recording%s\n", *removed, *removed == 1 ? "" : "s");
  return 0;
}

// --sites-clear: every program starts learning its data-critical read sites afresh.
int ClearSites() {
  Result<size_t> removed = spec::ClearSiteFiles();
  if (!removed.ok()) return Fail("run", removed.status());
  std::printf("removed %zu site file%s\n", *removed, *removed == 1 ? "" : "s");
  return 0;
}

int RunRun(const RunArgs& args) {
  const int state_actions =
      int(args.history_list) + int(args.history_clear) + int(args.sites_clear);
  if (state_actions > 0) {
    const char* action = args.history_list    ? "--history-list"
                         : args.history_clear ? "--history-clear"
                                              : "--sites-clear";
    if (!args.command.empty()) return Usage("run", std::string(action) + " takes no command");
    if (state_actions > 1) {
      return Usage("run", "--history-list, --history-clear and --sites-clear: one at a time");
    }
    if (args.sites_clear) return ClearSites();
    return args.history_list ? ListHistory() : ClearHistory();
  }
  if (args.command.empty())
    return Usage("run", "no command given (tipfs run [OPTIONS] -- CMD [ARG...])");
  spec::RunOptions options;
  if (!args.mount.empty()) {
    std::optional<TipfsMount> mount = FindTipfsMount(args.mount);
    if (!mount) return Usage("run", "--mount " + args.mount + ": not a tipfs mount point");
    options.mount = mount->mountpoint;
  }
  if (args.wait == "on") options.wait = spec::WaitPolicy::kAlways;
  if (args.wait == "off") options.wait = spec::WaitPolicy::kNever;
  if (args.wait == "learned") options.wait = spec::WaitPolicy::kLearned;
  options.speculate = !args.no_speculation;
  if (!args.history.empty()) options.history = args.history == "on";
  if (!args.predict.empty()) options.predict = args.predict == "on";
  if (args.no_speculation && args.stats) {
    return Usage("run", "--stats counts speculation, which --no-speculation turns off");
  }
  options.print_stats = args.stats;
  options.cpu_group = args.cpu_group == "on";
  options.stats_file = args.stats_file;
  std::string timeline_mount;
  if (!args.timeline.empty()) {
    Result<std::string> mount = TimelineMount(options.mount);
    if (!mount.ok()) return Usage("run", mount.status().message());
    timeline_mount = *mount;
    Status st = CheckTimelinePath(args.timeline);
    if (!st.ok()) return Fail("run", st);
    st = StartTimeline(timeline_mount);
    if (!st.ok()) return Fail("run", st);
  }
  const int64_t started = MonotonicNanos();
  int killed_by = 0;
  Result<int> status = spec::RunUnderSpeculation(options, args.command, &killed_by);
  if (!timeline_mount.empty()) {
    std::string title = "tipfs run --";
    for (const std::string& word : args.command) title += " " + word;
    Result<std::string> described =
        FinishTimeline(timeline_mount, started, MonotonicNanos(), args.timeline, title);
    if (described.ok()) {
      std::fprintf(stderr, "tipfs run: timeline %s: %s\n", args.timeline.c_str(),
                   described->c_str());
    } else {
      std::fprintf(stderr, "tipfs run: timeline: %s\n", described.status().ToString().c_str());
    }
  }
  if (!status.ok()) {
    // As a shell reports it: 127 when the command is not found, 126 when it cannot be run.
    std::fprintf(stderr, "tipfs run: %s\n", status.status().message().c_str());
    if (status.error() == ENOENT) return 127;
    if (status.error() == EACCES || status.error() == ENOEXEC || status.error() == ENOTDIR) {
      return 126;
    }
    return 1;
  }
  if (killed_by != 0) return DieBy(killed_by, *status);
  return *status;
}

}  // namespace

Runner AddRunCommand(CLI::App* app) {
  auto args = std::make_shared<RunArgs>();
  app->add_option("--mount", args->mount, "Speculate on this tipfs mount only (default: every one)")
      ->option_text("MOUNTPOINT");
  app->add_option("--wait-for-data", args->wait,
                  "learned (default): the speculating copy waits for data it hinted only where "
                  "garbage sent earlier copies astray; on: always (follows every data "
                  "dependency); off: never")
      ->option_text("learned|on|off")
      ->check(OneOf({"learned", "on", "off"}));
  app->add_flag("--stats", args->stats,
                "When the program and every process it started have ended, print the "
                "speculation counters of them all, summed");
  app->add_option("--stats-file", args->stats_file,
                  "Append each process's counters to FILE instead")
      ->option_text("FILE");
  app->add_flag("--no-speculation", args->no_speculation,
                "Run the program as it is (a baseline: same timeline, waiting and exit status)");
  app->add_option("--timeline", args->timeline,
                  "Draw the run as an SVG picture: each disk's requests over time by purpose, "
                  "and the program's stalls")
      ->option_text("FILE.svg");
  app->add_option("--predict", args->predict,
                  "on (default): where the speculating copy learned to wait for data, it goes on "
                  "with bytes an earlier read there returned instead; off: it waits")
      ->option_text("on|off")
      ->check(OneOf({"on", "off"}));
  app->add_option("--history", args->history,
                  "on (default): record the program's reads of the mount and hint the last run's "
                  "reads of the same command ahead of it; off: neither")
      ->option_text("on|off")
      ->check(OneOf({"on", "off"}));
  app->add_option("--cpu-group", args->cpu_group,
                  "on (default): run the program and its speculating copies in a CPU group of "
                  "their own where cgroups allow (root), so the copy gets the program's share "
                  "of the CPU while the program waits, even on a busy machine; off: no group")
      ->option_text("on|off")
      ->check(OneOf({"on", "off"}));
  app->add_flag("--history-list", args->history_list,
                "List the recorded commands (in the state directory) and exit");
  app->add_flag("--history-clear", args->history_clear, "Remove every recording and exit");
  app->add_flag("--sites-clear", args->sites_clear,
                "Forget the read sites learned to be data-critical (and those refuted), for every "
                "program, and exit");
  app->add_option("COMMAND", args->command, "The command and its arguments (after --)");
  app->prefix_command();
  return [args] { return RunRun(*args); };
}

}  // namespace tipfs::cli
