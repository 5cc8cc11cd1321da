// Microbenchmark (not a test): CPU cost of FileCache::Read when every block is cached, on the
// real clock, one thread. Prints nanoseconds per read and per block for a few read sizes, with
// no hint stream, with the reader's own hint stream being consumed, and with a stream its parent
// shared being consumed (a loader's worker: matched in any order, HintStream::MatchAnyOrder).
//
//   build-x/tests/cache/cache_hit_bench [iterations]
//
// Reads cycle over the first MiB of the file, so the copy runs from the CPU caches as the kernel's
// FUSE buffer copy would; a 1-byte read is the cache's bookkeeping alone.
//
// Then 1, 2 and 4 threads (each its own process to the cache, no hints) read 4 KiB at random
// offsets of the whole file at once, and it prints their hits per second of wall time: how hits
// scale across cores (a lock every hit takes would hold them at one core's rate or below).
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cache/file_cache.h"
#include "stripe/striped_io.h"
#include "stripe/volume.h"
#include "tests/support/mem_disk.h"
#include "util/clock.h"

namespace {

using tipfs::cache::CacheOptions;
using tipfs::cache::FileCache;
using tipfs::cache::HintBatch;
using tipfs::cache::HintExtent;
using tipfs::cache::ReadContext;

// Thread CPU time: on a shared machine, wall time would count other processes' turns.
double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 200'000;
  constexpr uint32_t kUnit = 65536;
  constexpr uint64_t kFileSize = 16ull << 20;
  std::vector<std::unique_ptr<tipfs::stripe::Disk>> disks;
  for (int i = 0; i < 4; ++i) disks.push_back(std::make_unique<tipfs::testing::MemDisk>());
  tipfs::stripe::Label label;
  label.count = 4;
  label.stripe_unit = kUnit;
  tipfs::stripe::Volume volume(label, std::move(disks));
  tipfs::stripe::StripedIo io(&volume);
  std::string data(kFileSize, 'x');
  if (!io.Write(1, 0, data.data(), data.size()).ok()) return 1;

  CacheOptions options;
  options.capacity_bytes = 64ull << 20;
  options.readahead = false;
  FileCache cache(&io, tipfs::SystemClock::Default(), options);
  std::vector<char> out(128 * 1024);
  const ReadContext reader{100, 100};
  // Warm: every block cached.
  for (uint64_t off = 0; off < kFileSize; off += 128 * 1024) {
    if (!cache.Read(reader, 1, off, 128 * 1024, kFileSize, out.data()).ok()) return 1;
  }
  std::printf("%-28s %10s %12s %12s\n", "case", "read size", "ns/read", "ns/64KiB blk");
  constexpr uint64_t kWorkingSet = 1 << 20;
  for (size_t size : {size_t{1}, size_t{4096}, size_t{65536}, size_t{131072}}) {
    for (const char* mode : {"hit, unhinted", "hit, consuming a hint", "hit, consuming shared"}) {
      const std::string_view name(mode);
      const bool hinted = name.find("consuming") != std::string_view::npos;
      const bool shared = name.find("shared") != std::string_view::npos;
      ReadContext who = reader;
      if (hinted) {
        // The reader (or its parent, for it) discloses exactly what it is about to read: each
        // read matches the stream.
        HintBatch batch;
        batch.stream = shared ? (uint64_t{100} << 32) | 1 : 100;
        batch.owner = 100;
        for (int i = 0; i < 1000; ++i) {
          batch.extents.push_back(HintExtent{1, (i * size) % kWorkingSet, size, kFileSize});
        }
        if (shared) {
          if (!cache.ShareStream(batch.stream, 100, true).ok()) return 1;
          who = ReadContext{200, 200};
          who.shared_owner = 100;
        }
        if (!cache.Hint(batch).ok()) return 1;
      }
      const int n = hinted ? 1000 : iterations;
      const double start = CpuSeconds();
      uint64_t offset = 0;
      for (int i = 0; i < n; ++i) {
        if (!cache.Read(who, 1, offset, size, kFileSize, out.data()).ok()) return 1;
        offset = (offset + size) % kWorkingSet;
      }
      const double ns = (CpuSeconds() - start) * 1e9 / n;
      if (size >= 4096) {
        std::printf("%-28s %10zu %12.0f %12.0f\n", mode, size, ns, ns * 65536.0 / size);
      } else {
        std::printf("%-28s %10zu %12.0f %12s\n", mode, size, ns, "-");
      }
    }
  }
  // The hint streams above are done with: without them no read wakes the manager.
  cache.CancelProcess(100);
  for (int threads : {1, 2, 4}) {
    const int each = iterations * 2 / threads;
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&cache, each, t] {
        std::mt19937_64 rng(t);
        std::vector<char> buf(4096);
        const ReadContext who{uint64_t(300 + t), 300u + static_cast<uint32_t>(t)};
        for (int i = 0; i < each; ++i) {
          const uint64_t offset = rng() % (kFileSize / 4096) * 4096;
          if (!cache.Read(who, 1, offset, 4096, kFileSize, buf.data()).ok()) std::abort();
        }
      });
    }
    for (std::thread& t : pool) t.join();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("hit, unhinted, %d thread%s      4096 %12.0f hits/s (wall)\n", threads,
                threads == 1 ? " " : "s", each * threads / seconds);
  }
  tipfs::cache::CacheStats stats = cache.Stats();
  std::printf("demand hits %lu, misses %lu, T_hit estimate %.0f ns per block\n",
              static_cast<unsigned long>(stats.demand_hits),
              static_cast<unsigned long>(stats.demand_misses), stats.t_hit_nanos);
  return 0;
}
