// `tipfs stats`: prints the counters a mount publishes under `.tipfs/`; with --watch, the rates
// of each interval (MB/s, requests/s, hits/s) instead of totals.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/mount_table.h"
#include "util/mount_table.h"

namespace tipfs::cli {
namespace {

struct StatsArgs {
  std::string mountpoint;
  bool json = false;
  bool breakdown = false;
  bool streams = false;
  std::string watch_seconds;
  int count = 0;         // --watch: stop after this many intervals (0: until interrupted)
  std::string timeline;  // SVG file
  std::string seconds = "10";
};

// --timeline: record for --seconds, then draw.
int RecordTimeline(const StatsArgs& args, const std::string& mountpoint) {
  Status st = CheckTimelinePath(args.timeline);
  if (!st.ok()) return Fail("stats", st);
  st = StartTimeline(mountpoint);
  if (!st.ok()) return Fail("stats", st);
  const int64_t started = MonotonicNanos();
  std::this_thread::sleep_for(
      std::chrono::duration<double>(std::strtod(args.seconds.c_str(), nullptr)));
  Result<std::string> described =
      FinishTimeline(mountpoint, started, MonotonicNanos(), args.timeline,
                     "tipfs stats --timeline: " + mountpoint + ", " + args.seconds + " s");
  if (!described.ok()) return Fail("stats", described.status());
  std::printf("timeline %s: %s\n", args.timeline.c_str(), described->c_str());
  return 0;
}

Result<std::string> ReadControlFile(const std::string& mountpoint, const std::string& name) {
  std::string path = mountpoint + "/.tipfs/" + name;
  std::ifstream in(path);
  if (!in) {
    if (DaemonGoneError(errno)) {
      return Status::FromErrno(ENOTCONN, mountpoint +
                                             ": the daemon of this mount is gone (killed or "
                                             "crashed); run tipfs umount " +
                                             mountpoint + ", then mount it again (it recovers)");
    }
    return ErrnoStatus("cannot read " + path);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The number after "name": in stats.json (a flat object for everything watched here), or 0.
double JsonNumber(const std::string& json, const std::string& name) {
  const std::string key = "\"" + name + "\":";
  const size_t at = json.find(key);
  return at == std::string::npos ? 0.0 : std::strtod(json.c_str() + at + key.size(), nullptr);
}

// One line per interval: what happened in it, as rates.
class RateTable {
 public:
  void Print(const std::string& before, const std::string& after, int line) {
    const double dt = JsonNumber(after, "uptime_seconds") - JsonNumber(before, "uptime_seconds");
    if (dt <= 0) return;
    auto rate = [&](const char* name) {
      return (JsonNumber(after, name) - JsonNumber(before, name)) / dt;
    };
    if (line % 20 == 0) {
      std::printf("%9s %9s %9s %8s %9s %9s %6s %7s %11s %9s\n", "read MB/s", "write MB/s",
                  "disk MB/s", "IOPS", "hits/s", "misses/s", "hit%", "stall%", "prefetch/s",
                  "used/s");
    }
    const double hits = rate("demand.hits"), misses = rate("demand.misses");
    std::printf("%9.1f %10.1f %9.1f %8.0f %9.0f %9.0f %6.1f %7.1f %11.0f %9.0f\n",
                rate("fuse.read.bytes") / 1e6, rate("fuse.write.bytes") / 1e6,
                (rate("disk.read.bytes") + rate("disk.write.bytes")) / 1e6,
                rate("fuse.read.ops") + rate("fuse.write.ops"), hits, misses,
                hits + misses > 0 ? 100.0 * hits / (hits + misses) : 0.0,
                100.0 * rate("demand.stall.nanos") / 1e9,
                rate("hints.prefetched") + rate("readahead.issued"), rate("hints.used"));
    std::fflush(stdout);
  }
};

int RunStats(const StatsArgs& args) {
  std::optional<TipfsMount> mount = FindTipfsMount(args.mountpoint);
  if (!mount) return Usage("stats", args.mountpoint + " is not a tipfs mount point");
  if (!args.timeline.empty()) return RecordTimeline(args, mount->mountpoint);
  if (args.streams && (args.json || args.breakdown)) {
    return Usage("stats", "--streams is a listing of its own (no --json or --breakdown)");
  }
  const char* name = args.streams ? "streams"
                     : args.json  ? (args.breakdown ? "breakdown.json" : "stats.json")
                                  : (args.breakdown ? "breakdown" : "stats");
  if (args.watch_seconds.empty()) {
    Result<std::string> text = ReadControlFile(mount->mountpoint, name);
    if (!text.ok()) return Fail("stats", text.status());
    std::fwrite(text->data(), 1, text->size(), stdout);
    return 0;
  }
  const auto interval =
      std::chrono::duration<double>(std::strtod(args.watch_seconds.c_str(), nullptr));
  // --json and --breakdown: the whole rendering each interval; otherwise the rates.
  const bool rates = !args.json && !args.breakdown && !args.streams;
  Result<std::string> previous = ReadControlFile(mount->mountpoint, rates ? "stats.json" : name);
  if (!previous.ok()) return Fail("stats", previous.status());
  RateTable table;
  for (int i = 0; args.count == 0 || i < args.count; ++i) {
    if (!rates) {
      std::fwrite(previous->data(), 1, previous->size(), stdout);
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(interval);
    Result<std::string> now = ReadControlFile(mount->mountpoint, rates ? "stats.json" : name);
    if (!now.ok()) return Fail("stats", now.status());
    if (rates) table.Print(*previous, *now, i);
    previous = std::move(now);
  }
  return 0;
}

}  // namespace

Runner AddStatsCommand(CLI::App* app) {
  auto args = std::make_shared<StatsArgs>();
  app->add_flag("--json", args->json, "Machine-readable JSON");
  app->add_flag("--breakdown", args->breakdown,
                "Per-subsystem time breakdown (FUSE, metadata, cache, disk wait, copy, hints)");
  app->add_flag("--streams", args->streams,
                "List the hint streams by process and source: outstanding bytes, blocks "
                "consumed and prefetched, horizon, the source's accuracy");
  app->add_option("--watch", args->watch_seconds,
                  "Every SECONDS, print the rates of that interval (with --json or --breakdown: "
                  "the whole output)")
      ->option_text("SECONDS")
      ->check(PositiveSecondsValidator());
  app->add_option("--count", args->count, "With --watch: stop after N intervals")
      ->option_text("N")
      ->check(CLI::Range(1, 1000000));
  app->add_option("--timeline", args->timeline,
                  "Record the mount's disks and stalls for --seconds and draw them as SVG")
      ->option_text("FILE.svg");
  app->add_option("--seconds", args->seconds, "How long --timeline records (default 10)")
      ->option_text("SECONDS")
      ->check(PositiveSecondsValidator());
  app->add_option("MOUNTPOINT", args->mountpoint, "A mounted tipfs volume")->required();
  return [args] { return RunStats(*args); };
}

}  // namespace tipfs::cli
