// Many processes reading at once (issue 11: no volume-wide lock on a read that hits). A read by a
// process without hint streams takes neither the TIP manager's lock nor TipEvents' own: its T_cpu,
// its read-ahead run and its LRU events go to shards the manager reads. These tests check what a
// reader would notice: each process keeps its own compute time and its own read-ahead, the LRU's
// price counts every process's events, and a hinter still consumes its hints before its read
// returns, with readers of other processes all around. The threaded cases run under TSan.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cache/file_cache.h"
#include "cache/tip_events.h"
#include "tests/cache/cache_rig.h"
#include "util/clock.h"

namespace tipfs::cache {
namespace {

using testing::CacheRig;
using testing::RandomBytes;
using testing::TestOptions;

constexpr uint32_t kBlock = 4096;

// Processes whose tgids fall in the same shards (64 apart) and in different ones.
std::vector<uint32_t> Tgids(size_t n) {
  std::vector<uint32_t> tgids;
  for (size_t i = 0; i < n; ++i) {
    tgids.push_back(static_cast<uint32_t>(300 + i % (n / 2) + 64 * (i / (n / 2))));
  }
  return tgids;
}

TEST(TipReadersTest, EachProcessKeepsItsOwnComputeTimeWhileManyRead) {
  TipEvents events(4, 1e6);
  const std::vector<uint32_t> tgids = Tgids(16);
  constexpr int kReads = 2000;
  std::atomic<bool> reading{true};
  // The manager reads the estimates while the processes read.
  std::thread manager([&] {
    while (reading.load()) {
      for (uint32_t tgid : tgids) {
        EXPECT_GE(events.CpuNanos(tgid), 0);
        events.HasCpuSample(tgid);
        events.LastStartNanos(tgid);
      }
      events.LruMarginalHitsPerSecond(kNanosPerSecond, 8, 8);
    }
  });
  std::vector<std::thread> readers;
  for (size_t i = 0; i < tgids.size(); ++i) {
    readers.emplace_back([&events, tgid = tgids[i], i] {
      // Process i computes (i + 1) us between its reads, each of which takes 2 us.
      const int64_t gap = static_cast<int64_t>(i + 1) * 1000;
      int64_t t = kNanosPerMilli;
      for (int r = 0; r < kReads; ++r) {
        std::shared_ptr<ReaderTiming> reader = events.ReadStarted(tgid, t, 1);
        events.RecordLru(t, LruEvents{1, 0, 0});
        TipEvents::ReadFinished(reader.get(), t + 2000);
        t += 2000 + gap;
      }
    });
  }
  for (std::thread& t : readers) t.join();
  reading.store(false);
  manager.join();
  for (size_t i = 0; i < tgids.size(); ++i) {
    EXPECT_TRUE(events.HasCpuSample(tgids[i]));
    EXPECT_EQ(events.CpuNanos(tgids[i]), static_cast<double>((i + 1) * 1000))
        << "process " << tgids[i];
    EXPECT_EQ(events.LastStartNanos(tgids[i]),
              kNanosPerMilli + (kReads - 1) * (2000 + static_cast<int64_t>(i + 1) * 1000));
  }
  EXPECT_EQ(events.CpuNanos(299), 0);  // never read
}

// The LRU's price as one estimator fed every event in order would give it.
double Reference(const std::vector<std::pair<int64_t, LruEvents>>& recorded, int64_t now) {
  LruMarginalEstimator lru;
  for (const auto& [t, e] : recorded) {
    lru.RecordAccess(t, e.accesses);
    lru.RecordTailHit(t, e.tail_hits);
    lru.RecordGhostHit(t, e.ghost_hits);
  }
  return lru.MarginalHitsPerSecond(now, 8, 16);
}

TEST(TipReadersTest, TheLrusPriceCountsEveryReadersEventsWhenTheyWereRecorded) {
  TipEvents events(1, 1e6);
  std::vector<std::pair<int64_t, LruEvents>> recorded;
  auto record_on_new_thread = [&](int64_t t, LruEvents e) {
    std::thread([&events, t, e] { events.RecordLru(t, e); }).join();
    recorded.emplace_back(t, e);
  };
  record_on_new_thread(100 * kNanosPerMilli, LruEvents{4, 2, 1});
  record_on_new_thread(150 * kNanosPerMilli, LruEvents{3, 0, 2});
  // Read in between: what was recorded is folded, what comes later is not lost.
  EXPECT_NEAR(events.LruMarginalHitsPerSecond(200 * kNanosPerMilli, 8, 16),
              Reference(recorded, 200 * kNanosPerMilli), 1e-9);
  record_on_new_thread(700 * kNanosPerMilli, LruEvents{5, 3, 0});
  events.RecordLru(900 * kNanosPerMilli, LruEvents{2, 1, 1});
  recorded.emplace_back(900 * kNanosPerMilli, LruEvents{2, 1, 1});
  const double got = events.LruMarginalHitsPerSecond(2500 * kNanosPerMilli, 8, 16);
  const double want = Reference(recorded, 2500 * kNanosPerMilli);
  EXPECT_GT(want, 0);
  EXPECT_NEAR(got, want, want * 1e-12);
}

TEST(TipReadersTest, TheLrusPriceCountsEveryEventOfManyThreadsReadingAtOnce) {
  TipEvents events(1, 1e6);
  constexpr int kThreads = 8;
  constexpr int kReads = 3000;
  constexpr int64_t kNow = kNanosPerSecond;
  std::atomic<bool> reading{true};
  std::thread manager([&] {
    while (reading.load()) events.LruMarginalHitRatio(kNow, 8, 16);
  });
  std::vector<std::thread> readers;
  for (int i = 0; i < kThreads; ++i) {
    readers.emplace_back([&events] {
      for (int r = 0; r < kReads; ++r)
        events.RecordLru(kNow, LruEvents{1, r % 3 == 0 ? 1u : 0u, r % 5 == 0 ? 1u : 0u});
    });
  }
  for (std::thread& t : readers) t.join();
  reading.store(false);
  manager.join();
  LruMarginalEstimator lru;
  for (int r = 0; r < kReads; ++r) {
    lru.RecordAccess(kNow, kThreads);
    lru.RecordTailHit(kNow, r % 3 == 0 ? kThreads : 0);
    lru.RecordGhostHit(kNow, r % 5 == 0 ? kThreads : 0);
  }
  EXPECT_NEAR(events.LruMarginalHitRatio(kNow, 8, 16), lru.MarginalHitRatio(kNow, 8, 16), 1e-12);
  EXPECT_NEAR(events.LruMarginalHitsPerSecond(kNow, 8, 16), lru.MarginalHitsPerSecond(kNow, 8, 16),
              1e-9 * lru.MarginalHitsPerSecond(kNow, 8, 16));
}

// Eight processes, two to a shard, each pair reading one file, the first of the pair from its
// start and the second from block 64, while the others read theirs and the manager's thread
// issues read-ahead: every process gets the read-ahead its own run calls for.
TEST(TipReadersTest, ManyProcessesReadingSequentiallyAtOnceEachGetTheirReadahead) {
  CacheOptions o = TestOptions(1024);
  o.readahead = true;
  o.manager_thread = true;
  CacheRig rig(4, kBlock, o);
  const std::vector<uint32_t> tgids = Tgids(8);
  const size_t files = tgids.size() / 2;
  constexpr uint64_t kFileBlocks = 160;
  constexpr uint64_t kRead = 40;  // blocks each process reads
  std::vector<std::string> data;
  for (size_t f = 0; f < files; ++f) {
    data.push_back(RandomBytes(kFileBlocks * kBlock, 100 + f));
    rig.WriteUnderneath(10 + f, data.back());
  }
  // Process i reads file i % files from block first(i).
  auto first = [files](size_t i) -> uint64_t { return i < files ? 0 : 64; };
  std::vector<std::thread> readers;
  for (size_t i = 0; i < tgids.size(); ++i) {
    readers.emplace_back([&, i] {
      const uint32_t tgid = tgids[i];
      const std::string& file = data[i % files];
      for (uint64_t b = first(i); b < first(i) + kRead; ++b) {
        ASSERT_EQ(
            rig.Read(ReadContext{tgid, tgid}, 10 + i % files, b * kBlock, kBlock, file.size()),
            file.substr(b * kBlock, kBlock))
            << "process " << tgid << ", block " << b;
      }
    });
  }
  for (std::thread& t : readers) t.join();
  // The window is as long as the run: from block 0, 40 blocks (to block 79); from block 64, 39
  // (its first read starts no run), to block 142. The manager's thread gets there in its own
  // time (a wait for the outcome, not a timing).
  auto last_ahead = [&](size_t i) { return first(i) + 2 * kRead - 1 - (first(i) == 0 ? 0 : 1); };
  auto all_read_ahead = [&] {
    for (size_t i = 0; i < tgids.size(); ++i) {
      if (!rig.cache->Contains(10 + i % files, last_ahead(i))) return false;
    }
    return true;
  };
  for (int i = 0; i < 2000 && !all_read_ahead(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (size_t i = 0; i < tgids.size(); ++i) {
    EXPECT_TRUE(rig.cache->Contains(10 + i % files, last_ahead(i))) << "process " << tgids[i];
  }
  for (size_t f = 0; f < files; ++f) {
    EXPECT_FALSE(rig.cache->Contains(10 + f, last_ahead(f + files) + 2)) << "file " << 10 + f;
  }
  // Whether a reader met its read-ahead while it read depends on how soon the manager's thread
  // ran: the next block of each run is read-ahead's alone (no process read it, and the other
  // process on the file reads behind or ahead of it), so each process's read of it is exactly
  // one read-ahead hit.
  const uint64_t hits_before = rig.cache->Stats().readahead_hits;
  for (size_t i = 0; i < tgids.size(); ++i) {
    const uint64_t next = first(i) + kRead;
    const std::string& file = data[i % files];
    EXPECT_EQ(rig.Read(ReadContext{tgids[i], tgids[i]}, 10 + i % files, next * kBlock, kBlock,
                       file.size()),
              file.substr(next * kBlock, kBlock))
        << "process " << tgids[i] << ", block " << next;
  }
  EXPECT_EQ(rig.cache->Stats().readahead_hits - hits_before, tgids.size());
}

// A hinter reads its hinted blocks while unhinted processes read all around it, one of them in
// the same slot of the manager's owner filter (tgid + 4096): each of the hinter's reads has
// consumed its block when it returns, and the others consume nothing.
TEST(TipReadersTest, AHintersReadsConsumeBeforeTheyReturnWhileOthersRead) {
  CacheRig rig(4, kBlock, TestOptions(1024));
  constexpr uint64_t kFileBlocks = 64;
  const std::string hinted = RandomBytes(kFileBlocks * kBlock, 1);
  const std::string other = RandomBytes(kFileBlocks * kBlock, 2);
  rig.WriteUnderneath(1, hinted);
  rig.WriteUnderneath(2, other);
  constexpr uint32_t kHinter = 500;
  HintBatch batch;
  batch.stream = kHinter;
  batch.owner = kHinter;
  for (uint64_t b = 0; b < kFileBlocks; ++b) {
    batch.extents.push_back(HintExtent{1, b * kBlock, kBlock, hinted.size()});
  }
  ASSERT_TRUE(rig.cache->Hint(batch).ok());
  std::atomic<bool> hinter_done{false};
  std::vector<std::thread> others;
  for (uint32_t tgid : {kHinter + 4096, 501u, 502u}) {
    others.emplace_back([&, tgid] {
      // Reads of the hinted file too: only its hinter consumes them.
      for (uint64_t i = 0; !hinter_done.load(); ++i) {
        const uint64_t ino = 1 + i % 2;
        const uint64_t b = (i * 7 + tgid) % kFileBlocks;
        const std::string& data = ino == 1 ? hinted : other;
        ASSERT_EQ(rig.Read(ReadContext{tgid, tgid}, ino, b * kBlock, kBlock, data.size()),
                  data.substr(b * kBlock, kBlock));
      }
    });
  }
  for (uint64_t b = 0; b < kFileBlocks; ++b) {
    ASSERT_EQ(rig.Read(ReadContext{kHinter, kHinter}, 1, b * kBlock, kBlock, hinted.size()),
              hinted.substr(b * kBlock, kBlock));
    EXPECT_EQ(rig.cache->QueryStream(kHinter).hinted_bytes, (kFileBlocks - b - 1) * kBlock)
        << "after the read of block " << b;
  }
  hinter_done.store(true);
  for (std::thread& t : others) t.join();
  const CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.blocks_consumed[static_cast<size_t>(HintSource::kManual)], kFileBlocks);
  EXPECT_EQ(stats.hinted_skipped, 0u);
}

}  // namespace
}  // namespace tipfs::cache
