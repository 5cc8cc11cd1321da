// tipfs-disk-latency: what one emulated disk delivers when driven directly, without FUSE or the
// cache, so the daemon's costs can be told from the emulator's (issue 11). It issues 4 KiB random
// reads of one object at queue depth 1 (each read submitted when the previous one's `done` ran,
// as fio psync does through a mount) and prints the latency per read, submission to done, of:
//   posix     a PosixDisk over --dir with its own IoRing (the backing store and the ring's thread)
//   timer     SystemClock::RunAt for the model's service time from now (the Clock's timer thread
//             alone); printed: the callback's lateness past its deadline, and the whole wait
//   emulated  an EmulatedDisk under --model over a disk that completes inline (the model and the
//             Clock's timer delivery alone)
//   full      an EmulatedDisk under --model over the PosixDisk (what the mount's disks do)
// with the model's own service time beside it, so "full / model" is the ratio the emulator can
// deliver at best. The done callback wakes the submitting thread through a futex, as a
// completion wakes a FUSE reply on a mount, so one thread hand-off is counted in every figure.
//
// Output: one line per configuration: name, reads, mean / p50 / p99 us, IOPS, IOPS / model limit.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "stripe/disk.h"
#include "stripe/emulation/disk_model_config.h"
#include "stripe/emulation/emulated_disk.h"
#include "stripe/io_ring.h"
#include "stripe/mkfs.h"
#include "stripe/posix_disk.h"
#include "util/clock.h"

namespace tipfs::bench {
namespace {

constexpr uint64_t kReadBytes = 4096;
constexpr stripe::ObjectId kObject = 1;

// Completes every request at once, on the submitting thread: isolates the emulator's timing.
class InlineDisk : public stripe::Disk {
 public:
  void Submit(stripe::DiskRequest request) override { request.done(request.length); }
  Status Truncate(stripe::ObjectId, uint64_t) override { return Status::OK(); }
  Status Remove(stripe::ObjectId) override { return Status::OK(); }
  Result<stripe::ObjectInfo> Stat(stripe::ObjectId) override { return stripe::ObjectInfo{}; }
  Status ListObjects(std::vector<stripe::ObjectId>*) override { return Status::OK(); }
  Result<stripe::DiskUsage> Usage() override { return stripe::DiskUsage{}; }
  Status SyncAll() override { return Status::OK(); }
  std::string name() const override { return "inline"; }
};

struct Summary {
  double mean_us = 0, p50_us = 0, p99_us = 0, iops = 0;
};

Summary Drive(stripe::Disk* disk, uint64_t object_bytes, uint64_t reads, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> block(0, object_bytes / kReadBytes - 1);
  std::vector<char> buffer(kReadBytes);
  std::vector<int64_t> latencies;
  latencies.reserve(reads);
  SystemClock* clock = SystemClock::Default();
  const int64_t begin = clock->NowNanos();
  for (uint64_t i = 0; i < reads; ++i) {
    std::atomic<int> finished{0};
    stripe::DiskRequest request;
    request.kind = stripe::DiskRequest::Kind::kRead;
    request.object = kObject;
    request.offset = block(rng) * kReadBytes;
    request.length = kReadBytes;
    request.buffer = buffer.data();
    request.done = [&finished](Result<uint64_t> result) {
      if (!result.ok())
        std::fprintf(stderr, "read failed: %s\n", result.status().ToString().c_str());
      finished.store(1, std::memory_order_release);
      finished.notify_one();
    };
    const int64_t start = clock->NowNanos();
    disk->Submit(std::move(request));
    while (finished.load(std::memory_order_acquire) == 0) finished.wait(0);
    latencies.push_back(clock->NowNanos() - start);
  }
  const int64_t elapsed = clock->NowNanos() - begin;
  std::sort(latencies.begin(), latencies.end());
  Summary s;
  double sum = 0;
  for (int64_t l : latencies) sum += static_cast<double>(l);
  s.mean_us = sum / static_cast<double>(latencies.size()) / 1e3;
  s.p50_us = static_cast<double>(latencies[latencies.size() / 2]) / 1e3;
  s.p99_us = static_cast<double>(latencies[latencies.size() * 99 / 100]) / 1e3;
  s.iops = static_cast<double>(reads) / (static_cast<double>(elapsed) / 1e9);
  return s;
}

// The Clock alone: RunAt(now + service) and wait for the callback, as the emulator does per read.
Summary DriveTimer(int64_t service_ns, uint64_t reads, Summary* lateness) {
  SystemClock* clock = SystemClock::Default();
  std::vector<int64_t> waits, lates;
  waits.reserve(reads);
  lates.reserve(reads);
  const int64_t begin = clock->NowNanos();
  for (uint64_t i = 0; i < reads; ++i) {
    std::atomic<int> finished{0};
    int64_t fired = 0;
    const int64_t start = clock->NowNanos();
    const int64_t deadline = start + service_ns;
    clock->RunAt(deadline, [&finished, &fired, clock] {
      fired = clock->NowNanos();
      finished.store(1, std::memory_order_release);
      finished.notify_one();
    });
    while (finished.load(std::memory_order_acquire) == 0) finished.wait(0);
    waits.push_back(clock->NowNanos() - start);
    lates.push_back(fired - deadline);
  }
  const int64_t elapsed = clock->NowNanos() - begin;
  auto summarize = [](std::vector<int64_t>* v) {
    std::sort(v->begin(), v->end());
    Summary s;
    double sum = 0;
    for (int64_t l : *v) sum += static_cast<double>(l);
    s.mean_us = sum / static_cast<double>(v->size()) / 1e3;
    s.p50_us = static_cast<double>((*v)[v->size() / 2]) / 1e3;
    s.p99_us = static_cast<double>((*v)[v->size() * 99 / 100]) / 1e3;
    return s;
  };
  *lateness = summarize(&lates);
  Summary s = summarize(&waits);
  s.iops = static_cast<double>(reads) / (static_cast<double>(elapsed) / 1e9);
  return s;
}

void Print(const char* name, uint64_t reads, const Summary& s, double limit_iops) {
  std::printf("%-9s reads=%llu mean_us=%.1f p50_us=%.1f p99_us=%.1f iops=%.0f ratio=%.3f\n", name,
              static_cast<unsigned long long>(reads), s.mean_us, s.p50_us, s.p99_us, s.iops,
              limit_iops > 0 ? s.iops / limit_iops : 0.0);
}

int Main(int argc, char** argv) {
  CLI::App app{"tipfs-disk-latency: QD1 4 KiB random reads of one emulated disk, without FUSE"};
  std::string dir, model_spec = "ssd";
  uint64_t reads = 20000, object_mib = 256;
  app.add_option("--dir", dir, "an empty scratch directory for the PosixDisk")->required();
  app.add_option("--model", model_spec, "disk model spec (man/disk-models.md)");
  app.add_option("--reads", reads, "reads per configuration");
  app.add_option("--object-mib", object_mib, "size of the object read, MiB");
  CLI11_PARSE(app, argc, argv);

  Result<stripe::DiskModelConfig> model = stripe::ParseDiskModelSpec(model_spec);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 2;
  }
  // The model's service time of one random 4 KiB read: access + bytes / bandwidth.
  const double service_us =
      (static_cast<double>(model->access_ns) + kReadBytes * 1e9 / model->bandwidth) / 1e3;
  const double limit_iops = 1e6 / service_us;
  std::printf("model=%s service_us=%.1f limit_iops=%.0f\n", model_spec.c_str(), service_us,
              limit_iops);

