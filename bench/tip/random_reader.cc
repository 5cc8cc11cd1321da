// tipfs-tip-random-reader: reads N distinct blocks of one large file in a random order (seeded),
// one pread() per block, as a program with a known random access list does (a sample loader,
// a database scan by index). With --hints on it first discloses the whole order through
// TIPFS_IOC_HINT_FD (1,020 segments per call); with --hints off it is the original program.
// The bytes read are checksummed so that runs can be compared; off a tipfs mount the hints fail
// with ENOTTY and the program says so once and reads on.
//
// Output (one line on stdout):
//   random_reader hints=on blocks=N block=65536 bytes=.. elapsed=..s mb_per_s=.. mib_per_s=..
//   hint_calls=.. hint_seconds=.. user=..s sys=..s checksum=..
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tipfs/hint.h"

namespace {

double Seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; }

uint64_t Fnv1a(uint64_t hash, const char* data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    hash ^= static_cast<unsigned char>(data[i]);
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Read N random blocks of a file, optionally hinted (tipfs bench/tip)"};
  std::string path, hints = "on";
  uint64_t blocks = 1000, block_size = 64 * 1024, seed = 1;
  app.add_option("--file", path, "The file to read")->required();
  app.add_option("--blocks", blocks, "Distinct blocks to read (default 1000)");
  app.add_option("--block-size", block_size, "Bytes per read, block-aligned (default 65536)");
  app.add_option("--seed", seed, "Order seed (default 1)");
  app.add_option("--hints", hints, "on: disclose the order first; off: the original")
      ->check(CLI::IsMember({"on", "off"}));
  CLI11_PARSE(app, argc, argv);

  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    std::fprintf(stderr, "random_reader: %s: %s\n", path.c_str(), std::strerror(errno));
    return 1;
  }
  const uint64_t file_blocks = static_cast<uint64_t>(st.st_size) / block_size;
  if (block_size == 0 || blocks == 0 || blocks > file_blocks) {
    std::fprintf(stderr,
                 "random_reader: %s has %" PRIu64 " whole blocks of %" PRIu64 ", asked for %" PRIu64
                 "\n",
                 path.c_str(), file_blocks, block_size, blocks);
    return 2;
  }
  std::vector<uint64_t> order(file_blocks);
  std::iota(order.begin(), order.end(), uint64_t{0});
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  order.resize(blocks);

  const auto start = std::chrono::steady_clock::now();
  uint64_t hint_calls = 0;
  double hint_seconds = 0;
  if (hints == "on") {
    std::vector<tipfs_segment> segments(blocks);
    for (uint64_t i = 0; i < blocks; ++i) segments[i] = {order[i] * block_size, block_size};
    const auto t0 = std::chrono::steady_clock::now();
    if (tipfs_hint_segments(fd, segments.data(), segments.size(), TIPFS_SOURCE_MANUAL) != 0) {
      std::fprintf(stderr, "random_reader: hints refused (%s); reading without them\n",
                   std::strerror(errno));
    }
    hint_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    hint_calls = (blocks + TIPFS_FD_SEGMENTS_MAX - 1) / TIPFS_FD_SEGMENTS_MAX;
  }
  std::vector<char> buffer(block_size);
  uint64_t checksum = 14695981039346656037ull, bytes = 0;
  for (uint64_t b : order) {
    const ssize_t n = pread(fd, buffer.data(), block_size, static_cast<off_t>(b * block_size));
    if (n != static_cast<ssize_t>(block_size)) {
      std::fprintf(stderr, "random_reader: pread of block %" PRIu64 ": %s\n", b,
                   n < 0 ? std::strerror(errno) : "short read");
      return 1;
    }
    checksum = Fnv1a(checksum, buffer.data(), block_size);
    bytes += block_size;
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  close(fd);
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  std::printf("random_reader hints=%s blocks=%" PRIu64 " block=%" PRIu64 " bytes=%" PRIu64
              " elapsed=%.4fs mb_per_s=%.3f mib_per_s=%.3f hint_calls=%" PRIu64
              " hint_seconds=%.6f user=%.4fs sys=%.4fs checksum=%016" PRIx64 "\n",
              hints.c_str(), blocks, block_size, bytes, elapsed, bytes / elapsed / 1e6,
              bytes / elapsed / 1048576.0, hint_calls, hint_seconds, Seconds(usage.ru_utime),
              Seconds(usage.ru_stime), checksum);
  return 0;
}
