// `tipfs fsck [--repair] DISK`: checks an unmounted volume and, with --repair, fixes what it
// safely can. One line per problem on stdout ("[kind] what; what was done"), a summary at the
// end; exit codes as e2fsck's
// (0 clean, 1 repaired, 4 problems left, 8 operational error). See fsck/fsck.h.
#include <unistd.h>

#include <cstdio>

#include "cli/commands.h"
#include "fsck/fsck.h"
#include "fusefs/daemon.h"
#include "stripe/volume.h"

namespace tipfs::cli {
namespace {

struct FsckArgs {
  std::string disk;
  bool repair = false;
};

int RunFsck(const FsckArgs& args) {
  fsck::FsckOptions options;
  options.disk = args.disk;
  // A daemon that did not exit cleanly leaves its pid file in the metadata directory.
  if (Result<stripe::Label> label = stripe::IdentifyVolume(args.disk); label.ok()) {
    options.after_unclean_shutdown =
        access(fusefs::PidFilePath(stripe::HomeDir(*label)).c_str(), F_OK) == 0;
  }
  options.check.repair = args.repair;
  options.check.report = [](const fsck::Problem& problem) {
    std::printf("[%s] %s\n", fsck::ProblemKindName(problem.kind), problem.Line().c_str());
    std::fflush(stdout);
  };
  fsck::CheckResult result = fsck::RunFsck(options);
  if (!result.error.ok()) {
    std::fprintf(stderr, "tipfs fsck: %s\n", result.error.ToString().c_str());
    return result.ExitCode();
  }
  std::printf("tipfs fsck: %llu inodes, %llu entries, %llu objects; ",
              static_cast<unsigned long long>(result.inodes),
              static_cast<unsigned long long>(result.entries),
              static_cast<unsigned long long>(result.objects));
  if (result.problems.empty()) {
    std::printf("clean\n");
  } else {
    std::printf("%zu problems, %zu repaired, %zu left%s\n", result.problems.size(),
                result.repaired(), result.left(),
                !args.repair && result.left() > 0 ? " (run with --repair to fix them)" : "");
  }
  return result.ExitCode();
}

}  // namespace

Runner AddFsckCommand(CLI::App* app) {
  auto args = std::make_shared<FsckArgs>();
  app->add_flag("--repair", args->repair,
                "Fix what can be fixed safely (leaked and over-long objects, link counts, orphans, "
                "unreachable inodes to /lost+found) and say what was done");
  app->add_option("DISK", args->disk, "Any disk of an unmounted volume, or its metadata directory")
      ->required();
  return [args] { return RunFsck(*args); };
}

}  // namespace tipfs::cli
