// tipfs-miss-cost: the CPU a demand miss costs the daemon's layers below FUSE (cache, stripe,
// emulation, clock), without FUSE and fio, so that a change to the miss path can be measured
// by a figure that does not move with the machine's load (issue 11, nvme-rand-32). It opens a
// volume of --disks directories the way the daemon does (fusefs::OpenDiskArray: the disk
// model, activity and health wrappers over PosixDisks), puts a FileCache of --cache-size over
// it with read-ahead off, and runs --threads readers, each reading 4 KiB at random offsets of
// one file and waiting for its reply (FileCache::ReadShared, as a FUSE read does; the reply is
// a futex wake of the reader instead of a writev to /dev/fuse).
//
//   tipfs-miss-cost --dir /dev/shm/mc --model nvme --threads 32 --seconds 5
//   valgrind --tool=callgrind tipfs-miss-cost --dir /dev/shm/mc --threads 1 --reads 2000
//
// Prints reads, reads per second, the process's CPU per read (user + system, the readers'
// waits included) and the Clock timer thread's, heap allocations per read (malloc and friends,
// counted by this binary's own malloc), and the cache's hit and miss counts.
#include <dirent.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/file_cache.h"
#include "fusefs/disk_array.h"
#include "stripe/mkfs.h"
#include "stripe/striped_io.h"
#include "stripe/volume.h"
#include "util/clock.h"

// Counts every heap allocation of the process (glibc's entry points, which operator new uses).
namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void* malloc(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(p, n);
}
void* aligned_alloc(size_t align, size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(align, n);
}
int posix_memalign(void** out, size_t align, size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  *out = __libc_memalign(align, n);
  return *out != nullptr ? 0 : ENOMEM;
}
}