  ::mkdir(dir.c_str(), 0755);
  const std::string objects = dir + "/objects";
  ::mkdir(objects.c_str(), 0755);
  Result<std::unique_ptr<stripe::IoRing>> ring = stripe::IoRing::Create(256, "bench-ring");
  if (!ring.ok()) {
    std::fprintf(stderr, "%s\n", ring.status().ToString().c_str());
    return 1;
  }
  Result<std::unique_ptr<stripe::PosixDisk>> posix = stripe::PosixDisk::Open(dir, 0, ring->get());
  if (!posix.ok()) {
    std::fprintf(stderr, "%s\n", posix.status().ToString().c_str());
    return 1;
  }
  // Fill the object (it then sits in the page cache, as the mount's backing files do).
  const uint64_t object_bytes = object_mib << 20;
  {
    std::vector<char> chunk(1 << 20, 'x');
    for (uint64_t off = 0; off < object_bytes; off += chunk.size()) {
      std::atomic<int> finished{0};
      stripe::DiskRequest w;
      w.kind = stripe::DiskRequest::Kind::kWrite;
      w.object = kObject;
      w.offset = off;
      w.length = chunk.size();
      w.buffer = chunk.data();
      w.done = [&finished](Result<uint64_t>) {
        finished.store(1);
        finished.notify_one();
      };
      (*posix)->Submit(std::move(w));
      while (finished.load() == 0) finished.wait(0);
    }
  }

  Print("posix", reads, Drive(posix->get(), object_bytes, reads, 1), 0);

  Summary lateness;
  const Summary timer = DriveTimer(static_cast<int64_t>(service_us * 1e3), reads, &lateness);
  Print("timer", reads, timer, limit_iops);
  Print("  late", reads, lateness, 0);

  stripe::EmulatedDiskOptions options;
  options.model = *model;
  {
    stripe::EmulatedDisk emulated(std::make_unique<InlineDisk>(), SystemClock::Default(), options);
    Print("emulated", reads, Drive(&emulated, object_bytes, reads, 2), limit_iops);
  }
  {
    // The PosixDisk moves into the wrapper; the ring outlives it.
    stripe::EmulatedDisk full(std::move(*posix), SystemClock::Default(), options);
    Print("full", reads, Drive(&full, object_bytes, reads, 3), limit_iops);
  }
  return 0;
}

}  // namespace
}  // namespace tipfs::bench

int main(int argc, char** argv) { return tipfs::bench::Main(argc, argv); }
