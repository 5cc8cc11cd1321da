// Microbenchmark (not a test): what FileCache::Stats costs with a full cache, and what it costs
// the readers. Stats runs for every TIPFS_IOC_QUERY (a hinting program, the speculating copy),
// `tipfs stats` and /metrics scrape, under the cache's lock, which every miss and completion
// also takes.
//
//   build-x/tests/cache/cache_stats_bench [blocks]
//
// Fills a cache of `blocks` 4 KiB blocks (65,536 by default: 256 MiB) from in-memory disks, then
// prints the median wall time of one Stats call. Then one thread reads 4 KiB at random offsets of
// a file twice the cache's size (half the reads miss, and a miss takes the cache's lock), alone
// and while a second thread calls Stats back to back: reads per second and the longest read,
// three alternating seconds each, medians.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
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
using tipfs::cache::ReadContext;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kBlock = 4096;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct ReadRate {
  double per_second;
  double longest_us;
};

// One reader's reads over `seconds`, with `scrapers` threads calling Stats meanwhile.
ReadRate Reads(FileCache* cache, uint64_t file_blocks, int scrapers, double seconds) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  for (int i = 0; i < scrapers; ++i) {
    pool.emplace_back([cache, &stop] {
      while (!stop.load(std::memory_order_relaxed)) (void)cache->Stats();
    });
  }
  std::mt19937_64 rng(1);
  std::vector<char> buf(kBlock);
  const ReadContext who{300, 300};
  uint64_t reads = 0;
  double longest_us = 0;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  for (auto now = start; now < end; ++reads) {
    const uint64_t offset = rng() % file_blocks * kBlock;
    if (!cache->Read(who, 1, offset, kBlock, file_blocks * kBlock, buf.data()).ok()) std::abort();
    const auto done = Clock::now();
    longest_us =
        std::max(longest_us, std::chrono::duration<double, std::micro>(done - now).count());
    now = done;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  stop.store(true);
  for (std::thread& t : pool) t.join();
  return ReadRate{static_cast<double>(reads) / elapsed, longest_us};
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t blocks = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 65536;
  std::vector<std::unique_ptr<tipfs::stripe::Disk>> disks;
  for (int i = 0; i < 4; ++i) disks.push_back(std::make_unique<tipfs::testing::MemDisk>());
  tipfs::stripe::Label label;
  label.count = 4;
  label.stripe_unit = kBlock;
  tipfs::stripe::Volume volume(label, std::move(disks));
  tipfs::stripe::StripedIo io(&volume);
  {
    const std::string data(2 * blocks * kBlock, 'x');
    if (!io.Write(1, 0, data.data(), data.size()).ok()) return 1;
  }
  CacheOptions options;
  options.block_size = kBlock;
  options.capacity_bytes = blocks * kBlock;
  options.readahead = false;
  FileCache cache(&io, tipfs::SystemClock::Default(), options);
  std::vector<char> out(256 * kBlock);
  for (uint64_t off = 0; off < blocks * kBlock; off += out.size()) {
    const size_t n = std::min<uint64_t>(out.size(), blocks * kBlock - off);
    if (!cache.Read(ReadContext{100, 100}, 1, off, n, 2 * blocks * kBlock, out.data()).ok()) {
      return 1;
    }
  }
  const tipfs::cache::CacheStats filled = cache.Stats();
  std::printf("blocks cached: %lu (lru %lu)\n",
              static_cast<unsigned long>(filled.lru_buffers + filled.hinted_buffers +
                                         filled.evict_first_buffers + filled.fetching_buffers),
              static_cast<unsigned long>(filled.lru_buffers));
  std::vector<double> call_us;
  for (int i = 0; i < 201; ++i) {
    const auto start = Clock::now();
    (void)cache.Stats();
    call_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  std::printf("Stats call: median %.1f us\n", Median(call_us));
  std::vector<double> alone, scraped, alone_longest, scraped_longest;
  for (int round = 0; round < 3; ++round) {
    const ReadRate a = Reads(&cache, 2 * blocks, 0, 1.0);
    const ReadRate s = Reads(&cache, 2 * blocks, 1, 1.0);
    alone.push_back(a.per_second);
    alone_longest.push_back(a.longest_us);
    scraped.push_back(s.per_second);
    scraped_longest.push_back(s.longest_us);
  }
  std::printf(
      "reads/s alone: %.0f (longest %.0f us), beside a Stats loop: %.0f (longest %.0f us)\n",
      Median(alone), Median(alone_longest), Median(scraped), Median(scraped_longest));
  return 0;
}
