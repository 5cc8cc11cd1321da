// `tipfs run`: runs an unmodified program with automatic hints from speculative execution
// (libtipspec preloaded; see libtipspec(3)).
#include <cstdio>

#include "cli/commands.h"
#include "cli/mount_table.h"
#include "speculate/launcher.h"

namespace tipfs::cli {
namespace {

struct RunArgs {
  std::string mount;
  std::string wait;  // "", "on", "off"
  bool stats = false;
  std::string stats_file;
  std::vector<std::string> command;
};

int RunRun(const RunArgs& args) {
  if (args.command.empty()) {
    return Fail("run", Status::InvalidArgument("no command given (tipfs run -- CMD [ARG...])"));
  }
  spec::RunOptions options;
  if (!args.mount.empty()) {
    std::optional<TipfsMount> mount = FindTipfsMount(args.mount);
    if (!mount)
      return Fail("run", Status::InvalidArgument(args.mount + " is not a tipfs mount point"));
    options.mount = mount->mountpoint;
  }
  if (!args.wait.empty()) options.wait_for_data = args.wait == "on";
  options.print_stats = args.stats;
  options.stats_file = args.stats_file;
  Result<int> status = spec::RunUnderSpeculation(options, args.command);
  if (!status.ok()) return Fail("run", status.status());
  return *status;
}

}  // namespace

Runner AddRunCommand(CLI::App* app) {
  auto args = std::make_shared<RunArgs>();
  app->add_option("--mount", args->mount,
                  "Speculate on this tipfs mount only (default: every one)");
  app->add_option("--wait-for-data", args->wait,
                  "on: the speculating copy waits for data it hinted (follows data dependencies); "
                  "off: it runs on without it")
      ->check(CLI::IsMember({"on", "off"}));
  app->add_flag("--stats", args->stats, "Print speculation counters when the command ends");
  app->add_option("--stats-file", args->stats_file, "Write the counters to FILE instead");
  app->add_option("COMMAND", args->command, "The command and its arguments (after --)")->required();
  app->prefix_command();
  return [args] { return RunRun(*args); };
}

}  // namespace tipfs::cli
