// The TIP manager on a FakeClock over modelled disks (EmulatedDisk: one request in service per
// disk, 10 ms positioning per random request). Every number below follows from the model:
// T_disk = 10 ms, T_hit = T_driver = 0 on a clock that does not move while the CPU works, and
// T_cpu set by how far the test advances the clock between reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/file_cache.h"
#include "stripe/emulation/emulated_disk.h"
#include "tests/cache/cache_rig.h"

namespace tipfs::cache {
namespace {

using testing::CacheRig;
using testing::EmulatedDisks;
using testing::RandomBytes;
using testing::TestOptions;
using testing::Wrap;

constexpr uint32_t kBlock = 4096;
constexpr int64_t kMs = kNanosPerMilli;
constexpr int64_t kAccess = 10 * kMs;

// Writes a file straight onto the in-memory disks under the emulation (untimed), as if it had
// been written long ago.
std::string WriteRaw(CacheRig& rig, uint64_t ino, uint64_t blocks, uint64_t seed) {
  std::string data = RandomBytes(blocks * kBlock, seed);
  rig.WriteUnderneath(ino, data);
  return data;
}

// One segment per block, last block first: every request is a random access on its disk.
HintBatch Reverse(uint64_t stream, uint64_t ino, uint64_t blocks,
                  HintSource source = HintSource::kManual, uint32_t epoch = 0) {
  HintBatch b;
  b.stream = stream;
  b.owner = static_cast<uint32_t>(stream);
  b.source = source;
  b.epoch = epoch;
  for (uint64_t i = blocks; i-- > 0;) {
    b.extents.push_back(HintExtent{ino, i * kBlock, kBlock, blocks * kBlock});
  }
  return b;
}

ReadContext Reader(uint32_t pid) { return ReadContext{pid, pid}; }

// Process `pid` reads blocks `blocks`-1 down to 0 of `ino`, one per read, computing `gap`
// before each, and checks every byte.
void ReadDescending(CacheRig& rig, uint32_t pid, uint64_t ino, const std::string& data,
                    int64_t gap) {
  for (uint64_t b = data.size() / kBlock; b-- > 0;) {
    rig.clock.Advance(gap);
    ASSERT_EQ(rig.ReadWaiting(Reader(pid), ino, b * kBlock, kBlock, data.size()),
              data.substr(b * kBlock, kBlock))
        << "block " << b;
  }
}

// One whole-block segment per entry of `blocks`, in that order, on stream (and owner) `stream`.
HintBatch InOrder(uint64_t stream, uint64_t ino, const std::vector<uint64_t>& blocks,
                  uint64_t file_size) {
  HintBatch b;
  b.stream = stream;
  b.owner = static_cast<uint32_t>(stream);
  for (uint64_t block : blocks)
    b.extents.push_back(HintExtent{ino, block * kBlock, kBlock, file_size});
  return b;
}

// Blocks of a 256-block file `ino` on 4 disks: twelve accesses alternating between two disks,
// then twelve alternating between the other two.
std::vector<uint64_t> AlternatingDiskOrder(CacheRig& rig, uint64_t ino) {
  const auto disk_of = [&](uint64_t b) { return rig.io->layout().DiskOfOffset(ino, b * kBlock); };
  std::vector<uint64_t> order;
  for (uint32_t half = 0; half < 2; ++half) {
    std::vector<uint64_t> picked[2];
    const uint32_t first = disk_of(0) + 2 * half;
    for (uint64_t b = 0; b < 256; ++b) {
      const uint32_t d = disk_of(b);
      if (d % 4 == first % 4 && picked[0].size() < 6) picked[0].push_back(b);
      if (d % 4 == (first + 1) % 4 && picked[1].size() < 6) picked[1].push_back(b);
    }
    for (size_t i = 0; i < 6; ++i) order.insert(order.end(), {picked[0][i], picked[1][i]});
  }
  return order;
}

// Process `pid` reads `blocks` of `ino` in that order, computing `gap` before each, and checks
// every byte.
void ReadInOrder(CacheRig& rig, uint32_t pid, uint64_t ino, const std::string& data,
                 const std::vector<uint64_t>& blocks, int64_t gap) {
  for (uint64_t b : blocks) {
    rig.clock.Advance(gap);
    EXPECT_EQ(rig.ReadWaiting(Reader(pid), ino, b * kBlock, kBlock, data.size()),
              data.substr(b * kBlock, kBlock))
        << "block " << b;
  }
}

TEST(TipTest, EstimatorsMeasureDiskTimeAndComputeTime) {
  CacheRig rig(1, kBlock, TestOptions(64), Wrap::kNone, EmulatedDisks(kAccess));
  const std::string data = WriteRaw(rig, 2, 16, 1);
  EXPECT_DOUBLE_EQ(rig.cache->Stats().t_disk_nanos[0], 5.0 * kMs);  // the initial assumption
  for (uint64_t b : {15, 13, 11, 9, 7}) {
    ASSERT_EQ(rig.ReadWaiting(Reader(100), 2, b * kBlock, kBlock, data.size()),
              data.substr(b * kBlock, kBlock));
    rig.clock.Advance(2 * kMs);  // the application computes for 2 ms per block
  }
  CacheStats stats = rig.cache->Stats();
  EXPECT_DOUBLE_EQ(stats.t_disk_nanos[0], 10.0 * kMs);
  EXPECT_EQ(stats.stall_nanos, 5u * 10 * kMs);
  EXPECT_EQ(stats.demand_misses, 5u);
  // P = T_disk / (T_cpu + T_hit + T_driver) = 10 ms / 2 ms.
  ASSERT_TRUE(rig.cache->Hint(Reverse(100, 2, 4)).ok());
  EXPECT_DOUBLE_EQ(rig.cache->QueryStream(100).horizon, 5.0);
  // A process that never read has T_cpu = 0: its horizon is as deep as the cache.
  ASSERT_TRUE(rig.cache->Hint(Reverse(200, 2, 4)).ok());
  EXPECT_DOUBLE_EQ(rig.cache->QueryStream(200).horizon, 64.0);
}

// Small files are read in one short read each; such a read is one block access, not a fraction
// of one. (T_cpu and T_hit used to be scaled by block_size / bytes read: a 256-byte read after
// 2 ms of computation counted as 32 ms per access, which made the horizon of a search over
// small files about 1 on real mounts.)
TEST(TipTest, ShortReadsCountAsWholeAccessesInTheEstimators) {
  CacheRig rig(1, kBlock, TestOptions(64), Wrap::kNone, EmulatedDisks(kAccess));
  const std::string data = WriteRaw(rig, 2, 16, 1);
  for (uint64_t b : {15, 13, 11, 9, 7}) {
    ASSERT_EQ(rig.ReadWaiting(Reader(100), 2, b * kBlock + 100, 256, data.size()),
              data.substr(b * kBlock + 100, 256));
    rig.clock.Advance(2 * kMs);
  }
  // P = T_disk / T_cpu = 10 ms / 2 ms, as with whole-block reads.
  ASSERT_TRUE(rig.cache->Hint(Reverse(100, 2, 4)).ok());
  EXPECT_DOUBLE_EQ(rig.cache->QueryStream(100).horizon, 5.0);
  // A read spanning two blocks is two accesses: the 2 ms gap before it is 1 ms per access.
  ReadContext reader = Reader(300);
  ASSERT_EQ(rig.ReadWaiting(reader, 2, 0, kBlock, data.size()), data.substr(0, kBlock));
  rig.clock.Advance(2 * kMs);
  ASSERT_EQ(rig.ReadWaiting(reader, 2, 2 * kBlock - 10, 20, data.size()),
            data.substr(2 * kBlock - 10, 20));
  ASSERT_TRUE(rig.cache->Hint(Reverse(300, 2, 4)).ok());
  EXPECT_DOUBLE_EQ(rig.cache->QueryStream(300).horizon, 10.0);
}

// One long pause of the reader (preempted on a busy machine) does not collapse its horizon:
// the gap counts for at most 4 times the current T_cpu.
TEST(TipTest, OneLongPauseOfTheReaderDoesNotCollapseItsHorizon) {
  CacheRig rig(1, kBlock, TestOptions(64), Wrap::kNone, EmulatedDisks(kAccess));
  const std::string data = WriteRaw(rig, 2, 16, 1);
  int64_t pause = 0;
  for (uint64_t b : {15, 13, 11, 9, 7, 5}) {
    rig.clock.Advance(pause > 0 ? pause : 2 * kMs);
    ASSERT_EQ(rig.ReadWaiting(Reader(100), 2, b * kBlock, kBlock, data.size()),
              data.substr(b * kBlock, kBlock));
    pause = b == 7 ? 100 * kMs : 0;  // before the read of block 5
  }
  // T_cpu = 2 ms + (min(100, 4 x 2) - 2) ms / 8 = 2.75 ms; unclipped it would be 14.25 ms and
  // the horizon below one access.
  ASSERT_TRUE(rig.cache->Hint(Reverse(100, 2, 4)).ok());
  EXPECT_DOUBLE_EQ(rig.cache->QueryStream(100).horizon, 10.0 / 2.75);
}

// On an array a disk whose next hinted blocks lie far down the stream still gets prefetches
// while another disk works through a long run of the stream's first accesses: the manager looks
// as far as the horizon, not a fixed window of 32 accesses.
TEST(TipTest, IdleDisksPrefetchFarDownTheStreamWithinTheHorizon) {
  CacheRig rig(4, kBlock, TestOptions(256), Wrap::kNone, EmulatedDisks(kAccess));
  const std::string data = WriteRaw(rig, 1, 256, 5);
  const auto disk_of = [&](uint64_t block) {
    return rig.io->layout().DiskOfOffset(1, block * kBlock);
  };
  const uint32_t busy = disk_of(0);
  HintBatch batch;
  batch.stream = 100;
  batch.owner = 100;
  std::vector<uint64_t> elsewhere;
  for (uint64_t b = 0; b < 256 && batch.extents.size() < 48; ++b) {
    if (disk_of(b) == busy) batch.extents.push_back(HintExtent{1, b * kBlock, kBlock, data.size()});
  }
  for (uint64_t b = 0; b < 256 && elsewhere.size() < 3; ++b) {
    if (disk_of(b) != busy && (elsewhere.empty() || disk_of(elsewhere.back()) != disk_of(b))) {
      elsewhere.push_back(b);
      batch.extents.push_back(HintExtent{1, b * kBlock, kBlock, data.size()});
    }
  }
  ASSERT_EQ(elsewhere.size(), 3u);
  // A hinter that has not read yet: T_cpu = 0, so every access is within its horizon.
  ASSERT_TRUE(rig.cache->Hint(batch).ok());
  for (uint64_t b : elsewhere) EXPECT_TRUE(rig.cache->Contains(1, b)) << "block " << b;
  EXPECT_EQ(rig.cache->Stats().fetching_buffers + rig.cache->Stats().hinted_buffers, 4u + 3u);
}

TEST(TipTest, HintedStreamIsPrefetchedExactlyToTheHorizon) {
  CacheOptions options = TestOptions(256);
  options.prefetch_idle_disks = false;  // the paper's model exactly (see the test after this one)
  options.queue_aware_horizon = false;
  CacheRig rig(4, kBlock, options, Wrap::kNone, EmulatedDisks(kAccess));
  const std::string warm = WriteRaw(rig, 2, 8, 2);
  const std::string data = WriteRaw(rig, 1, 64, 3);
  // Teach the cache this reader's pace: 5 ms of computation per block. P = 10 / 5 = 2.
  ReadDescending(rig, 100, 2, warm, 5 * kMs);
  const CacheStats before = rig.cache->Stats();
  ASSERT_TRUE(rig.cache->Hint(Reverse(100, 1, 64)).ok());
  EXPECT_TRUE(rig.cache->Contains(1, 63));
  EXPECT_TRUE(rig.cache->Contains(1, 62));
  EXPECT_FALSE(rig.cache->Contains(1, 61));  // beyond the horizon, although buffers are free
  for (uint64_t b = 64; b-- > 0;) {
    rig.clock.Advance(5 * kMs);
    ASSERT_EQ(rig.ReadWaiting(Reader(100), 1, b * kBlock, kBlock, data.size()),
              data.substr(b * kBlock, kBlock));
    // After consuming block b, exactly the next P = 2 hinted blocks are cached or in flight.
    for (uint64_t ahead = 1; ahead <= 3 && ahead <= b; ++ahead) {
      EXPECT_EQ(rig.cache->Contains(1, b - ahead), ahead <= 2) << "block " << b - ahead;
    }
  }
  const CacheStats after = rig.cache->Stats();
  EXPECT_EQ(after.hinted_prefetched, 64u);
  EXPECT_EQ(after.hinted_used, 64u);
  // Only the first block was waited for (its prefetch had 5 of its 10 ms to go).
  EXPECT_EQ(after.demand_misses - before.demand_misses, 1u);
  EXPECT_EQ(after.inflight_waits - before.inflight_waits, 1u);
  EXPECT_EQ(after.stall_nanos - before.stall_nanos, uint64_t{5 * kMs});
  EXPECT_EQ(rig.cache->QueryStream(100).blocks_consumed, 64u);
  EXPECT_DOUBLE_EQ(after.prefetch_horizon, 2.0);
}

// When the reader outpaces the array (P = 10 ms / 2 ms = 5 >= 4 disks x 1 prefetch each), a disk
// with nothing inside the horizon fetches the stream's blocks further down instead of idling,
// and the reader stalls less than with the paper's horizon alone.
TEST(TipTest, IdleDisksFetchBeyondTheHorizonWhenTheArrayIsTheBottleneck) {
  struct Outcome {
    bool far_block_fetched_at_hint = false;
    uint64_t stall = 0;
  };
  const auto run = [](bool idle_disks) {
    CacheOptions options = TestOptions(256);
    options.max_prefetches_per_disk = 1;
    options.prefetch_idle_disks = idle_disks;
    options.queue_aware_horizon = false;  // idle disks alone (queues: the next test)
    CacheRig rig(4, kBlock, options, Wrap::kNone, EmulatedDisks(kAccess));
    const std::string warm = WriteRaw(rig, 2, 8, 2);
    const std::string data = WriteRaw(rig, 1, 256, 3);
    ReadDescending(rig, 100, 2, warm, 2 * kMs);  // P = 5
    const std::vector<uint64_t> order = AlternatingDiskOrder(rig, 1);
    const CacheStats before = rig.cache->Stats();
    EXPECT_TRUE(rig.cache->Hint(InOrder(100, 1, order, data.size())).ok());
    Outcome out;
    out.far_block_fetched_at_hint = rig.cache->Contains(1, order[12]);
    ReadInOrder(rig, 100, 1, data, order, 2 * kMs);
    const CacheStats after = rig.cache->Stats();
    EXPECT_EQ(after.hinted_used - before.hinted_used, 24u);
    out.stall = after.stall_nanos - before.stall_nanos;
    return out;
  };
  const Outcome paper = run(false);
  const Outcome array = run(true);
  EXPECT_FALSE(paper.far_block_fetched_at_hint);
  EXPECT_TRUE(array.far_block_fetched_at_hint);
  EXPECT_LT(array.stall, paper.stall);
}

// Beyond its horizon an idle disk fetches only for hints that will most likely be read (issue 16,
// item 7): as above (P = 5 on 4 disks x 1 prefetch), the 13th access of manual or speculative
// hints is fetched at the hint, on a disk with nothing inside the horizon; that of tainted
// speculative hints, or of a process whose speculative hints went unread, waits for its horizon.
TEST(TipTest, IdleDisksFetchBeyondTheHorizonOnlyForAccurateHints) {
  const auto far_block_fetched_at_hint = [](HintSource source, bool unread_before) -> bool {
    CacheOptions options = TestOptions(256);
    options.max_prefetches_per_disk = 1;
    options.queue_aware_horizon = false;
    CacheRig rig(4, kBlock, options, Wrap::kNone, EmulatedDisks(kAccess));
    const std::string warm = WriteRaw(rig, 2, 8, 2);
    const std::string data = WriteRaw(rig, 1, 256, 3);
    WriteRaw(rig, 3, 128, 4);
    ReadDescending(rig, 100, 2, warm, 2 * kMs);  // P = 5
    if (unread_before) {
      // 128 hints of this process and source that it never reads, cancelled: accuracy 8 / 136.
      EXPECT_TRUE(rig.cache->Hint(Reverse(100, 3, 128, source)).ok());
      EXPECT_TRUE(rig.cache->Cancel(100, std::nullopt, false).ok());
      rig.clock.Advance(100 * kMs);  // their prefetches complete
    }
    const std::vector<uint64_t> order = AlternatingDiskOrder(rig, 1);
    HintBatch batch = InOrder(100, 1, order, data.size());
    batch.source = source;
    EXPECT_TRUE(rig.cache->Hint(batch).ok());
    EXPECT_TRUE(rig.cache->Contains(1, order[0]));  // inside the horizon: fetched for every source
    return rig.cache->Contains(1, order[12]);
  };
  EXPECT_TRUE(far_block_fetched_at_hint(HintSource::kManual, false));
  EXPECT_TRUE(far_block_fetched_at_hint(HintSource::kSpeculative, false));
  EXPECT_FALSE(far_block_fetched_at_hint(HintSource::kSpeculativeTainted, false));
  EXPECT_FALSE(far_block_fetched_at_hint(HintSource::kSpeculative, true));
}

// Read-ahead is valued and refused like hints (issue 16, item 5). A re-reader's working set of 48
// blocks fills three quarters of a 64-block cache; beside it a sequential reader of 512 blocks,
// the two taking turns, 0.5 ms of computation before each read. Read-ahead that took the LRU's
// coldest buffer whatever it was worth pushed the working set out; valued at what the block x
// ahead saves the sequential reader against the LRU's marginal hits, it takes the buffers the
// working set leaves and goes as deep as those allow.
TEST(TipTest, ReadaheadCompetesWithTheLru) {
  CacheOptions options = TestOptions(64);
  options.readahead = true;
  CacheRig rig(1, kBlock, options, Wrap::kNone, EmulatedDisks(kAccess));
  const std::string set = WriteRaw(rig, 1, 48, 1);
  const std::string seq = WriteRaw(rig, 2, 512, 2);
  for (uint64_t b = 0; b < 48; ++b) {
    ASSERT_EQ(rig.ReadWaiting(Reader(200), 1, b * kBlock, kBlock, set.size()),
              set.substr(b * kBlock, kBlock));
  }
  const CacheStats before = rig.cache->Stats();
  std::mt19937 rng(5);
  uint64_t set_hits = 0;
  for (uint64_t i = 0; i < 512; ++i) {
    rig.clock.Advance(kMs / 2);
    ASSERT_EQ(rig.ReadWaiting(Reader(100), 2, i * kBlock, kBlock, seq.size()),
              seq.substr(i * kBlock, kBlock));
    rig.clock.Advance(kMs / 2);
    const uint64_t b = rng() % 48;
    set_hits += rig.cache->Contains(1, b) ? 1 : 0;
    ASSERT_EQ(rig.ReadWaiting(Reader(200), 1, b * kBlock, kBlock, set.size()),
              set.substr(b * kBlock, kBlock));
  }
  const CacheStats after = rig.cache->Stats();
  const uint64_t ra_hits = after.readahead_hits - before.readahead_hits;
  std::printf("re-reader hits %.3f, read-ahead issued %llu, hit %llu, stall %.3f s\n",
              static_cast<double>(set_hits) / 512.0,
              static_cast<unsigned long long>(after.readahead_issued - before.readahead_issued),
              static_cast<unsigned long long>(ra_hits),
              static_cast<double>(after.stall_nanos - before.stall_nanos) / 1e9);
  EXPECT_GE(set_hits, 512u * 9 / 10);
  EXPECT_GE(ra_hits, 256u);  // the sequential reader still reads ahead
}

// A reader that the array outpaces (P = 10 ms / 4 ms = 2.5 on 4 disks), its accesses placed on
// the disks at random as a shuffled data set's are: with the paper's horizon two or three
// prefetches collide on one disk most of the time and the reader waits behind its own
// prefetches. Counting the fetches queued on each access's disk (queue_aware_horizon) issues the
// second and third access of one disk earlier, and the reader stalls less.
TEST(TipTest, QueuedDisksPrefetchDeeperThanThePaperHorizon) {
  struct Outcome {
    bool third_on_one_disk_fetched_at_hint = false;
    uint64_t stall = 0;
    uint64_t used = 0;
  };
  const auto run = [](bool queue_aware) {
    CacheOptions options = TestOptions(256);
    options.queue_aware_horizon = queue_aware;
    CacheRig rig(4, kBlock, options, Wrap::kNone, EmulatedDisks(kAccess));
    const std::string data = WriteRaw(rig, 1, 1024, 3);
    const auto disk_of = [&](uint64_t b) { return rig.io->layout().DiskOfOffset(1, b * kBlock); };
    std::vector<uint64_t> on_disk[4];
    for (uint64_t b = 0; b < 1024; ++b) on_disk[disk_of(b)].push_back(b);
    std::mt19937 rng(7);
    for (std::vector<uint64_t>& blocks : on_disk) std::shuffle(blocks.begin(), blocks.end(), rng);
    // Teach the cache every disk's T_disk (10 ms) and this reader's pace: T_cpu = 4 ms, P = 2.5.
    size_t next[4] = {0, 0, 0, 0};
    for (uint32_t d = 0; d < 4; ++d) {
      rig.clock.Advance(4 * kMs);
      const uint64_t b = on_disk[d][next[d]++];
      EXPECT_EQ(rig.ReadWaiting(Reader(100), 1, b * kBlock, kBlock, data.size()),
                data.substr(b * kBlock, kBlock));
    }
    // Three accesses on one disk first, then 197 on disks drawn at random (a fixed seed).
    std::vector<uint64_t> order;
    for (int i = 0; i < 200; ++i) {
      const uint32_t d = i < 3 ? 0 : static_cast<uint32_t>(rng() % 4);
      order.push_back(on_disk[d][next[d]++]);
    }
    const CacheStats before = rig.cache->Stats();
    EXPECT_TRUE(rig.cache->Hint(InOrder(100, 1, order, data.size())).ok());
    Outcome out;
    out.third_on_one_disk_fetched_at_hint = rig.cache->Contains(1, order[2]);
    ReadInOrder(rig, 100, 1, data, order, 4 * kMs);
    const CacheStats after = rig.cache->Stats();
    out.used = after.hinted_used - before.hinted_used;
    out.stall = after.stall_nanos - before.stall_nanos;
    return out;
  };
  const Outcome paper = run(false);
  const Outcome queued = run(true);
  EXPECT_FALSE(paper.third_on_one_disk_fetched_at_hint);  // x = 3 > P
  EXPECT_TRUE(queued.third_on_one_disk_fetched_at_hint);  // x / (q + 1) = 3 / 3 <= P
  EXPECT_EQ(paper.used, 200u);
  EXPECT_EQ(queued.used, 200u);
  EXPECT_LT(queued.stall, paper.stall);
  std::printf("stall over 200 accesses: paper horizon %.1f ms, queue-aware %.1f ms\n",
              static_cast<double>(paper.stall) / kMs, static_cast<double>(queued.stall) / kMs);
}

// A loader shares its order with its workers (TIPFS_IOC_SHARE) and never reads itself: the
// stream's T_app is its consumers', together. One worker computing 4 ms per block paces it at
// P = 10 / 4; two side by side consume one block per 2 ms, P = 10 / 2.
TEST(TipTest, ASharedStreamIsPacedByItsConsumers) {
  CacheRig rig(4, kBlock, TestOptions(256), Wrap::kNone, EmulatedDisks(kAccess));
  const std::string data = WriteRaw(rig, 2, 64, 21);
  ReadDescending(rig, 300, 2, data, 1 * kMs);  // every disk measured at 10 ms; all cached
  for (double t : rig.cache->Stats().t_disk_nanos) ASSERT_DOUBLE_EQ(t, 10.0 * kMs);
  constexpr uint32_t kLoader = 100;
  constexpr uint64_t kStream = (uint64_t{kLoader} << 32) | 1;
  ASSERT_TRUE(rig.cache->ShareStream(kStream, kLoader, true).ok());
  HintBatch batch = Reverse(kStream, 2, 64);
  batch.owner = kLoader;
  ASSERT_TRUE(rig.cache->Hint(batch).ok());
  // The loader has no pace of its own.
  EXPECT_DOUBLE_EQ(rig.cache->QueryStream(kStream).horizon, 256.0);
  const auto worker = [](uint32_t pid) {
    ReadContext c{pid, pid};
    c.shared_owner = kLoader;
    return c;
  };
  uint64_t b = 64;
  for (int i = 0; i < 8; ++i) {
    --b;
    rig.clock.Advance(4 * kMs);
    ASSERT_EQ(rig.ReadWaiting(worker(201), 2, b * kBlock, kBlock, data.size()),
              data.substr(b * kBlock, kBlock));
  }
  EXPECT_DOUBLE_EQ(rig.cache->QueryStream(kStream).horizon, 2.5);
  for (int i = 0; i < 16; ++i) {
    --b;
    rig.clock.Advance(2 * kMs);
    ASSERT_EQ(rig.ReadWaiting(worker(i % 2 == 0 ? 202 : 201), 2, b * kBlock, kBlock, data.size()),
              data.substr(b * kBlock, kBlock));
  }
  EXPECT_DOUBLE_EQ(rig.cache->QueryStream(kStream).horizon, 5.0);
  EXPECT_EQ(rig.cache->Stats().shared_consumed, 24u);
}

// A hinter whose reader has not read yet holds the whole cache. A proven fast reader's hints are
// worth more per second (TIP2: benefit x its access rate against the ejection cost x the holder's
// rate), so the manager gives up the holder's blocks needed furthest ahead, and stops once the
// fast stream's next benefit falls below the next ejection's cost.
TEST(TipTest, AFasterReadersHintsEjectAnIdleHintersFurthestBlocks) {
  CacheRig rig(4, kBlock, TestOptions(8), Wrap::kNone, EmulatedDisks(kAccess));
  const std::string warm = WriteRaw(rig, 3, 8, 30);
  const std::string slow = WriteRaw(rig, 1, 64, 31);
  const std::string fast = WriteRaw(rig, 2, 64, 32);
  ReadDescending(rig, 200, 3, warm, 1 * kMs);  // the fast reader: T_cpu = 1 ms
  ASSERT_TRUE(rig.cache->Hint(Reverse(100, 1, 64)).ok());
  while (rig.clock.AdvanceToNext()) {
  }
  CacheStats stats = rig.cache->Stats();
  ASSERT_EQ(stats.hinted_buffers, 8u);  // the idle hinter holds every buffer
  EXPECT_EQ(stats.hinted_ejected, 0u);
  for (uint64_t b = 63; b >= 56; --b) ASSERT_TRUE(rig.cache->Contains(1, b)) << b;
  ASSERT_TRUE(rig.cache->Hint(Reverse(200, 2, 64)).ok());
  while (rig.clock.AdvanceToNext()) {
  }
  stats = rig.cache->Stats();
  // The fast stream's x-th access is worth T_disk / (x (x - 1)) (x = 1: T_disk) x 1,000 accesses
  // per second: 10, 5, 1.7, 0.8 ms/s; a held block of the idle hinter costs about T_disk (its
  // horizon is the whole cache) x the 1 / (T_disk + T_app) it is credited with: about 1 ms/s.
  // Three exchanges pay; the fourth does not.
  EXPECT_EQ(stats.hinted_ejected, 3u);
  EXPECT_EQ(stats.hinted_buffers, 8u);
  EXPECT_TRUE(rig.cache->Contains(2, 63));   // the fast stream's next access
  EXPECT_FALSE(rig.cache->Contains(1, 56));  // the idle one's furthest
  EXPECT_TRUE(rig.cache->Contains(1, 63));   // and its nearest stays
  ReadDescending(rig, 200, 2, fast, 1 * kMs);
  EXPECT_EQ(rig.cache->QueryStream(200).blocks_consumed, 64u);
}

TEST(TipTest, HintsIgnoredPrefetchNothingAndStallEveryBlock) {
  CacheOptions o = TestOptions(256);
  o.hints_ignored = true;
  CacheRig rig(4, kBlock, o, Wrap::kNone, EmulatedDisks(kAccess));
  const std::string data = WriteRaw(rig, 1, 16, 4);
  ASSERT_TRUE(rig.cache->Hint(Reverse(100, 1, 16)).ok());
  ReadDescending(rig, 100, 1, data, 5 * kMs);
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.hinted_prefetched, 0u);
  EXPECT_EQ(stats.demand_misses, 16u);
  EXPECT_EQ(stats.stall_nanos, 16u * kAccess);
  EXPECT_EQ(stats.bytes_hinted[0], 16u * kBlock);
}

TEST(TipTest, LruKeepsAHotSetAgainstUselessHints) {
  CacheRig rig(1, kBlock, TestOptions(32), Wrap::kNone, EmulatedDisks(kAccess));
  const std::string hot = WriteRaw(rig, 3, 16, 5);
  WriteRaw(rig, 4, 200, 6);
  auto pass = [&] {
    for (uint64_t b = 0; b < 16; ++b) {
      rig.clock.Advance(1 * kMs);
      ASSERT_EQ(rig.ReadWaiting(Reader(100), 3, b * kBlock, kBlock, hot.size()),
                hot.substr(b * kBlock, kBlock));
    }
  };
  for (int i = 0; i < 4; ++i) pass();
  const CacheStats before = rig.cache->Stats();
  EXPECT_EQ(before.demand_misses, 16u);
  // Another process discloses 200 blocks it will never read.
  ASSERT_TRUE(rig.cache->Hint(Reverse(200, 4, 200)).ok());
  for (int i = 0; i < 30; ++i) pass();
  const CacheStats after = rig.cache->Stats();
  EXPECT_EQ(after.demand_misses, before.demand_misses);  // the hot set never left
  EXPECT_EQ(after.demand_hits - before.demand_hits, 30u * 16);
  // The useless hints got only the buffers nobody else used.
  EXPECT_LE(after.hinted_prefetched, 16u);
  EXPECT_GT(after.hinted_prefetched, 0u);
}

TEST(TipTest, HintsTakeBuffersFromColdLruData) {
  CacheRig rig(2, kBlock, TestOptions(32), Wrap::kNone, EmulatedDisks(kAccess));
  const std::string cold = WriteRaw(rig, 3, 24, 7);
  const std::string data = WriteRaw(rig, 4, 48, 8);
  ReadDescending(rig, 100, 3, cold, 1 * kMs);
  ASSERT_TRUE(rig.cache->Hint(Reverse(200, 4, 48)).ok());
  ReadDescending(rig, 200, 4, data, 6 * kMs);
  CacheStats stats = rig.cache->Stats();
  // Data read once and never again is worth nothing at the LRU tail: hints displace it.
  EXPECT_GE(stats.hinted_prefetched, 40u);
  EXPECT_GE(stats.hinted_used, 40u);
  EXPECT_GT(stats.evictions, 16u);
}

TEST(TipTest, WrongHintsAreCancelledAtOnceAndEvictedFirst) {
  CacheOptions o = TestOptions(32);
  o.max_prefetches_per_disk = 4;
  CacheRig rig(1, kBlock, o, Wrap::kNone, EmulatedDisks(kAccess));
  const std::string kept = WriteRaw(rig, 6, 12, 9);
  WriteRaw(rig, 5, 20, 10);
  const std::string other = WriteRaw(rig, 7, 20, 11);
  ReadDescending(rig, 100, 6, kept, 1 * kMs);
  // A speculating process hints 20 blocks in epoch 1; 4 go out (the per-disk bound).
  const uint64_t requests = rig.DiskRequests();
  ASSERT_TRUE(rig.cache->Hint(Reverse(300, 5, 20, HintSource::kSpeculative, 1)).ok());
  EXPECT_EQ(rig.DiskRequests() - requests, 4u);
  // Speculation restarts: the epoch's queued prefetches are dropped at once.
  ASSERT_TRUE(rig.cache->Cancel(300, 1u).ok());
  EXPECT_EQ(rig.cache->QueryStream(300).hinted_bytes, 0u);
  rig.clock.Advance(100 * kMs);
  EXPECT_EQ(rig.DiskRequests() - requests, 4u);
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.hinted_cancelled, 20u);
  EXPECT_EQ(stats.evict_first_buffers, 4u);
  EXPECT_LT(stats.accuracy[1], 0.5);  // 20 unused against a prior of 8
  EXPECT_DOUBLE_EQ(stats.accuracy[0], 1.0);
  // Filling the cache evicts the four useless blocks before any block a reader used.
  ReadDescending(rig, 400, 7, other, 1 * kMs);
  stats = rig.cache->Stats();
  EXPECT_EQ(stats.hinted_evicted_unused, 4u);
  for (uint64_t b = 0; b < 12; ++b) EXPECT_TRUE(rig.cache->Contains(6, b)) << b;
}

