// FileCache hint entry points and read-path policies that need no disk timing: validation, caps
// and their errnos, --hints=ignore, cancellation, speculative readers, read-ahead, per-disk
// prefetch bounds.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "cache/file_cache.h"
#include "tests/cache/cache_rig.h"

namespace tipfs::cache {
namespace {

using testing::CacheRig;
using testing::RandomBytes;
using testing::TestOptions;
using testing::Wrap;

constexpr uint32_t kUnit = 4096;
constexpr uint32_t kBlock = 4096;

HintBatch Batch(uint64_t stream, uint32_t owner, uint64_t ino, uint64_t file_size,
                std::vector<std::pair<uint64_t, uint64_t>> ranges,
                HintSource source = HintSource::kManual, uint32_t epoch = 0) {
  HintBatch b;
  b.stream = stream;
  b.owner = owner;
  b.source = source;
  b.epoch = epoch;
  for (auto [offset, length] : ranges) {
    b.extents.push_back(HintExtent{ino, offset, length, file_size});
  }
  return b;
}

std::string WriteFile(CacheRig& rig, uint64_t ino, size_t size, uint64_t seed) {
  std::string data = RandomBytes(size, seed);
  EXPECT_TRUE(rig.io->Write(ino, 0, data.data(), data.size()).ok());
  return data;
}

TEST(HintApiTest, ValidationAndClipping) {
  CacheRig rig(2, kUnit, TestOptions(64));
  WriteFile(rig, 1, 10'000, 1);
  HintBatch bad = Batch(100, 100, 1, 10'000, {{UINT64_MAX - 10, 100}});
  EXPECT_EQ(rig.cache->Hint(bad).error(), EINVAL);
  bad = Batch(100, 100, 1, 10'000, {{0, 100}});
  bad.source = static_cast<HintSource>(7);
  EXPECT_EQ(rig.cache->Hint(bad).error(), EINVAL);
  EXPECT_FALSE(rig.cache->QueryStream(100).exists);  // nothing changed
  // Past end of file is clipped; wholly past it, dropped.
  ASSERT_TRUE(rig.cache->Hint(Batch(100, 100, 1, 10'000, {{9'000, 5'000}, {20'000, 10}})).ok());
  StreamInfo info = rig.cache->QueryStream(100);
  EXPECT_TRUE(info.exists);
  EXPECT_EQ(rig.cache->Stats().bytes_hinted[0], 1'000u);
}

TEST(HintApiTest, PerProcessAndGlobalCapsRefuseWithoutChanges) {
  CacheOptions o = TestOptions(64);
  o.per_process_hint_cap_bytes = 100'000;
  o.global_hint_cap_bytes = 150'000;
  o.per_process_hint_segment_cap = 10;
  CacheRig rig(2, kUnit, o);
  WriteFile(rig, 1, 1'000'000, 2);
  ASSERT_TRUE(rig.cache->Hint(Batch(100, 100, 1, 1'000'000, {{0, 80'000}})).ok());
  Status refused = rig.cache->Hint(Batch(100, 100, 1, 1'000'000, {{80'000, 40'000}}));
  EXPECT_EQ(refused.error(), EDQUOT);
  EXPECT_EQ(rig.cache->QueryStream(100).hinted_bytes, 80'000u);
  EXPECT_EQ(rig.cache->QueryStream(100).cap_bytes, 100'000u);
  // Another stream of the same process shares its cap.
  EXPECT_EQ(rig.cache->Hint(Batch(101, 100, 1, 1'000'000, {{0, 30'000}})).error(), EDQUOT);
  EXPECT_FALSE(rig.cache->QueryStream(101).exists);
  // Another process has its own cap, but the mount's cap is shared.
  ASSERT_TRUE(rig.cache->Hint(Batch(200, 200, 1, 1'000'000, {{0, 60'000}})).ok());
  EXPECT_EQ(rig.cache->Hint(Batch(200, 200, 1, 1'000'000, {{0, 20'000}})).error(), ENOBUFS);
  // Segment cap: eleven tiny segments are refused as a whole.
  std::vector<std::pair<uint64_t, uint64_t>> many;
  for (int i = 0; i < 11; ++i) many.emplace_back(i * 10, 1);
  EXPECT_EQ(rig.cache->Hint(Batch(300, 300, 1, 1'000'000, many)).error(), EDQUOT);
  EXPECT_FALSE(rig.cache->QueryStream(300).exists);
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.hints_refused, 4u);
  EXPECT_EQ(stats.outstanding_hinted_bytes, 140'000u);
  // Cancelling gives the room back.
  ASSERT_TRUE(rig.cache->Cancel(100).ok());
  EXPECT_TRUE(rig.cache->Hint(Batch(100, 100, 1, 1'000'000, {{0, 40'000}})).ok());
}

TEST(HintApiTest, ConsumedHintsFreeTheCap) {
  CacheOptions o = TestOptions(64);
  o.per_process_hint_cap_bytes = 8 * kBlock;
  CacheRig rig(2, kUnit, o);
  const std::string data = WriteFile(rig, 1, 16 * kBlock, 3);
  ASSERT_TRUE(rig.cache->Hint(Batch(100, 100, 1, data.size(), {{0, 8 * kBlock}})).ok());
  EXPECT_EQ(rig.cache->Hint(Batch(100, 100, 1, data.size(), {{0, kBlock}})).error(), EDQUOT);
  EXPECT_EQ(rig.Read(ReadContext{100, 100}, 1, 0, 4 * kBlock, data.size()),
            data.substr(0, 4 * kBlock));
  StreamInfo info = rig.cache->QueryStream(100);
  EXPECT_EQ(info.hinted_bytes, 4u * kBlock);
  EXPECT_EQ(info.blocks_consumed, 4u);
  EXPECT_TRUE(rig.cache->Hint(Batch(100, 100, 1, data.size(), {{8 * kBlock, 4 * kBlock}})).ok());
}

TEST(HintApiTest, ProcessesOtherThanTheHinterHitButDoNotConsume) {
  CacheRig rig(2, kUnit, TestOptions(64));
  const std::string data = WriteFile(rig, 1, 4 * kBlock, 16);
  ASSERT_TRUE(rig.cache->Hint(Batch(100, 100, 1, data.size(), {{0, 4 * kBlock}})).ok());
  const uint64_t requests = rig.DiskRequests();
  EXPECT_EQ(rig.Read(ReadContext{200, 200}, 1, 0, data.size(), data.size()), data);
  EXPECT_EQ(rig.DiskRequests(), requests);
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.demand_hits, 4u);
  EXPECT_EQ(stats.hinted_used, 4u);
  EXPECT_EQ(rig.cache->QueryStream(100).blocks_consumed, 0u);
  EXPECT_EQ(rig.cache->QueryStream(100).hinted_bytes, 4u * kBlock);
}

TEST(HintApiTest, IgnoredHintsAreCountedButPrefetchNothing) {
  CacheOptions o = TestOptions(64);
  o.hints_ignored = true;
  CacheRig rig(2, kUnit, o);
  const std::string data = WriteFile(rig, 1, 20 * kBlock, 4);
  const uint64_t requests = rig.DiskRequests();
  ASSERT_TRUE(rig.cache->Hint(Batch(100, 100, 1, data.size(), {{0, 20 * kBlock}})).ok());
  EXPECT_EQ(rig.DiskRequests(), requests);
  for (uint64_t b = 0; b < 20; ++b) EXPECT_FALSE(rig.cache->Contains(1, b));
  EXPECT_FALSE(rig.cache->QueryStream(100).exists);
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.hint_calls, 1u);
  EXPECT_EQ(stats.bytes_hinted[0], 20u * kBlock);
  EXPECT_EQ(stats.hinted_prefetched, 0u);
  // Reads still work (demand fetches only).
  EXPECT_EQ(rig.Read(ReadContext{100, 100}, 1, 0, data.size(), data.size()), data);
  EXPECT_EQ(rig.cache->Stats().hinted_prefetched, 0u);
  // Switching hints back on at run time: hints act again.
  o.hints_ignored = false;
  ASSERT_TRUE(rig.cache->SetOptions(o).ok());
  ASSERT_TRUE(rig.cache->Hint(Batch(100, 100, 1, data.size(), {{0, kBlock}})).ok());
  EXPECT_TRUE(rig.cache->QueryStream(100).exists);
}

TEST(HintApiTest, CancelByEpochAndByProcess) {
  CacheOptions o = TestOptions(64);
  o.hints_ignored = false;
  CacheRig rig(2, kUnit, o, Wrap::kHeld);  // prefetches stay in flight
  WriteFile(rig, 1, 64 * kBlock, 5);
  rig.HoldAll(true);
  ASSERT_TRUE(
      rig.cache
          ->Hint(Batch(100, 100, 1, 64 * kBlock, {{0, 10 * kBlock}}, HintSource::kSpeculative, 1))
          .ok());
  ASSERT_TRUE(rig.cache
                  ->Hint(Batch(100, 100, 1, 64 * kBlock, {{20 * kBlock, 5 * kBlock}},
                               HintSource::kSpeculative, 2))
                  .ok());
  ASSERT_TRUE(rig.cache->Hint(Batch(101, 100, 1, 64 * kBlock, {{40 * kBlock, kBlock}})).ok());
  ASSERT_TRUE(rig.cache->Cancel(100, 1u).ok());
  EXPECT_EQ(rig.cache->QueryStream(100).hinted_bytes, 5u * kBlock);
  EXPECT_EQ(rig.cache->Stats().hinted_cancelled, 10u);
  rig.cache->CancelProcess(100);
  EXPECT_FALSE(rig.cache->QueryStream(100).exists);
  EXPECT_FALSE(rig.cache->QueryStream(101).exists);
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.hinted_cancelled, 16u);
  EXPECT_EQ(stats.outstanding_hinted_bytes, 0u);
  EXPECT_EQ(stats.streams_active, 0u);
  EXPECT_LT(stats.accuracy[1], 1.0);  // speculative hints dropped unread lower its accuracy
  rig.HoldAll(false);
  rig.ReleaseAll();
  // Blocks fetched for cancelled hints are first in line for eviction.
  EXPECT_GT(rig.cache->Stats().evict_first_buffers, 0u);
  EXPECT_EQ(rig.cache->Stats().lru_buffers, 0u);
}

TEST(HintApiTest, PrefetchesAreBoundedPerDiskButDemandReadsAreNot) {
  CacheOptions o = TestOptions(256);
  o.max_prefetches_per_disk = 3;
  CacheRig rig(2, kUnit, o, Wrap::kHeld);
  WriteFile(rig, 1, 100 * kBlock, 6);
  const std::string other = WriteFile(rig, 2, 4 * kBlock, 7);
  rig.HoldAll(true);
  ASSERT_TRUE(rig.cache->Hint(Batch(100, 100, 1, 100 * kBlock, {{0, 100 * kBlock}})).ok());
  EXPECT_EQ(rig.held[0]->held(), 3u);
  EXPECT_EQ(rig.held[1]->held(), 3u);
  std::string out(4 * kBlock, '\0');
  bool done = false;
  rig.cache->ReadAsync(ReadContext{200, 200}, 2, 0, out.size(), other.size(), out.data(),
                       [&](Result<size_t> r) { done = r.ok(); });
  EXPECT_EQ(rig.HeldCount(), 10u);  // four demand blocks went out at once
  rig.HoldAll(false);
  rig.ReleaseAll();
  EXPECT_TRUE(done);
  EXPECT_EQ(out, other);
}

TEST(HintApiTest, ReadaheadGrowsWithTheRunUpTo64Blocks) {
  CacheRig rig(4, kUnit, [] {
    CacheOptions o = TestOptions(512);
    o.readahead = true;
    return o;
  }());
  const std::string data = WriteFile(rig, 1, 300 * kBlock, 8);
  const ReadContext reader{100, 100};
  // After the first block the window is 1; after k blocks, min(k, 64).
  ASSERT_EQ(rig.Read(reader, 1, 0, kBlock, data.size()), data.substr(0, kBlock));
  EXPECT_TRUE(rig.cache->Contains(1, 1));
  EXPECT_FALSE(rig.cache->Contains(1, 2));
  ASSERT_EQ(rig.Read(reader, 1, kBlock, kBlock, data.size()), data.substr(kBlock, kBlock));
  EXPECT_TRUE(rig.cache->Contains(1, 3));
  EXPECT_FALSE(rig.cache->Contains(1, 4));
  for (uint64_t b = 2; b < 100; ++b) {
    ASSERT_EQ(rig.Read(reader, 1, b * kBlock, kBlock, data.size()),
              data.substr(b * kBlock, kBlock));
  }
  EXPECT_TRUE(rig.cache->Contains(1, 99 + 64));
  EXPECT_FALSE(rig.cache->Contains(1, 99 + 65));
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.demand_misses, 1u);  // only the very first block
  EXPECT_EQ(stats.readahead_hits, 99u);
  // A random read does not start a run.
  ASSERT_EQ(rig.Read(reader, 1, 250 * kBlock, kBlock, data.size()),
            data.substr(250 * kBlock, kBlock));
  EXPECT_FALSE(rig.cache->Contains(1, 251));
}

TEST(HintApiTest, ReadaheadCanBeSwitchedOff) {
  CacheRig rig(4, kUnit, TestOptions(512));
  const std::string data = WriteFile(rig, 1, 40 * kBlock, 9);
  for (uint64_t b = 0; b < 20; ++b) {
    ASSERT_EQ(rig.Read(ReadContext{100, 100}, 1, b * kBlock, kBlock, data.size()),
              data.substr(b * kBlock, kBlock));
  }
  EXPECT_FALSE(rig.cache->Contains(1, 20));
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.readahead_issued, 0u);
  EXPECT_EQ(stats.demand_misses, 20u);
}

ReadContext Speculative(uint64_t parent, uint32_t epoch, bool wait = false) {
  ReadContext c{900, 900};
  c.speculative = true;
  c.wait_for_data = wait;
  c.spec_stream = parent;
  c.spec_epoch = epoch;
  return c;
}

TEST(HintApiTest, SpeculativeReaderNeverWaitsAndNeverInsertsData) {
  CacheOptions o = TestOptions(64);
  o.hints_ignored = true;  // so that no prefetch can bring the block in either
  CacheRig rig(2, kUnit, o);
  const std::string data = WriteFile(rig, 1, 8 * kBlock, 10);
  const uint64_t requests = rig.DiskRequests();
  int error = 0;
  EXPECT_EQ(rig.Read(Speculative(100, 1), 1, 0, 100, data.size(), &error), "");
  EXPECT_EQ(error, EAGAIN);
  EXPECT_EQ(rig.DiskRequests(), requests);
  EXPECT_FALSE(rig.cache->Contains(1, 0));
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.spec_eagain, 1u);
  EXPECT_EQ(stats.demand_reads, 0u);
  EXPECT_EQ(stats.bytes_hinted[1], 100u);  // counted even when ignored
}

TEST(HintApiTest, SpeculativeReadsBecomeHintsOfTheParentsStream) {
  CacheRig rig(2, kUnit, TestOptions(64), Wrap::kHeld);
  const std::string data = WriteFile(rig, 1, 8 * kBlock, 11);
  rig.HoldAll(true);
  int error = 0;
  EXPECT_EQ(rig.Read(Speculative(100, 3), 1, kBlock, 2 * kBlock, data.size(), &error), "");
  EXPECT_EQ(error, EAGAIN);
  StreamInfo info = rig.cache->QueryStream(100);
  ASSERT_TRUE(info.exists);
  EXPECT_EQ(info.hinted_bytes, 2u * kBlock);
  // The hint is prefetched from the disk (real bytes), not filled by the speculative read.
  EXPECT_EQ(rig.HeldCount(), 2u);
  rig.HoldAll(false);
  rig.ReleaseAll();
  // The parent's read matches and consumes the speculative hint; it is served from the cache.
  const uint64_t requests = rig.DiskRequests();
  EXPECT_EQ(rig.Read(ReadContext{100, 100}, 1, kBlock, 2 * kBlock, data.size()),
            data.substr(kBlock, 2 * kBlock));
  EXPECT_EQ(rig.DiskRequests(), requests);
  info = rig.cache->QueryStream(100);
  EXPECT_EQ(info.blocks_consumed, 2u);
  EXPECT_EQ(info.hinted_bytes, 0u);
  // Cached data is returned to a speculative reader without counting as a demand access, and
  // without consuming the parent's stream.
  ASSERT_TRUE(rig.cache->Hint(Batch(100, 100, 1, data.size(), {{kBlock, kBlock}})).ok());
  const CacheStats before = rig.cache->Stats();
  EXPECT_EQ(rig.Read(Speculative(100, 3), 1, kBlock, 100, data.size(), &error),
            data.substr(kBlock, 100));
  EXPECT_EQ(error, 0);
  const CacheStats after = rig.cache->Stats();
  EXPECT_EQ(after.demand_hits, before.demand_hits);
  EXPECT_EQ(after.spec_hits, before.spec_hits + 1);
  EXPECT_EQ(rig.cache->QueryStream(100).blocks_consumed, 2u);
}

TEST(HintApiTest, WaitingSpeculativeReaderGetsTheDataButIsNoDemandAccess) {
  CacheOptions o = TestOptions(64);
  o.hints_ignored = true;
  CacheRig rig(2, kUnit, o);
  const std::string data = WriteFile(rig, 1, 8 * kBlock, 12);
  int error = 0;
  EXPECT_EQ(rig.Read(Speculative(100, 1, /*wait=*/true), 1, 5, 3 * kBlock, data.size(), &error),
            data.substr(5, 3 * kBlock));
  EXPECT_EQ(error, 0);
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.demand_reads, 0u);
  EXPECT_EQ(stats.demand_misses, 0u);
  EXPECT_EQ(stats.spec_reads, 1u);
  EXPECT_EQ(stats.stall_nanos, 0u);
}

TEST(HintApiTest, RemoveDropsTheFilesHints) {
  CacheRig rig(2, kUnit, TestOptions(64), Wrap::kHeld);
  WriteFile(rig, 1, 8 * kBlock, 13);
  WriteFile(rig, 2, 8 * kBlock, 14);
  rig.HoldAll(true);
  ASSERT_TRUE(rig.cache->Hint(Batch(100, 100, 1, 8 * kBlock, {{0, 8 * kBlock}})).ok());
  ASSERT_TRUE(rig.cache->Hint(Batch(100, 100, 2, 8 * kBlock, {{0, 2 * kBlock}})).ok());
  ASSERT_TRUE(rig.cache->Remove(1).ok());
  EXPECT_EQ(rig.cache->QueryStream(100).hinted_bytes, 2u * kBlock);
  rig.HoldAll(false);
  rig.ReleaseAll();
  for (uint64_t b = 0; b < 8; ++b) EXPECT_FALSE(rig.cache->Contains(1, b));
}

TEST(HintApiTest, StreamWhoseReadsStopMatchingRetires) {
  CacheRig rig(2, kUnit, TestOptions(64));
  const std::string data = WriteFile(rig, 1, 200 * kBlock, 15);
  ASSERT_TRUE(rig.cache->Hint(Batch(100, 100, 1, data.size(), {{150 * kBlock, 10 * kBlock}})).ok());
  for (uint64_t b = 0; b < HintStream::kRetireAfterMismatches; ++b) {
    rig.Read(ReadContext{100, 100}, 1, b * kBlock, 10, data.size());
  }
  EXPECT_FALSE(rig.cache->QueryStream(100).exists);
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.streams_retired, 1u);
  EXPECT_EQ(stats.hinted_cancelled, 10u);
  EXPECT_EQ(stats.outstanding_hinted_bytes, 0u);
}

// TIPFS_IOC_QUERY and `tipfs stats` count the cache's buffers by state: held by a hint or in
// flight for one (hinted), in flight for anything else and unheld (fetching), on the LRU or the
// evict-first queue. The counts follow each change of state below, fetches in flight included.
struct BufferCounts {
  uint64_t hinted, fetching, lru, evict_first;
  bool operator==(const BufferCounts&) const = default;
};

std::ostream& operator<<(std::ostream& os, const BufferCounts& c) {
  return os << "hinted " << c.hinted << ", fetching " << c.fetching << ", lru " << c.lru
            << ", evict-first " << c.evict_first;
}

BufferCounts CountsOf(const CacheStats& s) {
  return BufferCounts{s.hinted_buffers, s.fetching_buffers, s.lru_buffers, s.evict_first_buffers};
}

TEST(HintApiTest, BufferCountsFollowFetchesHoldsAndReleases) {
  CacheOptions o = TestOptions(64);
  o.max_prefetches_per_disk = 2;
  CacheRig rig(2, kUnit, o, Wrap::kHeld);
  const std::string data = WriteFile(rig, 1, 32 * kBlock, 8);
  const std::string other = WriteFile(rig, 2, 4 * kBlock, 9);
  rig.HoldAll(true);
  std::vector<std::string> out(4, std::string(kBlock, '\0'));
  int done = 0;
  for (uint64_t b = 0; b < 4; ++b) {
    rig.cache->ReadAsync(ReadContext{200, 200}, 1, b * kBlock, kBlock, data.size(), out[b].data(),
                         [&done](Result<size_t> r) { done += r.ok() ? 1 : 0; });
  }
  EXPECT_EQ(CountsOf(rig.cache->Stats()), (BufferCounts{0, 4, 0, 0}));

  // Blocks 2 and 3, in flight on demand, become hinted; so do the prefetches of 10 and 11.
  ASSERT_TRUE(rig.cache
                  ->Hint(Batch(100, 100, 1, data.size(),
                               {{2 * kBlock, 2 * kBlock}, {10 * kBlock, 2 * kBlock}}))
                  .ok());
  EXPECT_EQ(CountsOf(rig.cache->Stats()), (BufferCounts{4, 2, 0, 0}));

  // A truncate drops a fetch in flight with its block.
  std::string lost(kBlock, '\0');
  rig.cache->ReadAsync(ReadContext{200, 200}, 2, 0, kBlock, other.size(), lost.data(),
                       [](Result<size_t>) {});
  EXPECT_EQ(CountsOf(rig.cache->Stats()), (BufferCounts{4, 3, 0, 0}));
  ASSERT_TRUE(rig.cache->Truncate(2, other.size(), 0).ok());
  EXPECT_EQ(CountsOf(rig.cache->Stats()), (BufferCounts{4, 2, 0, 0}));

  // Prefetched for a hint cancelled while they are in flight, 20 and 21 are held by none but
  // still count as hinted buffers until they arrive.
  ASSERT_TRUE(rig.cache->Hint(Batch(101, 101, 1, data.size(), {{20 * kBlock, 2 * kBlock}})).ok());
  EXPECT_EQ(CountsOf(rig.cache->Stats()), (BufferCounts{6, 2, 0, 0}));
  ASSERT_TRUE(rig.cache->Cancel(101).ok());
  EXPECT_EQ(CountsOf(rig.cache->Stats()), (BufferCounts{6, 2, 0, 0}));

  // Completed, the demand blocks go to the LRU, the cancelled ones to evict-first; the hinted
  // ones stay held.
  rig.HoldAll(false);
  rig.ReleaseAll();
  EXPECT_EQ(done, 4);
  for (uint64_t b = 0; b < 4; ++b) EXPECT_EQ(out[b], data.substr(b * kBlock, kBlock));
  EXPECT_EQ(CountsOf(rig.cache->Stats()), (BufferCounts{4, 0, 2, 2}));

  // Consumed by the hinting process, the demand-fetched blocks join the LRU.
  EXPECT_EQ(rig.Read(ReadContext{100, 100}, 1, 2 * kBlock, 2 * kBlock, data.size()),
            data.substr(2 * kBlock, 2 * kBlock));
  EXPECT_EQ(CountsOf(rig.cache->Stats()), (BufferCounts{2, 0, 4, 2}));

  // Cancelled unread, the prefetched ones are the first to go.
  ASSERT_TRUE(rig.cache->Cancel(100).ok());
  EXPECT_EQ(CountsOf(rig.cache->Stats()), (BufferCounts{0, 0, 4, 4}));
}

}  // namespace
}  // namespace tipfs::cache
