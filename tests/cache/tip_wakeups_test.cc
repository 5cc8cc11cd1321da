// When the TIP manager runs (issue 11): only when a round can decide something. Unhinted reads
// and their completions, with no stream, no read-ahead run and the table within capacity, run no
// round and (with the manager's thread) never wake it; a hint is acted on at once all the same.
// On a FakeClock over modelled disks (10 ms per random request), as tip_test.cc.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/file_cache.h"
#include "tests/cache/cache_rig.h"

namespace tipfs::cache {
namespace {

using testing::CacheRig;
using testing::RandomBytes;
using testing::TestOptions;
using testing::Wrap;

constexpr uint32_t kBlock = 4096;
constexpr uint64_t kFileBlocks = 256;
constexpr uint64_t kCacheBlocks = 32;            // the random reads below miss and evict
constexpr int64_t kTenMs = 10 * kNanosPerMilli;  // each disk's access time

std::string WriteFile(CacheRig& rig, uint64_t ino) {
  std::string data = RandomBytes(kFileBlocks * kBlock, ino);
  rig.WriteUnderneath(ino, data);
  return data;
}

// Reads [offset, offset + 4 KiB) of `ino` as process `pid`, advancing the clock until the read
// completes. With the manager's thread, a fetch may be submitted by that thread a little later
// (it drains the cache's queued fetches too): then the clock has nothing to advance to yet and
// this gives the thread time, waiting for the outcome, not for a time.
std::string ReadBlock(CacheRig& rig, uint32_t pid, uint64_t ino, uint64_t block,
                      const std::string& data) {
  std::string out(kBlock, '\x5a');
  std::atomic<bool> done{false};
  Result<size_t> result = size_t{0};
  rig.cache->ReadAsync(ReadContext{pid, pid}, ino, block * kBlock, kBlock, data.size(), out.data(),
                       [&](Result<size_t> r) {
                         result = std::move(r);
                         done.store(true);
                       });
  for (int i = 0; i < 20000 && !done.load(); ++i) {
    if (!rig.clock.AdvanceToNext()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  EXPECT_TRUE(done.load()) << "read of block " << block << " never completed";
  if (!done.load() || !result.ok()) return std::string();
  return out;
}

// `reads` random 4 KiB reads of `ino` by process 7 (no hints), each checked byte for byte. Even
// blocks other than 0 only: no two reads make a sequential run (nor does a read from the start).
void ReadRandomly(CacheRig& rig, uint64_t ino, const std::string& data, int reads) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < reads; ++i) {
    const uint64_t block = 2 + 2 * (rng() % (kFileBlocks / 2 - 1));
    rig.clock.Advance(kNanosPerMilli);
    ASSERT_EQ(ReadBlock(rig, 7, ino, block, data), data.substr(block * kBlock, kBlock))
        << "read " << i << ", block " << block;
  }
}

// Hints blocks 200..207 of `ino` (a file the random reads do not touch) for process 9, in order.
HintBatch EightBlocks(uint64_t ino) {
  HintBatch b;
  b.stream = 9;
  b.owner = 9;
  for (uint64_t i = 200; i < 208; ++i) {
    b.extents.push_back(HintExtent{ino, i * kBlock, kBlock, kFileBlocks * kBlock});
  }
  return b;
}

TEST(TipWakeupsTest, UnhintedReadsRunNoRoundAndAHintIsPrefetchedAtOnce) {
  for (const bool readahead : {false, true}) {
    SCOPED_TRACE(readahead ? "read-ahead on" : "read-ahead off");
    CacheOptions o = TestOptions(kCacheBlocks);
    o.readahead = readahead;  // random reads start no run: nothing for it to do either
    CacheRig rig(4, kBlock, o, Wrap::kNone, testing::EmulatedDisks(kTenMs));
    const std::string data = WriteFile(rig, 1);
    const std::string hinted = WriteFile(rig, 2);
    ReadRandomly(rig, 1, data, 300);
    CacheStats stats = rig.cache->Stats();
    EXPECT_GT(stats.demand_misses, 200u);
    EXPECT_EQ(stats.manager_rounds, 0u);
    if (readahead) {
      // A sequential run is a decision: its second read has read-ahead issued at once.
      for (uint64_t b = 51; b <= 53; ++b) {
        ASSERT_EQ(ReadBlock(rig, 7, 1, b, data), data.substr(b * kBlock, kBlock));
      }
      EXPECT_GT(rig.cache->Stats().manager_rounds, 0u);
      EXPECT_GT(rig.cache->Stats().readahead_issued, 0u);
      EXPECT_TRUE(rig.cache->Contains(1, 54));
    }

    // A hint needs decisions: it is prefetched by the hint call's own round, before any read.
    ASSERT_TRUE(rig.cache->Hint(EightBlocks(2)).ok());
    stats = rig.cache->Stats();
    EXPECT_GT(stats.manager_rounds, 0u);
    EXPECT_TRUE(rig.cache->Contains(2, 200));
    // Consumed exactly, each block once, the bytes right.
    for (uint64_t b = 200; b < 208; ++b) {
      rig.clock.Advance(kNanosPerMilli);
      ASSERT_EQ(ReadBlock(rig, 9, 2, b, hinted), hinted.substr(b * kBlock, kBlock))
          << "block " << b;
    }
    EXPECT_EQ(rig.cache->QueryStream(9).blocks_consumed, 8u);
    EXPECT_EQ(rig.cache->Stats().hinted_prefetched, 8u);
  }
}

// With its own thread (the mount's default): unhinted reads never wake it; a hint does, and its
// blocks are prefetched without any read asking for them.
TEST(TipWakeupsTest, UnhintedReadsNeverWakeTheManagerThread) {
  CacheOptions o = TestOptions(kCacheBlocks);
  o.manager_thread = true;
  CacheRig rig(4, kBlock, o, Wrap::kNone, testing::EmulatedDisks(kTenMs));
  const std::string data = WriteFile(rig, 1);
  const std::string hinted = WriteFile(rig, 2);
  ReadRandomly(rig, 1, data, 300);
  CacheStats stats = rig.cache->Stats();
  EXPECT_GT(stats.demand_misses, 200u);
  EXPECT_EQ(stats.manager_wakeups, 0u);
  EXPECT_EQ(stats.manager_rounds, 0u);

  ASSERT_TRUE(rig.cache->Hint(EightBlocks(2)).ok());
  // The thread runs on its own schedule: this waits for the outcome, not for a time.
  for (int i = 0; i < 20000 && rig.cache->Stats().hinted_prefetched < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    rig.clock.Advance(kNanosPerMilli);
  }
  stats = rig.cache->Stats();
  EXPECT_EQ(stats.hinted_prefetched, 8u);
  EXPECT_GT(stats.manager_wakeups, 0u);
  const uint64_t requests = rig.DiskRequests();
  for (uint64_t b = 200; b < 208; ++b) {
    ASSERT_EQ(rig.Read(ReadContext{9, 9}, 2, b * kBlock, kBlock, hinted.size()),
              hinted.substr(b * kBlock, kBlock));
  }
  EXPECT_EQ(rig.DiskRequests(), requests);  // every hinted block was already there
  EXPECT_EQ(rig.cache->QueryStream(9).blocks_consumed, 8u);
}

}  // namespace
}  // namespace tipfs::cache
