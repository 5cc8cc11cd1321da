// Hits without the cache's lock (cache/block_shards.h): a read by a process no hint names, whose
// blocks are all cached, takes only its blocks' shard mutexes and defers its queue updates. What
// a user would notice if that went wrong: counters that miss hits, an LRU that evicts what was
// just read, a hinter whose hits escape its hints' consumption, and (under the sanitizers: label
// sanitize) bytes that a concurrent write or eviction tore or made stale.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
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

constexpr uint32_t kBlock = 4096;
constexpr uint64_t kIno = 7;
const ReadContext kReader{100, 100};

TEST(UnlockedHitsTest, HitsAreCountedAndMoveTheirBlocksAsIfTheyHadTakenTheLock) {
  // Four buffers. Blocks 0-3 are read (misses, LRU order 3 2 1 0 from warm to cold), then
  // block 0 again: a hit without the lock, which must make 0 the warmest, so that reading block
  // 4 evicts block 1, the coldest after it, not block 0.
  CacheRig rig(1, kBlock, TestOptions(4, kBlock));
  const std::string data = RandomBytes(8 * kBlock, 1);
  ASSERT_TRUE(rig.cache->Write(kIno, 0, data.data(), data.size()).ok());
  for (uint64_t b = 0; b < 4; ++b) {
    ASSERT_EQ(rig.Read(kReader, kIno, b * kBlock, kBlock, data.size()),
              data.substr(b * kBlock, kBlock));
  }
  const CacheStats before = rig.cache->Stats();
  EXPECT_EQ(rig.Read(kReader, kIno, 100, 200, data.size()), data.substr(100, 200));
  EXPECT_EQ(rig.Read(kReader, kIno, 4 * kBlock, kBlock, data.size()),
            data.substr(4 * kBlock, kBlock));
  EXPECT_TRUE(rig.cache->Contains(kIno, 0));
  EXPECT_FALSE(rig.cache->Contains(kIno, 1));
  const CacheStats after = rig.cache->Stats();
  EXPECT_EQ(after.hits_without_table_lock - before.hits_without_table_lock, 1u);
  EXPECT_EQ(after.demand_hits - before.demand_hits, 1u);
  EXPECT_EQ(after.demand_reads - before.demand_reads, 2u);
  EXPECT_EQ(after.demand_misses - before.demand_misses, 1u);
}

TEST(UnlockedHitsTest, AReadAcrossBlocksIsOneReadAndEveryBlockAHit) {
  CacheRig rig(1, 64 * 1024, TestOptions(16, kBlock));
  const std::string data = RandomBytes(8 * kBlock, 2);
  ASSERT_TRUE(rig.cache->Write(kIno, 0, data.data(), data.size()).ok());
  ASSERT_EQ(rig.Read(kReader, kIno, 0, data.size(), data.size()), data);  // misses
  const CacheStats before = rig.cache->Stats();
  EXPECT_EQ(rig.Read(kReader, kIno, kBlock - 10, 3 * kBlock, data.size()),
            data.substr(kBlock - 10, 3 * kBlock));
  const CacheStats after = rig.cache->Stats();
  EXPECT_EQ(after.demand_reads - before.demand_reads, 1u);
  EXPECT_EQ(after.demand_hits - before.demand_hits, 4u);
  EXPECT_EQ(after.hits_without_table_lock - before.hits_without_table_lock, 4u);
  EXPECT_EQ(after.demand_misses, before.demand_misses);
}

TEST(UnlockedHitsTest, AHintersHitsTakeTheLockAndConsumeItsHints) {
  // A process with a hint stream: its read must consume the hinted access before it returns,
  // so its hits are applied under the lock, in order with the consumption.
  CacheRig rig(1, 64 * 1024, TestOptions(16, kBlock));
  const std::string data = RandomBytes(4 * kBlock, 3);
  ASSERT_TRUE(rig.cache->Write(kIno, 0, data.data(), data.size()).ok());
  const ReadContext hinter{300, 300};
  ASSERT_EQ(rig.Read(hinter, kIno, 0, data.size(), data.size()), data);
  HintBatch batch;
  batch.stream = 300;
  batch.owner = 300;
  batch.extents.push_back(HintExtent{kIno, kBlock, kBlock, data.size()});
  ASSERT_TRUE(rig.cache->Hint(batch).ok());
  const CacheStats before = rig.cache->Stats();
  EXPECT_EQ(rig.Read(hinter, kIno, kBlock, kBlock, data.size()), data.substr(kBlock, kBlock));
  const CacheStats after = rig.cache->Stats();
  EXPECT_EQ(after.demand_hits - before.demand_hits, 1u);
  EXPECT_EQ(after.hits_without_table_lock, before.hits_without_table_lock);
  EXPECT_EQ(rig.cache->QueryStream(300).blocks_consumed, 1u);
  // Another process reading the same block is named by no hint: no lock.
  EXPECT_EQ(rig.Read(kReader, kIno, kBlock, kBlock, data.size()), data.substr(kBlock, kBlock));
  EXPECT_EQ(rig.cache->Stats().hits_without_table_lock - after.hits_without_table_lock, 1u);
}