namespace tipfs::bench {
namespace {

constexpr uint64_t kIno = 2;
constexpr uint64_t kReadBytes = 4096;

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// CPU seconds of the process's real-time threads (the Clock's timer thread is the only one).
double RealTimeThreadsCpuSeconds() {
  double total = 0;
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return 0;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    char stat[300];
    std::snprintf(stat, sizeof(stat), "/proc/self/task/%s/stat", entry->d_name);
    FILE* f = std::fopen(stat, "r");
    if (f == nullptr) continue;
    char line[1024];
    const size_t n = std::fread(line, 1, sizeof(line) - 1, f);
    std::fclose(f);
    line[n] = 0;
    const char* p = std::strrchr(line, ')');
    if (p == nullptr) continue;
    // Fields after the command: state(3) ... utime(14) stime(15) ... policy(41).
    std::vector<long long> fields;
    for (char* s = const_cast<char*>(p + 2); *s != 0;) {
      char* end;
      fields.push_back(std::strtoll(s, &end, 10));
      if (end == s) ++end;
      s = end;
      while (*s == ' ') ++s;
    }
    if (fields.size() > 38 && fields[38] == 1 /* SCHED_FIFO */) {
      total += static_cast<double>(fields[11] + fields[12]) / hz;
    }
  }
  closedir(tasks);
  return total;
}

int Main(int argc, char** argv) {
  CLI::App app{"tipfs-miss-cost: CPU per demand miss below FUSE (cache, stripe, emulation)"};
  std::string dir, model = "nvme";
  uint32_t disks = 4, threads = 32;
  double seconds = 5;
  uint64_t reads_per_thread = 0, file_mib = 256, cache_mib = 32;
  app.add_option("--dir", dir, "a scratch directory (tmpfs, as run.sh's TIPFS_BENCH_TMP)")
      ->required();
  app.add_option("--model", model, "--disk-model of the mount");
  app.add_option("--disks", disks, "disks of the volume");
  app.add_option("--threads", threads, "readers, each one read at a time (fio psync jobs)");
  app.add_option("--seconds", seconds, "run time (unless --reads)");
  app.add_option("--reads", reads_per_thread, "reads per reader instead of a run time");
  app.add_option("--file-mib", file_mib, "size of the file read");
  app.add_option("--cache-mib", cache_mib, "--cache-size of the mount");
  CLI11_PARSE(app, argc, argv);

  ::mkdir(dir.c_str(), 0755);
  stripe::MkfsOptions mkfs;
  for (uint32_t i = 0; i < disks; ++i) {
    mkfs.disks.push_back(dir + "/d" + std::to_string(i));
    ::mkdir(mkfs.disks.back().c_str(), 0755);
  }
  const uint64_t file_bytes = file_mib << 20;
  fusefs::MountOptions options;
  options.disk = mkfs.disks[0];
  struct stat st {};
  const bool fresh = ::stat((mkfs.disks[0] + "/tipfs-label").c_str(), &st) != 0;
  if (fresh) {
    mkfs.force = true;
    Result<stripe::Label> label = stripe::Mkfs(mkfs);
    if (!label.ok()) {
      std::fprintf(stderr, "%s\n", label.status().ToString().c_str());
      return 1;
    }
    // The file's data, written without a model (a model would time the writes).
    Result<fusefs::DiskArray> plain =
        fusefs::OpenDiskArray(options, SystemClock::Default(), nullptr);
    if (!plain.ok()) {
      std::fprintf(stderr, "%s\n", plain.status().ToString().c_str());
      return 1;
    }
    stripe::StripedIo io(plain->volume.get());
    std::vector<char> chunk(1 << 20);
    std::mt19937_64 rng(1);
    for (uint64_t off = 0; off < file_bytes; off += chunk.size()) {
      for (size_t i = 0; i < chunk.size(); i += 8) {
        const uint64_t v = rng();
        std::memcpy(chunk.data() + i, &v, 8);
      }
      Status s = io.Write(kIno, off, chunk.data(), chunk.size());
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
    }
  }
  options.disk_model = model;
  Result<fusefs::DiskArray> array = fusefs::OpenDiskArray(options, SystemClock::Default(), nullptr);
  if (!array.ok()) {
    std::fprintf(stderr, "%s\n", array.status().ToString().c_str());
    return 1;
  }
  stripe::StripedIo io(array->volume.get());
  cache::CacheOptions cache_options;
  cache_options.capacity_bytes = cache_mib << 20;
  cache_options.readahead = false;
  auto cache = std::make_unique<cache::FileCache>(&io, SystemClock::Default(), cache_options);

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> total_reads{0};
  auto reader = [&](uint32_t index) {
    std::mt19937_64 rng(100 + index);
    std::uniform_int_distribution<uint64_t> page(0, file_bytes / kReadBytes - 1);
    const cache::ReadContext context{1000 + index, 1000 + index};
    uint64_t reads = 0;
    std::atomic<uint32_t> replied{0};
    while (reads_per_thread > 0 ? reads < reads_per_thread
                                : !stop.load(std::memory_order_relaxed)) {
      replied.store(0, std::memory_order_relaxed);
      cache->ReadShared(context, kIno, page(rng) * kReadBytes, kReadBytes, file_bytes,
                        [&replied](Result<cache::ReadData> data) {
                          if (!data.ok()) std::abort();
                          replied.store(1, std::memory_order_release);
                          replied.notify_one();
                        });
      while (replied.load(std::memory_order_acquire) == 0) replied.wait(0);
      ++reads;
    }
    total_reads.fetch_add(reads, std::memory_order_relaxed);
  };
  // A first pass fills the cache, so the measured reads each evict a block as on a mount.
  {
    std::vector<std::thread> warm;
    const uint64_t saved = reads_per_thread;
    reads_per_thread = (cache_mib << 20) / 65536 * 2 / threads + 1;
    for (uint32_t i = 0; i < threads; ++i) warm.emplace_back(reader, i + threads);
    for (std::thread& t : warm) t.join();
    reads_per_thread = saved;
    total_reads.store(0);
  }
  const cache::CacheStats before = cache->Stats();
  const double timer0 = RealTimeThreadsCpuSeconds();
  const uint64_t allocations0 = g_allocations.load();
  const double cpu0 = ProcessCpuSeconds();
  timespec t0{}, t1{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  std::vector<std::thread> pool;
  for (uint32_t i = 0; i < threads; ++i) pool.emplace_back(reader, i);
  if (reads_per_thread == 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop.store(true);
  }
  for (std::thread& t : pool) t.join();
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double cpu = ProcessCpuSeconds() - cpu0;
  const uint64_t allocations = g_allocations.load() - allocations0;
  const double timer = RealTimeThreadsCpuSeconds() - timer0;
  const cache::CacheStats after = cache->Stats();
  const double elapsed = static_cast<double>(t1.tv_sec - t0.tv_sec) +
                         static_cast<double>(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  const double n = static_cast<double>(total_reads.load());
  std::printf(
      "model=%s threads=%u reads=%.0f reads_per_s=%.0f cpu_us_per_read=%.2f "
      "timer_thread_us_per_read=%.2f allocations_per_read=%.2f misses=%lu hits=%lu\n",
      model.c_str(), threads, n, n / elapsed, cpu / n * 1e6, timer / n * 1e6,
      static_cast<double>(allocations) / n,
      static_cast<unsigned long>(after.demand_misses - before.demand_misses),
      static_cast<unsigned long>(after.demand_hits - before.demand_hits));
  cache.reset();
  return 0;
}

}  // namespace
}  // namespace tipfs::bench

int main(int argc, char** argv) { return tipfs::bench::Main(argc, argv); }
