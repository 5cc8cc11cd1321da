// tipfs-model-replay: what the disk model says a random-read benchmark should achieve, so that
// bench/emulation/fidelity.sh can divide the throughput fio measures on a mount by it.
//
// It replays, on a FakeClock, the request stream of `fio --rw=randread --norandommap --bs=BS
// --iodepth=Q` against a file striped over N disks: Q jobs in a closed loop, each issuing a read
// of BS bytes at a uniformly random BS-aligned offset as soon as its previous read completed. Each
// read is cut into per-disk pieces by the same stripe::Layout the mount uses and every piece goes
// through the same DiskModel (one per disk) that EmulatedDisk runs; a read completes when its last
// piece's completion is due. Only the model is replayed, not EmulatedDisk's timers: the point is
// an independent reference for the real emulation on the mount.
//
// --inflight-cap C models a kernel limit on the requests one FUSE connection has in the daemon at
// once (max_background, 12 by default): with Q > C jobs the other Q - C wait in the kernel's FIFO
// and each completion admits one at once, so the disks see exactly C jobs in a closed loop.
//
// Also printed, for comparison, the product-form approximation of the same closed network (N
// identical queues visited uniformly by Q' = min(Q, C) customers; with exponential service every
// placement of the customers is equally likely, so a disk is idle with probability
// (N - 1) / (Q' + N - 1)): throughput = N / S x Q' / (Q' + N - 1), S = one random read's service.
// The model's service is deterministic, not exponential, so the replay is the reference.
//
// Output: one line of key=value pairs: model_iops, model_mbps (10^6 B/s), analytic_mbps, service_ms
// (one random read), jobs (reads in the daemon at once), mean_latency_ms (submission to completion
// as the application sees it), utilization (mean over disks), mean_outstanding (reads at the
// disks, time-weighted), random_share (reads that paid positioning), reads, simulated_seconds.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include "stripe/emulation/disk_model.h"
#include "stripe/emulation/disk_model_config.h"
#include "stripe/layout.h"
#include "util/clock.h"
#include "util/units.h"

namespace tipfs::bench {
namespace {

using stripe::DiskModel;
using stripe::DiskModelConfig;
using stripe::ModelRequest;
using stripe::ModelStart;

struct ReplayOptions {
  DiskModelConfig model;
  uint32_t disks = 4;
  uint32_t stripe_unit = 64 * 1024;
  uint64_t block_size = 64 * 1024;
  uint64_t file_size = 512ull << 20;
  uint32_t iodepth = 1;
  uint32_t inflight_cap = 0;  // 0: no cap
  uint64_t requests = 20000;  // measured completions, after the warm-up
  uint64_t warmup = 2000;     // completions discarded first (the loop reaches steady state)
  uint64_t seed = 1;
  stripe::ObjectId ino = 2;  // which file: only moves the start disk
};

// The closed-loop simulation. Single-threaded: every callback runs inside FakeClock::Advance.
class Replay {
 public:
  explicit Replay(const ReplayOptions& options)
      : options_(options),
        layout_(options.disks, options.stripe_unit),
        rng_(options.seed),
        wake_times_(options.disks) {
    for (uint32_t d = 0; d < options.disks; ++d) {
      disks_.push_back(std::make_unique<DiskModel>(options.model, clock_.NowNanos()));
    }
  }

  void Run() {
    const uint32_t jobs = options_.inflight_cap > 0
                              ? std::min(options_.iodepth, options_.inflight_cap)
                              : options_.iodepth;
    jobs_ = jobs;
    for (uint32_t j = 0; j < jobs; ++j) Issue();
    if (options_.warmup == 0) StartMeasuring();
    while (measured_ < options_.requests) {
      if (!clock_.AdvanceToNext()) break;  // cannot happen: a read is always in flight
    }
    measure_end_ = clock_.NowNanos();
  }

