// tipfs: the command-line front end. See man/tipfs.8.
#include <cstdio>
#include <map>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"tipfs: a striped FUSE file system with informed prefetching and caching"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");

  std::map<CLI::App*, tipfs::cli::Runner> runners;
  auto add = [&](const char* name, const char* description, auto adder) {
    CLI::App* sub = app.add_subcommand(name, description);
    runners[sub] = adder(sub);
  };
  add("mkfs", "Create a volume over one or more directories", tipfs::cli::AddMkfsCommand);
  add("mount", "Mount a volume", tipfs::cli::AddMountCommand);
  add("umount", "Unmount a volume and wait until it is durable", tipfs::cli::AddUmountCommand);
  add("stats", "Show a mounted volume's counters", tipfs::cli::AddStatsCommand);
  add("hint", "Disclose files that will be read (cache warm-up)", tipfs::cli::AddHintCommand);
  add("run", "Run a program with automatic hints from speculative execution",
      tipfs::cli::AddRunCommand);
  add("fsck", "Check an unmounted volume and repair it (--repair)", tipfs::cli::AddFsckCommand);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line naming the problem, as every tipfs error is.
    std::fprintf(stderr, "tipfs: %s (see tipfs --help)\n", e.what());
    return 2;
  }
  for (CLI::App* sub : app.get_subcommands()) return runners[sub]();
  return 2;
}
