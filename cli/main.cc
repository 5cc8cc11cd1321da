// tipfs: the command-line front end. See man/tipfs.8.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace {

// mount(8) runs `mount.fuse3 DISK MOUNTPOINT -o OPTIONS -t fuse.tipfs` for an fstab line of type
// fuse.tipfs, and mount.fuse3 runs `tipfs DISK MOUNTPOINT -o OPTIONS`. Invoked as a mount helper
// itself (a mount.fuse.tipfs link) it also gets -n, -v, -s, -r, -w, -f or -t. Recognized when
// the first two arguments are not options and the first is no subcommand but a path.
bool IsMountHelperCall(int argc, char** argv, const std::map<std::string, CLI::App*>& commands) {
  if (argc < 3 || argv[1][0] == '-' || argv[2][0] == '-') return false;
  if (commands.count(argv[1]) != 0) return false;
  struct stat st;
  return std::strchr(argv[1], '/') != nullptr || stat(argv[1], &st) == 0;
}

// The same request as `tipfs mount -o ... DISK MOUNTPOINT`.
std::vector<std::string> MountHelperArguments(int argc, char** argv, bool* fake) {
  std::vector<std::string> args = {argv[0], "mount"};
  std::vector<std::string> positionals = {argv[1], argv[2]};
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "-o" || arg == "-t") && i + 1 < argc) {
      if (arg == "-o") args.insert(args.end(), {"-o", argv[i + 1]});
      ++i;  // -t fuse.tipfs: we know
    } else if (arg == "-r") {
      args.insert(args.end(), {"-o", "ro"});
    } else if (arg == "-f") {
      *fake = true;  // mount -f: do everything but the mount
    } else if (arg == "-n" || arg == "-v" || arg == "-s" || arg == "-w") {
      // no mtab to write; verbose, sloppy and read-write change nothing here
    } else {
      args.push_back(arg);
    }
  }
  args.insert(args.end(), positionals.begin(), positionals.end());
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tipfs stripes files over several disks and prefetches what programs are about to "
      "read, from hints they give or that a speculating copy of them finds."};
  app.require_subcommand(0, 1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", "tipfs " TIPFS_VERSION);

  std::map<CLI::App*, tipfs::cli::Runner> runners;
  std::map<std::string, CLI::App*> commands;
  auto add = [&](const char* name, const char* description, auto adder) {
    CLI::App* sub = app.add_subcommand(name, description);
    runners[sub] = adder(sub);
    commands[name] = sub;
  };
  add("mkfs", "Create a volume over one or more directories", tipfs::cli::AddMkfsCommand);
  add("mount", "Mount a volume", tipfs::cli::AddMountCommand);
  add("umount", "Unmount a volume and wait until it is durable", tipfs::cli::AddUmountCommand);
  add("stats", "Show a mounted volume's counters, rates, hint streams or a timeline",
      tipfs::cli::AddStatsCommand);
  add("hint", "Disclose files that will be read (cache warm-up)", tipfs::cli::AddHintCommand);
  add("run", "Run a program with automatic hints from speculative execution",
      tipfs::cli::AddRunCommand);
  add("fsck", "Check an unmounted volume and repair it (--repair)", tipfs::cli::AddFsckCommand);
  tipfs::cli::UseTipfsHelp(&app);

  std::vector<std::string> helper_args;
  bool fake = false;
  if (IsMountHelperCall(argc, argv, commands)) {
    helper_args = MountHelperArguments(argc, argv, &fake);
  } else if (argc >= 2 && argv[1][0] != '-' && commands.count(argv[1]) == 0) {
    std::string names;
    for (const auto& [name, sub] : commands) names += (names.empty() ? "" : ", ") + name;
    std::fprintf(stderr, "tipfs: unknown command '%s' (commands: %s; see tipfs --help)\n", argv[1],
                 names.c_str());
    return tipfs::cli::kUsageError;
  }
  std::vector<char*> helper_argv;
  for (std::string& a : helper_args) helper_argv.push_back(a.data());

  try {
    if (helper_argv.empty()) {
      app.parse(argc, argv);
    } else {
      app.parse(static_cast<int>(helper_argv.size()), helper_argv.data());
    }
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line naming the problem and the subcommand it is about.
    std::vector<CLI::App*> parsed = app.get_subcommands();
    const std::string command = parsed.empty() ? "" : " " + parsed.front()->get_name();
    std::fprintf(stderr, "tipfs%s: %s (see tipfs%s --help)\n", command.c_str(), e.what(),
                 command.c_str());
    return tipfs::cli::kUsageError;
  }
  if (fake) return 0;
  for (CLI::App* sub : app.get_subcommands()) return runners[sub]();
  std::fprintf(stderr,
               "tipfs: a command is needed (mkfs, mount, umount, stats, hint, run, fsck; "
               "see tipfs --help)\n");
  return tipfs::cli::kUsageError;
}