  void Report() const {
    const double seconds = static_cast<double>(measure_end_ - measure_start_) / 1e9;
    const double reads = static_cast<double>(measured_);
    const double iops = seconds > 0 ? reads / seconds : 0;
    const double mbps = iops * static_cast<double>(options_.block_size) / 1e6;
    // One random read of one stripe-unit-sized piece: positioning + transfer, times slowdown.
    const double service_ns =
        options_.model.slowdown *
        static_cast<double>(options_.model.PositioningNanos() +
                            options_.model.TransferNanos(options_.block_size));
    const double n = options_.disks, q = jobs_;
    const double analytic_iops = service_ns > 0 ? n / (service_ns / 1e9) * q / (q + n - 1) : 0;
    const double analytic_mbps = analytic_iops * static_cast<double>(options_.block_size) / 1e6;
    double busy = 0, depth = 0, positioned = 0, started = 0;
    for (const auto& disk : disks_) {
      stripe::DiskStats s = disk->Stats(measure_end_);
      busy += s.utilization();
      depth += s.avg_queue_depth;
      positioned += static_cast<double>(s.positioned);
      started += static_cast<double>(s.started);
    }
    // The application keeps --iodepth reads outstanding (those over the cap wait in the kernel),
    // so by Little's law each takes iodepth / iops from submission to completion, as fio sees it.
    const double latency_ms = iops > 0 ? options_.iodepth / iops * 1e3 : 0;
    std::printf(
        "model_iops=%.3f model_mbps=%.4f analytic_mbps=%.4f service_ms=%.4f jobs=%u "
        "mean_latency_ms=%.4f utilization=%.4f mean_outstanding=%.4f random_share=%.5f "
        "reads=%" PRIu64 " simulated_seconds=%.3f\n",
        iops, mbps, analytic_mbps, service_ns / 1e6, jobs_, latency_ms, busy / n, depth,
        started > 0 ? positioned / started : 0, measured_, seconds);
  }

 private:
  struct Read {
    uint32_t pieces_left = 0;
  };

  void StartMeasuring() {
    measure_start_ = clock_.NowNanos();
    for (auto& disk : disks_) {
      std::vector<ModelStart> started;
      disk->AdvanceTo(measure_start_, &started);
      Schedule(started);
      disk->ResetStats();
    }
  }

  // One read at a uniformly random block-aligned offset (fio --norandommap): every piece goes to
  // its disk's model now.
  void Issue() {
    const uint64_t blocks = std::max<uint64_t>(1, options_.file_size / options_.block_size);
    std::uniform_int_distribution<uint64_t> pick(0, blocks - 1);
    const uint64_t offset = pick(rng_) * options_.block_size;
    std::vector<stripe::Extent> extents;
    layout_.Map(options_.ino, offset, options_.block_size, &extents);
    auto read = std::make_shared<Read>();
    read->pieces_left = static_cast<uint32_t>(extents.size());
    const int64_t now = clock_.NowNanos();
    for (const stripe::Extent& e : extents) {
      const uint64_t id = next_id_++;
      pieces_[id] = read;
      ModelRequest request{id,
                           stripe::DiskRequest::Kind::kRead,
                           stripe::DiskRequest::Priority::kDemand,
                           options_.ino,
                           e.object_offset,
                           e.length};
      std::vector<ModelStart> started;
      disks_[e.disk]->Submit(request, now, &started);
      Schedule(started);
      Rearm(e.disk);
    }
  }

  // Completions of the pieces that started are due at their deadlines.
  void Schedule(const std::vector<ModelStart>& started) {
    for (const ModelStart& s : started) {
      clock_.RunAt(s.deadline, [this, id = s.id] { PieceDone(id); });
    }
  }

  // Wakes disk `d` when its model next starts a queued piece (as EmulatedDisk's timers do).
  void Rearm(uint32_t d) {
    const int64_t next = disks_[d]->NextEventTime();
    if (next < 0) return;
    std::multiset<int64_t>& wakes = wake_times_[d];
    if (!wakes.empty() && *wakes.begin() <= next) return;
    wakes.insert(next);
    clock_.RunAt(next, [this, d, next] {
      std::multiset<int64_t>& w = wake_times_[d];
      w.erase(w.find(next));
      std::vector<ModelStart> started;
      disks_[d]->AdvanceTo(clock_.NowNanos(), &started);
      Schedule(started);
      Rearm(d);
    });
  }