TEST(TipTest, OneWrongSpeculatorDiscountsItsOwnHintsNotAnothers) {
  CacheRig rig(1, kBlock, TestOptions(64), Wrap::kNone, EmulatedDisks(kAccess));
  WriteRaw(rig, 5, 20, 15);
  const std::string good = WriteRaw(rig, 7, 16, 16);
  // Process 300 speculates wrongly: its 20 hinted blocks are cancelled unread.
  ASSERT_TRUE(rig.cache->Hint(Reverse(300, 5, 20, HintSource::kSpeculative, 1)).ok());
  ASSERT_TRUE(rig.cache->Cancel(300, 1u).ok());
  // Process 500 speculates right: it reads every block it hinted.
  ASSERT_TRUE(rig.cache->Hint(Reverse(500, 7, 16, HintSource::kSpeculative, 1)).ok());
  ReadDescending(rig, 500, 7, good, 1 * kMs);
  const double source = rig.cache->Stats().accuracy[1];
  const double wrong = rig.cache->QueryStream(300).owner_accuracy[1];
  const double right = rig.cache->QueryStream(500).owner_accuracy[1];
  // The source's figure mixes both (16 used, 20 unused, a prior of 8 accurate): 24 / 44.
  EXPECT_NEAR(source, 24.0 / 44, 1e-9);
  // Each process starts from that figure and moves by its own record.
  EXPECT_NEAR(wrong, 8 * source / 28, 1e-9);
  EXPECT_NEAR(right, (16 + 8 * source) / 24, 1e-9);
  // A process that never hinted gets the source's figure.
  EXPECT_NEAR(rig.cache->QueryStream(900).owner_accuracy[1], source, 1e-9);
  EXPECT_DOUBLE_EQ(rig.cache->QueryStream(500).owner_accuracy[0], 1.0);
}

