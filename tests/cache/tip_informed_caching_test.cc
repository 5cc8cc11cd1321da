// Informed caching beyond the lookahead window (issue 16, item 1): a block that a hinted reader
// has read and whose reuse its hints disclose further ahead than the prefetcher's window
// (clamp(P, 32, 256) accesses) stays in the cache, valued as TIP values a hinted block at its
// distance, instead of going to the evict-first queue. On a FakeClock over modelled disks (10 ms
// per random request), so every count follows from the policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cache/file_cache.h"
#include "cache/hint_stream.h"
#include "tests/cache/cache_rig.h"

namespace tipfs::cache {
namespace {

using testing::CacheRig;
using testing::RandomBytes;
using testing::TestOptions;
using testing::Wrap;

constexpr uint32_t kBlock = 4096;
constexpr int64_t kMs = kNanosPerMilli;

ReadContext Reader(uint32_t pid) { return ReadContext{pid, pid}; }

// A cache of 512 blocks over 4 disks, full of a file read once (cold LRU blocks nobody reads
// again), and a hinted loop: process 100 reads the same 384 blocks of file 1 in one shuffled
// order three times, all 1,152 reads disclosed up front, 1 ms of computation before each
// (P = 10, so the window is 32 accesses and a block's reuse is 384 accesses ahead).
class HintedLoop {
 public:
  static constexpr uint64_t kCache = 512;
  static constexpr uint64_t kSet = 384;
  static constexpr int kPasses = 3;

  HintedLoop()
      : rig_(4, kBlock, TestOptions(kCache), Wrap::kNone, testing::EmulatedDisks(10 * kMs)) {
    data_ = RandomBytes(kSet * kBlock, 1);
    rig_.WriteUnderneath(1, data_);
    const std::string cold = RandomBytes(kCache * kBlock, 2);
    rig_.WriteUnderneath(2, cold);
    for (uint64_t b = 0; b < kCache; ++b) {
      EXPECT_EQ(rig_.ReadWaiting(Reader(200), 2, b * kBlock, kBlock, cold.size()),
                cold.substr(b * kBlock, kBlock));
    }
    order_.resize(kSet);
    std::iota(order_.begin(), order_.end(), 0);
    std::mt19937 rng(16);
    std::shuffle(order_.begin(), order_.end(), rng);
  }

  Status Hint() {
    HintBatch batch;
    batch.stream = 100;
    batch.owner = 100;
    for (int pass = 0; pass < kPasses; ++pass) {
      for (uint64_t b : order_) {
        batch.extents.push_back(HintExtent{1, b * kBlock, kBlock, data_.size()});
      }
    }
    return rig_.cache->Hint(batch);
  }

  // Reads the first `count` blocks of the order (a whole pass by default).
  void ReadPass(size_t count = kSet) {
    for (uint64_t b : std::vector<uint64_t>(order_.begin(), order_.begin() + count)) {
      rig_.clock.Advance(kMs);
      ASSERT_EQ(rig_.ReadWaiting(Reader(100), 1, b * kBlock, kBlock, data_.size()),
                data_.substr(b * kBlock, kBlock))
          << "block " << b;
    }
  }

  CacheRig& rig() { return rig_; }

