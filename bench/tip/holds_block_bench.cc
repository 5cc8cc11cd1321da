// Not a test: the cost of HintStream::HoldsBlock, which TipManager::FirstBlockHeldElsewhere calls
// under the manager's lock for every block of a speculative read and of a hint from a process
// with another stream (a speculating child beside the replay of its last run). The stream is the
// hinted reader of issue 16's competition: 4,000 random blocks of an 8,192-block file, one
// segment each, 256 of them expanded (the lookahead window); random probes, 38% of them held.
//   holds_block_bench [segments] [probes]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cache/hint_stream.h"

int main(int argc, char** argv) {
  using tipfs::cache::HintSegment;
  using tipfs::cache::HintSource;
  using tipfs::cache::HintStream;
  constexpr uint32_t kBlock = 65536;
  const uint64_t segments = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 4000;
  const uint64_t probes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 200'000;
  std::mt19937_64 rng(16);
  HintStream s(1, 100, kBlock, 0);
  for (uint64_t i = 0; i < segments; ++i) {
    s.Append(HintSegment{7, (rng() % 8192) * kBlock, kBlock, 8192ull * kBlock, 0,
                         HintSource::kSpeculative});
  }
  s.Expand(256);
  uint64_t held = 0;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < probes; ++i) held += s.HoldsBlock(7, rng() % 8192) ? 1 : 0;
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  std::printf("segments %llu, probes %llu: %.1f ns per HoldsBlock (%llu held)\n",
              static_cast<unsigned long long>(segments), static_cast<unsigned long long>(probes),
              ns / static_cast<double>(probes), static_cast<unsigned long long>(held));
  // What the indexes cost the streams' other work: a stream as long appended, then consumed
  // in order by its reader (each read expands and consumes one access).
  std::mt19937_64 order(17);
  HintStream reader(2, 100, kBlock, 0);
  std::vector<uint64_t> blocks;
  tipfs::cache::StreamRelease release;
  const auto consume_start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < segments; ++i) {
    blocks.push_back(order() % 8192);
    reader.Append(
        HintSegment{7, blocks.back() * kBlock, kBlock, 8192ull * kBlock, 0, HintSource::kManual});
  }
  for (uint64_t b : blocks) {
    reader.Match(7, b * kBlock, kBlock, 1, &release);
    release.Clear();
  }
  const double consume_ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - consume_start)
          .count();
  std::printf("append and consume: %.1f ns per hinted block (%llu consumed)\n",
              consume_ns / static_cast<double>(segments),
              static_cast<unsigned long long>(reader.blocks_consumed));
  return 0;
}