TEST(UnlockedHitsTest, ReadersHittingWhileOthersEvictAndWriteGetTheirFilesBytes) {
  // Readers of two hot files hit without the lock while a cold reader streams through a third
  // file, so the cache (48 buffers) evicts all the time, and a writer rewrites pages of the hot
  // files with a new generation each time. Every page a reader gets is one generation's whole
  // page, at least as new as the last write to it that returned before the read began; every
  // block read is counted once, as a hit or a miss.
  constexpr uint64_t kHotPages = 16;
  constexpr uint64_t kColdPages = 256;
  constexpr int kReaders = 3;
  constexpr int kReadsEach = 3000;
  CacheRig rig(2, kBlock, TestOptions(48, kBlock));
  auto page_of = [](uint64_t ino, uint64_t page, uint32_t gen) {
    std::string bytes(kBlock, '\0');
    const uint64_t w = ino << 48 | page << 32 | gen;
    for (size_t i = 0; i < kBlock; i += sizeof w) std::memcpy(bytes.data() + i, &w, sizeof w);
    return bytes;
  };
  for (uint64_t ino : {1, 2}) {
    for (uint64_t p = 0; p < kHotPages; ++p) {
      const std::string bytes = page_of(ino, p, 0);
      ASSERT_TRUE(rig.cache->Write(ino, p * kBlock, bytes.data(), kBlock).ok());
    }
  }
  const std::string cold = RandomBytes(kColdPages * kBlock, 9);
  ASSERT_TRUE(rig.cache->Write(3, 0, cold.data(), cold.size()).ok());
  std::vector<std::atomic<uint32_t>> written(2 * kHotPages);  // last returned generation
  std::atomic<int> readers_left{kReaders};
  std::atomic<int> failures{0};
  std::atomic<uint64_t> blocks_read{0};
  std::atomic<uint64_t> reads{0};

  std::vector<std::thread> threads;
  threads.emplace_back([&] {  // the writer
    std::mt19937_64 rng(1);
    for (uint32_t gen = 1; readers_left.load() > 0; ++gen) {
      const uint64_t slot = rng() % written.size();
      const std::string bytes = page_of(1 + slot / kHotPages, slot % kHotPages, gen);
      if (!rig.cache->Write(1 + slot / kHotPages, slot % kHotPages * kBlock, bytes.data(), kBlock)
               .ok()) {
        ++failures;
      }
      written[slot].store(gen, std::memory_order_release);
    }
  });
  threads.emplace_back([&] {  // the cold reader
    const ReadContext ctx{900, 900};
    for (uint64_t i = 0; readers_left.load() > 0; ++i) {
      const uint64_t page = i % kColdPages;
      if (rig.Read(ctx, 3, page * kBlock, kBlock, cold.size()) !=
          cold.substr(page * kBlock, kBlock)) {
        ++failures;
      }
      reads.fetch_add(1);
      blocks_read.fetch_add(1);
    }
  });
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(100 + r);
      const ReadContext ctx{uint64_t(200 + r), 200u + static_cast<uint32_t>(r)};
      for (int i = 0; i < kReadsEach; ++i) {
        const uint64_t slot = rng() % written.size();
        const uint64_t ino = 1 + slot / kHotPages;
        const uint64_t page = slot % kHotPages;
        const uint32_t floor = written[slot].load(std::memory_order_acquire);
        const std::string got = rig.Read(ctx, ino, page * kBlock, kBlock, kHotPages * kBlock);
        uint64_t first = 0;
        if (got.size() == kBlock) std::memcpy(&first, got.data(), sizeof first);
        const bool whole = got.size() == kBlock && got == page_of(ino, page, first & 0xffffffff);
        if (!whole || first >> 32 != (ino << 16 | page) || (first & 0xffffffff) < floor) {
          ++failures;
        }
        reads.fetch_add(1);
        blocks_read.fetch_add(1);
      }
      readers_left.fetch_sub(1);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  const CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.demand_reads, reads.load());
  EXPECT_EQ(stats.demand_hits + stats.demand_misses, blocks_read.load());
  EXPECT_GT(stats.hits_without_table_lock, 0u);
  EXPECT_GT(stats.evictions, 0u);
  EXPECT_LE(stats.hits_without_table_lock, stats.demand_hits);
}

}  // namespace
}  // namespace tipfs::cache