 private:
  CacheRig rig_;
  std::string data_;
  std::vector<uint64_t> order_;
};

// The loop's set (384 blocks) is larger than the window but smaller than the cache: after the
// first pass every read hits and no block is fetched again. Before, each block read went to the
// evict-first queue, the prefetches for the next accesses took those first (the cold LRU blocks
// stayed), and the second and third passes fetched the set again.
TEST(TipInformedCachingTest, AHintedLoopOverMoreThanTheWindowHitsFromTheSecondPass) {
  HintedLoop loop;
  ASSERT_TRUE(loop.Hint().ok());
  loop.ReadPass();
  const CacheStats first = loop.rig().cache->Stats();
  for (int pass = 1; pass < HintedLoop::kPasses; ++pass) loop.ReadPass();
  const CacheStats last = loop.rig().cache->Stats();
  const uint64_t reads = (HintedLoop::kPasses - 1) * HintedLoop::kSet;
  std::printf(
      "passes 2-3: %llu of %llu reads hit, %llu blocks prefetched again, stall %.3f s; kept for "
      "reuse %llu, ejected %llu\n",
      static_cast<unsigned long long>(last.demand_hits - first.demand_hits),
      static_cast<unsigned long long>(reads),
      static_cast<unsigned long long>(last.hinted_prefetched - first.hinted_prefetched),
      static_cast<double>(last.stall_nanos - first.stall_nanos) / 1e9,
      static_cast<unsigned long long>(last.hinted_kept_for_reuse),
      static_cast<unsigned long long>(last.hinted_ejected));
  EXPECT_EQ(last.demand_hits - first.demand_hits, reads);
  EXPECT_EQ(last.hinted_prefetched - first.hinted_prefetched, 0u);
  EXPECT_EQ(last.stall_nanos, first.stall_nanos);
  // The first pass's blocks were kept for their next read, at least those read again beyond the
  // window's 256 accesses. (In the later passes the prefetcher's window, which runs on through
  // cached blocks, holds the next pass's blocks before they are read.)
  EXPECT_GE(last.hinted_kept_for_reuse, HintedLoop::kSet - 256);
  EXPECT_EQ(last.hinted_ejected, 0u);
}

// Blocks kept for a reuse are let go with the hints that disclosed it. Cancelled after 300 reads
// of the first pass: the blocks of reads 1-172 are held by the window again (it reaches 256
// accesses ahead, into the second pass), those of reads 173-300 only kept for a reuse beyond it.
// The cancel leaves no block held (once the prefetches in flight are in): the kept ones go to the
// evict-first queue (read as far as anyone disclosed), as do prefetched blocks nobody read.
TEST(TipInformedCachingTest, CancellingTheHintsLetsTheKeptBlocksGo) {
  HintedLoop loop;
  ASSERT_TRUE(loop.Hint().ok());
  loop.ReadPass(300);
  const CacheStats before = loop.rig().cache->Stats();
  EXPECT_GE(before.hinted_buffers, 300u);
  ASSERT_TRUE(loop.rig().cache->Cancel(100, std::nullopt, /*tainted_only=*/false).ok());
  while (loop.rig().clock.AdvanceToNext()) {  // the prefetches in flight complete
  }
  const CacheStats after = loop.rig().cache->Stats();
  std::printf("held %llu before the cancel, %llu after; evict-first %llu, LRU %llu\n",
              static_cast<unsigned long long>(before.hinted_buffers),
              static_cast<unsigned long long>(after.hinted_buffers),
              static_cast<unsigned long long>(after.evict_first_buffers),
              static_cast<unsigned long long>(after.lru_buffers));
  EXPECT_EQ(after.hinted_buffers, 0u);
  EXPECT_GE(after.evict_first_buffers, 100u);
  EXPECT_EQ(after.evict_first_buffers + after.lru_buffers, HintedLoop::kCache);
}

// The distance of a disclosed reuse, through expanded accesses and pending segments alike.
TEST(TipInformedCachingTest, IndexOfFindsTheNextAccessToABlock) {
  HintStream s(1, 1, kBlock, 0);
  s.Append(HintSegment{7, 0, 4 * kBlock, 4 * kBlock});       // blocks 0-3 of file 7
  s.Append(HintSegment{8, kBlock, 2 * kBlock, 8 * kBlock});  // blocks 1-2 of file 8
  s.Append(HintSegment{7, 2 * kBlock, kBlock, 4 * kBlock});  // block 2 of file 7 again
  EXPECT_EQ(s.IndexOf(7, 2, 100), 2u);
  EXPECT_EQ(s.IndexOf(8, 2, 100), 5u);
  EXPECT_EQ(s.IndexOf(8, 2, 5), HintStream::kNotFound);  // beyond the limit
  EXPECT_EQ(s.IndexOf(9, 0, 100), HintStream::kNotFound);
  s.Expand(3);  // blocks 0-2 of file 7 expanded, the rest pending
  StreamRelease r;
  ASSERT_EQ(s.Match(7, 0, 3 * kBlock, 0, &r), HintStream::MatchResult::kMatched);
  EXPECT_EQ(s.popped(), 3u);
  EXPECT_EQ(s.IndexOf(7, 2, 100), 3u);  // the reuse after block 3 and file 8's two blocks
  EXPECT_EQ(s.IndexOf(7, 3, 100), 0u);
}

}  // namespace
}  // namespace tipfs::cache