TEST(TipTest, ConcurrentHintersShareFairly) {
  // Four buffers for two readers that each want P = 10 ms / 2 ms = 5 blocks ahead.
  CacheRig rig(4, kBlock, TestOptions(4), Wrap::kNone, EmulatedDisks(kAccess));
  const std::string a = WriteRaw(rig, 1, 100, 12);
  const std::string b = WriteRaw(rig, 2, 100, 13);
  ASSERT_TRUE(rig.cache->Hint(Reverse(100, 1, 100)).ok());
  ASSERT_TRUE(rig.cache->Hint(Reverse(200, 2, 100)).ok());
  int64_t stall[2] = {0, 0};
  for (uint64_t i = 100; i-- > 0;) {
    rig.clock.Advance(2 * kMs);
    std::string out[2] = {std::string(kBlock, '\0'), std::string(kBlock, '\0')};
    bool done[2] = {false, false};
    int64_t start = rig.clock.NowNanos();
    for (int r = 0; r < 2; ++r) {
      rig.cache->ReadAsync(Reader(r == 0 ? 100 : 200), r == 0 ? 1 : 2, i * kBlock, kBlock,
                           100 * kBlock, out[r].data(), [&, r](Result<size_t> res) {
                             EXPECT_TRUE(res.ok());
                             stall[r] += rig.clock.NowNanos() - start;
                             done[r] = true;
                           });
    }
    while (!(done[0] && done[1]) && rig.clock.AdvanceToNext()) {
    }
    ASSERT_TRUE(done[0] && done[1]);
    EXPECT_EQ(out[0], a.substr(i * kBlock, kBlock));
    EXPECT_EQ(out[1], b.substr(i * kBlock, kBlock));
  }
  const StreamInfo sa = rig.cache->QueryStream(100);
  const StreamInfo sb = rig.cache->QueryStream(200);
  EXPECT_EQ(sa.blocks_consumed, 100u);
  EXPECT_EQ(sb.blocks_consumed, 100u);
  // Same pace, same disks: neither starves. Prefetches and stall within 20% of each other.
  EXPECT_GT(sa.blocks_prefetched, 50u);
  EXPECT_GT(sb.blocks_prefetched, 50u);
  EXPECT_NEAR(static_cast<double>(sa.blocks_prefetched), static_cast<double>(sb.blocks_prefetched),
              0.2 * sa.blocks_prefetched);
  EXPECT_NEAR(static_cast<double>(stall[0]), static_cast<double>(stall[1]), 0.2 * stall[0] + kMs);
}

