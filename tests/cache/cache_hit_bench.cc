// Microbenchmark (not a test): CPU cost of FileCache::Read when every block is cached, on the
// real clock, one thread. Prints nanoseconds per read and per block for a few read sizes, with
// no hint stream, with the reader's own hint stream being consumed, and with a stream its parent
// shared being consumed (a loader's worker: matched in any order, HintStream::MatchAnyOrder).
//
//   build-x/tests/cache/cache_hit_bench [iterations] [processes]
//
// With `processes` > 1 it also times unhinted 4 KiB hits by that many threads at once, each as a
// process of its own (a tgid each), as FUSE workers serve several readers: wall and CPU time per
// read over all of them.
//
// Reads cycle over the first MiB of the file, so the copy runs from the CPU caches as the kernel's
// FUSE buffer copy would; a 1-byte read is the cache's bookkeeping alone.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
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

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
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
  const int processes = argc > 2 ? std::atoi(argv[2]) : 1;
  if (processes > 1) {
    // Each thread its own process and its own part of the working set, all blocks cached.
    const auto wall_start = std::chrono::steady_clock::now();
    const double cpu_start = ProcessCpuSeconds();
    std::vector<std::thread> threads;
    std::vector<int> failed(processes, 0);
    for (int t = 0; t < processes; ++t) {
      threads.emplace_back([&, t] {
        const ReadContext who{static_cast<uint64_t>(1000 + t), static_cast<uint32_t>(1000 + t)};
        std::vector<char> buffer(4096);
        uint64_t offset = static_cast<uint64_t>(t) * kWorkingSet;
        for (int i = 0; i < iterations; ++i) {
          if (!cache.Read(who, 1, offset, 4096, kFileSize, buffer.data()).ok()) failed[t] = 1;
          offset += 4096;
          if (offset >= static_cast<uint64_t>(t + 1) * kWorkingSet) offset -= kWorkingSet;
        }
      });
    }
    for (std::thread& t : threads) t.join();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    const double cpu = ProcessCpuSeconds() - cpu_start;
    for (int f : failed) {
      if (f != 0) return 1;
    }
    const double reads = static_cast<double>(iterations) * processes;
    std::printf("%-28s %10d %12.0f %12.0f\n", "hits by N processes at once", processes,
                wall * 1e9 / reads, cpu * 1e9 / reads);
    std::printf("  (columns: processes, wall ns per read over all, CPU ns per read)\n");
  }
  tipfs::cache::CacheStats stats = cache.Stats();
  std::printf("demand hits %lu, misses %lu, T_hit estimate %.0f ns per block\n",
              static_cast<unsigned long>(stats.demand_hits),
              static_cast<unsigned long>(stats.demand_misses), stats.t_hit_nanos);
  return 0;
}
