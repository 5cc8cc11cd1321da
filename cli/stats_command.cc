// `tipfs stats`: prints the counters a mount publishes under `.tipfs/`.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/mount_table.h"

namespace tipfs::cli {
namespace {

struct StatsArgs {
  std::string mountpoint;
  bool json = false;
  bool breakdown = false;
  double watch_seconds = 0;
};

Result<std::string> ReadControlFile(const std::string& mountpoint, const std::string& name) {
  std::string path = mountpoint + "/.tipfs/" + name;
  std::ifstream in(path);
  if (!in) return ErrnoStatus("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int RunStats(const StatsArgs& args) {
  std::optional<TipfsMount> mount = FindTipfsMount(args.mountpoint);
  if (!mount) {
    return Fail("stats", Status::InvalidArgument(args.mountpoint + " is not a tipfs mount point"));
  }
  const char* name = args.json ? (args.breakdown ? "breakdown.json" : "stats.json")
                               : (args.breakdown ? "breakdown" : "stats");
  while (true) {
    Result<std::string> text = ReadControlFile(mount->mountpoint, name);
    if (!text.ok()) return Fail("stats", text.status());
    std::fwrite(text->data(), 1, text->size(), stdout);
    std::fflush(stdout);
    if (args.watch_seconds <= 0) return 0;
    usleep(static_cast<useconds_t>(args.watch_seconds * 1e6));
    if (!args.json) std::printf("\n");
  }
}

}  // namespace

Runner AddStatsCommand(CLI::App* app) {
  auto args = std::make_shared<StatsArgs>();
  app->add_flag("--json", args->json, "Machine-readable JSON");
  app->add_flag("--breakdown", args->breakdown,
                "Per-subsystem time breakdown (FUSE, metadata, cache, disk wait, copy, hints)");
  app->add_option("--watch", args->watch_seconds, "Repeat every SECONDS")
      ->check(CLI::PositiveNumber);
  app->add_option("MOUNTPOINT", args->mountpoint, "A mounted tipfs volume")->required();
  return [args] { return RunStats(*args); };
}

}  // namespace tipfs::cli
