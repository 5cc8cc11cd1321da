// Many processes reading at once (issue 11: no volume-wide lock on a read that hits). A read
// records its T_cpu in its process's shard and its LRU events in its thread's, not under
// TipEvents' one lock; the manager reads the shards. These tests check what the manager's
// decisions see: each process keeps its own compute time, and the LRU's price counts every
// reader's events as if each had been recorded in one estimator. The threaded cases run under
// TSan.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "cache/tip_events.h"
#include "util/clock.h"

namespace tipfs::cache {
namespace {

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

}  // namespace
}  // namespace tipfs::cache
