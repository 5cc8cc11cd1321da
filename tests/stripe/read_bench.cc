// stripe_read_bench: throughput of StripedIo::Read over a 4-disk PosixDisk volume on the local
// file system (warm page cache) against plain pread of the same bytes. A measurement, not a test:
//   stripe_read_bench [DIR] [FILE_MiB] [PASSES]
// DIR (default $TMPDIR or /tmp) receives a temporary volume and a native copy, removed at the end.
// Prints one line per variant: block size, MiB/s (best wall-clock pass) and process CPU time per
// read (user + system, all threads), each with its ratio to native pread.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "stripe/mkfs.h"
#include "stripe/striped_io.h"
#include "stripe/volume.h"
#include "util/mutex.h"

namespace {

using tipfs::CondVar;
using tipfs::Mutex;
using tipfs::MutexLock;
using tipfs::stripe::DiskRequest;
using tipfs::stripe::StripedIo;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// CPU time of the whole process (every thread, user + system): less sensitive than wall time to
// other load on a shared machine.
double CpuSeconds() {
  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct Measure {
  double mibps = 0;          // best wall-clock throughput over the passes
  double cpu_us_per_op = 0;  // lowest process CPU time per read over the passes
};

template <typename F>
Measure Best(int passes, uint64_t bytes, uint64_t block, F pass) {
  Measure best;
  best.cpu_us_per_op = 1e30;
  for (int p = 0; p < passes; ++p) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = CpuSeconds();
    pass();
    best.mibps = std::max(best.mibps, bytes / (1024.0 * 1024.0) / Seconds(start));
    best.cpu_us_per_op =
        std::min(best.cpu_us_per_op, (CpuSeconds() - cpu_start) * 1e6 / (bytes / block));
  }
  return best;
}

void Die(const std::string& what) {
  std::fprintf(stderr, "stripe_read_bench: %s\n", what.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const char* env_tmp = std::getenv("TMPDIR");
  const std::string base = argc > 1 ? argv[1] : (env_tmp && *env_tmp ? env_tmp : "/tmp");
  const uint64_t file_bytes = (argc > 2 ? std::stoull(argv[2]) : 512) << 20;
  const int passes = argc > 3 ? std::stoi(argv[3]) : 3;

  std::string tmpl = base + "/tipfs-read-bench-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) Die("mkdtemp " + tmpl + ": " + std::strerror(errno));
  const std::string root = tmpl;
  std::vector<std::string> disks;
  for (int i = 0; i < 4; ++i) {
    disks.push_back(root + "/d" + std::to_string(i));
    std::filesystem::create_directory(disks.back());
  }
  tipfs::stripe::MkfsOptions mkfs;
  mkfs.disks = disks;
  if (auto l = tipfs::stripe::Mkfs(mkfs); !l.ok()) Die(l.status().ToString());
  auto volume = tipfs::stripe::Volume::Open(disks[0], tipfs::stripe::OpenOptions());
  if (!volume.ok()) Die(volume.status().ToString());
  StripedIo io(volume->get());

  // The same bytes twice: striped as file 17, and as one native file.
  const std::string native = root + "/native";
  const int nfd = ::open(native.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (nfd < 0) Die("open " + native);
  std::vector<char> chunk(8 << 20);
  std::mt19937_64 rng(1);
  for (uint64_t off = 0; off < file_bytes; off += chunk.size()) {
    for (auto& c : chunk) c = static_cast<char>(rng());
    if (!io.Write(17, off, chunk.data(), chunk.size()).ok()) Die("write volume");
    if (::pwrite(nfd, chunk.data(), chunk.size(), static_cast<off_t>(off)) !=
        static_cast<ssize_t>(chunk.size())) {
      Die("write native");
    }
  }

  std::printf("file %llu MiB, 4 disks, stripe unit %u KiB, best of %d passes, warm cache\n",
              static_cast<unsigned long long>(file_bytes >> 20),
              (*volume)->layout().stripe_unit() / 1024, passes);
  std::printf("%-44s %8s %10s %8s %10s %8s\n", "variant", "block", "MiB/s", "vs pread", "CPU us/op",
              "vs pread");
  for (uint64_t block : {uint64_t{128} << 10, uint64_t{4} << 10}) {
    std::vector<char> buf(block);
    // Warm both copies.
    for (uint64_t off = 0; off < file_bytes; off += block) {
      (void)io.Read(17, off, block, buf.data());
      (void)::pread(nfd, buf.data(), block, static_cast<off_t>(off));
    }
    const Measure native = Best(passes, file_bytes, block, [&] {
      for (uint64_t off = 0; off < file_bytes; off += block) {
        if (::pread(nfd, buf.data(), block, static_cast<off_t>(off)) != static_cast<ssize_t>(block))
          Die("pread");
      }
    });
    const Measure striped = Best(passes, file_bytes, block, [&] {
      for (uint64_t off = 0; off < file_bytes; off += block) {
        if (!io.Read(17, off, block, buf.data()).ok()) Die("striped read");
      }
    });
    // Eight reads outstanding at once from one thread, as a prefetcher would issue them.
    constexpr int kDepth = 8;
    std::vector<std::vector<char>> bufs(kDepth, std::vector<char>(block));
    const Measure async = Best(passes, file_bytes, block, [&] {
      Mutex mu;
      CondVar cv;
      int outstanding = 0;
      uint64_t next = 0;
      int slot = 0;
      while (next < file_bytes) {
        {
          MutexLock lock(&mu);
          while (outstanding >= kDepth) cv.Wait(&mu);
          ++outstanding;
        }
        io.ReadAsync(17, next, block, bufs[slot].data(), DiskRequest::Priority::kPrefetch,
                     [&](tipfs::Status s) {
                       if (!s.ok()) Die("async read");
                       MutexLock lock(&mu);
                       --outstanding;
                       cv.Signal();
                     });
        next += block;
        slot = (slot + 1) % kDepth;
      }
      MutexLock lock(&mu);
      while (outstanding != 0) cv.Wait(&mu);
    });
    auto row = [&](const char* name, const Measure& m) {
      std::printf("%-44s %7lluK %10.0f %8.2f %10.2f %8.2f\n", name,
                  static_cast<unsigned long long>(block >> 10), m.mibps, m.mibps / native.mibps,
                  m.cpu_us_per_op, m.cpu_us_per_op / native.cpu_us_per_op);
    };
    row("pread of one native file", native);
    row("StripedIo::Read (blocking, 1 thread)", striped);
    row("StripedIo::ReadAsync (8 in flight, 1 thread)", async);
  }
  ::close(nfd);
  volume->reset();
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  return 0;
}