  void PieceDone(uint64_t id) {
    auto it = pieces_.find(id);
    std::shared_ptr<Read> read = it->second;
    pieces_.erase(it);
    if (--read->pieces_left > 0) return;
    ++completed_;
    if (measure_start_ >= 0) ++measured_;
    if (completed_ == options_.warmup) StartMeasuring();
    Issue();  // the job's next read, at once
  }

  const ReplayOptions options_;
  const stripe::Layout layout_;
  FakeClock clock_;
  std::mt19937_64 rng_;
  std::vector<std::unique_ptr<DiskModel>> disks_;
  std::vector<std::multiset<int64_t>> wake_times_;
  std::unordered_map<uint64_t, std::shared_ptr<Read>> pieces_;
  uint64_t next_id_ = 1;
  uint32_t jobs_ = 0;
  uint64_t completed_ = 0, measured_ = 0;
  int64_t measure_start_ = -1, measure_end_ = 0;
};

int Main(int argc, char** argv) {
  CLI::App app{"Replays fio's random reads through the disk model; prints modelled throughput"};
  std::string spec = "hdd", unit = "64K", bs = "64K", size = "512M";
  ReplayOptions options;
  app.add_option("--model", spec, "Disk model spec, as for tipfs mount --disk-model");
  app.add_option("--disks", options.disks, "Disks in the volume")->check(CLI::Range(1, 64));
  app.add_option("--stripe-unit", unit, "Stripe unit of the volume");
  app.add_option("--bs", bs, "Bytes per read (a multiple of the stripe unit, or smaller)");
  app.add_option("--file-size", size, "Size of the file read");
  app.add_option("--iodepth", options.iodepth, "Reads in flight (fio --iodepth)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--inflight-cap", options.inflight_cap,
                 "Most reads the kernel lets into the daemon at once (FUSE max_background)");
  app.add_option("--requests", options.requests, "Reads measured after the warm-up");
  app.add_option("--warmup", options.warmup, "Reads completed before measuring");
  app.add_option("--seed", options.seed, "Random seed");
  bool service_only = false;
  app.add_flag(
      "--service-only", service_only,
      "Print the model's random positioning_ms and per_byte_ns (after slowdown), no replay");
  CLI11_PARSE(app, argc, argv);

  Result<DiskModelConfig> model = stripe::ParseDiskModelSpec(spec);
  if (!model.ok()) {
    std::fprintf(stderr, "tipfs-model-replay: --model: %s\n", model.status().ToString().c_str());
    return 2;
  }
  if (!model->ModelsService()) {
    std::fprintf(stderr, "tipfs-model-replay: --model %s has no modelled service time\n",
                 spec.c_str());
    return 2;
  }
  options.model = *model;
  if (service_only) {
    // For scripts that predict other workloads: a random access costs positioning_ms +
    // bytes x per_byte_ns; a request continuing the previous one costs only the transfer.
    std::printf("positioning_ms=%.6f per_byte_ns=%.6f\n",
                model->slowdown * static_cast<double>(model->PositioningNanos()) / 1e6,
                model->slowdown * model->PerByteNanos());
    return 0;
  }
  auto parse_size = [](const std::string& text, const char* flag, uint64_t* out) {
    Result<uint64_t> value = ParseSize(text);
    if (value.ok() && *value > 0) {
      *out = *value;
      return true;
    }
    std::fprintf(stderr, "tipfs-model-replay: %s: bad size '%s'\n", flag, text.c_str());
    return false;
  };
  uint64_t stripe_unit = 0;
  if (!parse_size(unit, "--stripe-unit", &stripe_unit) ||
      !parse_size(bs, "--bs", &options.block_size) ||
      !parse_size(size, "--file-size", &options.file_size)) {
    return 2;
  }
  if (stripe_unit < 4096 || stripe_unit > (1u << 30) || (stripe_unit & (stripe_unit - 1)) != 0) {
    std::fprintf(stderr, "tipfs-model-replay: --stripe-unit must be a power of two >= 4K\n");
    return 2;
  }
  options.stripe_unit = static_cast<uint32_t>(stripe_unit);
  Replay replay(options);
  replay.Run();
  replay.Report();
  return 0;
}

}  // namespace
}  // namespace tipfs::bench

int main(int argc, char** argv) { return tipfs::bench::Main(argc, argv); }