TEST(TipTest, WarmupPrefetchesInOrderIntoTheLru) {
  CacheRig rig(2, kBlock, TestOptions(64), Wrap::kNone, EmulatedDisks(kAccess));
  const std::string data = WriteRaw(rig, 1, 30, 14);
  HintBatch warm;
  warm.stream = 500;
  warm.owner = 500;
  warm.source = HintSource::kWarmup;
  warm.extents.push_back(HintExtent{1, 0, data.size(), data.size()});
  ASSERT_TRUE(rig.cache->Hint(warm).ok());
  while (rig.clock.AdvanceToNext()) {
  }
  for (uint64_t b = 0; b < 30; ++b) EXPECT_TRUE(rig.cache->Contains(1, b)) << b;
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.warmup_prefetched, 30u);
  EXPECT_EQ(stats.lru_buffers, 30u);
  EXPECT_FALSE(rig.cache->QueryStream(500).exists);  // done: the stream is gone
  // Anyone's reads now hit.
  EXPECT_EQ(rig.ReadWaiting(Reader(600), 1, 0, data.size(), data.size()), data);
  EXPECT_EQ(rig.cache->Stats().demand_misses, 0u);
}

// With its own thread (the mount's default), the manager prefetches a hint without any read
// asking it to: the hint call only wakes it. The blocks then serve reads without disk requests.
TEST(TipManagerThreadTest, HintsArePrefetchedByTheManagerThread) {
  CacheOptions o = TestOptions(64);
  o.manager_thread = true;
  CacheRig rig(2, kBlock, o, Wrap::kNone, EmulatedDisks(kAccess));
  const std::string data = WriteRaw(rig, 1, 16, 15);
  ASSERT_TRUE(rig.cache->Hint(Reverse(100, 1, 16)).ok());
  // 16 blocks, at most 4 prefetches per disk: later ones go out as earlier ones complete. The
  // thread runs on its own schedule, so this waits for the outcome, not for a time.
  for (int i = 0; i < 20000 && rig.cache->Stats().hinted_prefetched < 16; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    rig.clock.Advance(kMs);
  }
  ASSERT_EQ(rig.cache->Stats().hinted_prefetched, 16u);
  const uint64_t requests = rig.DiskRequests();
  for (uint64_t b = 16; b-- > 0;) {
    ASSERT_EQ(rig.Read(Reader(100), 1, b * kBlock, kBlock, data.size()),
              data.substr(b * kBlock, kBlock));
  }
  const CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(rig.DiskRequests(), requests);
  EXPECT_EQ(stats.demand_hits, 16u);
  EXPECT_EQ(stats.demand_misses, 0u);
  EXPECT_EQ(rig.cache->QueryStream(100).blocks_consumed, 16u);
}

}  // namespace
}  // namespace tipfs::cache
