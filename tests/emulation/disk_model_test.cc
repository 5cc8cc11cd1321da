// DiskModel on explicit times. The test disk has round numbers: 10 ms positioning and 1 MB/s
// (1 us per byte), so a 4000-byte request costs 10 ms + 4 ms = 14 ms when random, 4 ms when it
// continues the previous one.
#include "stripe/emulation/disk_model.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "util/clock.h"

namespace tipfs::stripe {
namespace {

constexpr int64_t kMs = kNanosPerMilli;
constexpr uint64_t kBytes = 4000;

DiskModelConfig TestDisk(const std::string& extra = "") {
  const std::string queue = extra.find("queue=") == std::string::npos ? ",queue=fifo" : "";
  Result<DiskModelConfig> c = ParseDiskModelSpec("hdd,access=10ms,bw=1MB/s" + queue + extra);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

ModelRequest Read(uint64_t id, ObjectId object, uint64_t offset, uint64_t length = kBytes,
                  DiskRequest::Priority priority = DiskRequest::Priority::kDemand) {
  return ModelRequest{id, DiskRequest::Kind::kRead, priority, object, offset, length};
}

std::vector<uint64_t> Ids(const std::vector<ModelStart>& starts) {
  std::vector<uint64_t> ids;
  for (const ModelStart& s : starts) ids.push_back(s.id);
  return ids;
}

TEST(DiskModelTest, SingleRequestTakesPositioningPlusTransfer) {
  DiskModel model(TestDisk(), 0);
  std::vector<ModelStart> started;
  model.Submit(Read(1, 7, 0), 0, &started);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].start, 0);
  EXPECT_EQ(started[0].positioning_ns, 10 * kMs);
  EXPECT_EQ(started[0].transfer_ns, 4 * kMs);
  EXPECT_EQ(started[0].finish, 14 * kMs);
  EXPECT_EQ(started[0].deadline, 14 * kMs);
  EXPECT_FALSE(started[0].sequential);
  EXPECT_EQ(model.NextEventTime(), 14 * kMs);
}

TEST(DiskModelTest, ProfilePositioningIsSeekPlusHalfARevolution) {
  // hdd: 8.5 ms seek + 30 s / 7200 = 4.1667 ms; 64 KiB at 180 MB/s = 364.1 us.
  DiskModel model(*ParseDiskModelSpec("hdd"), 0);
  std::vector<ModelStart> started;
  model.Submit(Read(1, 1, 0, 65536), 0, &started);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].positioning_ns, 8'500'000 + 4'166'667);
  EXPECT_EQ(started[0].transfer_ns, 364'089);
}

TEST(DiskModelTest, SequentialRunPositionsOnce) {
  DiskModel model(TestDisk(), 0);
  std::vector<ModelStart> started;
  for (uint64_t i = 0; i < 4; ++i) model.Submit(Read(i + 1, 3, i * kBytes), 0, &started);
  model.AdvanceTo(100 * kMs, &started);
  ASSERT_EQ(started.size(), 4u);
  EXPECT_EQ(started[0].finish, 14 * kMs);
  EXPECT_EQ(started[1].finish, 18 * kMs);
  EXPECT_EQ(started[2].finish, 22 * kMs);
  EXPECT_EQ(started[3].finish, 26 * kMs);
  EXPECT_TRUE(started[3].sequential);
  DiskStats s = model.Stats(100 * kMs);
  EXPECT_EQ(s.positioned, 1u);
  EXPECT_EQ(s.sequential, 3u);
  EXPECT_EQ(s.busy_ns, 26 * kMs);

  // The track buffer keeps the run going across idle time, too.
  started.clear();
  model.Submit(Read(5, 3, 4 * kBytes), 200 * kMs, &started);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_TRUE(started[0].sequential);
  EXPECT_EQ(started[0].finish, 204 * kMs);
}

TEST(DiskModelTest, OffsetOutsideTheRunPaysPositioning) {
  DiskModel model(TestDisk(), 0);
  std::vector<ModelStart> started;
  model.Submit(Read(1, 3, 0), 0, &started);
  model.Submit(Read(2, 3, kBytes + 512), 0, &started);           // a gap: not a continuation
  model.Submit(Read(3, 4, kBytes + 512 + kBytes), 0, &started);  // right offset, other object
  model.AdvanceTo(kNanosPerSecond, &started);
  ASSERT_EQ(started.size(), 3u);
  EXPECT_FALSE(started[1].sequential);
  EXPECT_FALSE(started[2].sequential);
  EXPECT_EQ(started[2].finish, 42 * kMs);
}

TEST(DiskModelTest, QueueOfRandomRequestsCompletesAtSumOfServiceTimes) {
  DiskModel model(TestDisk(), 0);
  std::vector<ModelStart> started;
  for (uint64_t i = 0; i < 5; ++i) model.Submit(Read(i + 1, 10 + i, 0), 0, &started);
  EXPECT_EQ(started.size(), 1u);  // only the first can start at once
  // Advancing late does not shift anything: events run at their own times.
  model.AdvanceTo(kNanosPerSecond, &started);
  ASSERT_EQ(started.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(started[i].start, static_cast<int64_t>(i) * 14 * kMs) << i;
    EXPECT_EQ(started[i].finish, static_cast<int64_t>(i + 1) * 14 * kMs) << i;
  }
  EXPECT_EQ(model.NextEventTime(), -1);
}

TEST(DiskModelTest, ArrivalsLaterThanTheDiskFreesStartOnArrival) {
  DiskModel model(TestDisk(), 0);
  std::vector<ModelStart> started;
  model.Submit(Read(1, 1, 0), 0, &started);
  model.Submit(Read(2, 2, 0), 20 * kMs, &started);  // the disk was idle from 14 to 20 ms
  ASSERT_EQ(started.size(), 2u);
  EXPECT_EQ(started[1].start, 20 * kMs);
  EXPECT_EQ(started[1].finish, 34 * kMs);
}

TEST(DiskModelTest, ClookServesAscendingFromTheHeadThenWraps) {
  auto order = [](const std::string& queue) {
    DiskModel model(TestDisk(",queue=" + queue), 0);
    std::vector<ModelStart> started;
    model.Submit(Read(1, 5, 0), 0, &started);  // in service; the head ends at (5, 4000)
    model.Submit(Read(2, 9, 0), kMs, &started);
    model.Submit(Read(3, 2, 0), kMs, &started);
    model.Submit(Read(4, 7, 0), kMs, &started);
    model.Submit(Read(5, 5, 100000), kMs, &started);
    model.AdvanceTo(kNanosPerSecond, &started);
    return Ids(started);
  };
  EXPECT_EQ(order("clook"), (std::vector<uint64_t>{1, 5, 4, 2, 3}));
  EXPECT_EQ(order("fifo"), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
}

TEST(DiskModelTest, ClookTurnsInterleavedStreamsIntoSequentialRuns) {
  // Two readers, each sequential in its own file, arrive interleaved.
  auto run = [](const std::string& queue) {
    DiskModel model(TestDisk(",queue=" + queue), 0);
    std::vector<ModelStart> started;
    uint64_t id = 1;
    for (uint64_t i = 0; i < 3; ++i) {
      model.Submit(Read(id++, 1, i * kBytes), 0, &started);
      model.Submit(Read(id++, 2, i * kBytes), 0, &started);
    }
    model.AdvanceTo(kNanosPerSecond, &started);
    return model.Stats(kNanosPerSecond);
  };
  DiskStats fifo = run("fifo");
  DiskStats clook = run("clook");
  EXPECT_EQ(fifo.positioned, 6u);
  EXPECT_EQ(clook.positioned, 2u);
  EXPECT_EQ(clook.sequential, 4u);
  EXPECT_EQ(fifo.busy_ns, 6 * 14 * kMs);
  EXPECT_EQ(clook.busy_ns, 2 * 14 * kMs + 4 * 4 * kMs);
}

TEST(DiskModelTest, DemandRequestsGoBeforeQueuedPrefetches) {
  constexpr auto kPrefetch = DiskRequest::Priority::kPrefetch;
  for (bool demand_first : {true, false}) {
    DiskModel model(TestDisk(demand_first ? "" : ",demand_first=off"), 0);
    std::vector<ModelStart> started;
    model.Submit(Read(1, 1, 0, kBytes, kPrefetch), 0, &started);  // in service: not preempted
    model.Submit(Read(2, 2, 0, kBytes, kPrefetch), kMs, &started);
    model.Submit(Read(3, 3, 0, kBytes, kPrefetch), kMs, &started);
    model.Submit(Read(4, 4, 0), 2 * kMs, &started);  // demand
    model.AdvanceTo(kNanosPerSecond, &started);
    EXPECT_EQ(Ids(started), demand_first ? (std::vector<uint64_t>{1, 4, 2, 3})
                                         : (std::vector<uint64_t>{1, 2, 3, 4}));
  }
}

TEST(DiskModelTest, GapSpacesTheStartsOfRequests) {
  DiskModel model(TestDisk(",g=20ms"), 0);
  std::vector<ModelStart> started;
  for (uint64_t i = 0; i < 3; ++i) model.Submit(Read(i + 1, 10 + i, 0), 0, &started);
  EXPECT_EQ(model.NextEventTime(), 14 * kMs);  // the first finishes
  model.AdvanceTo(15 * kMs, &started);
  EXPECT_EQ(model.NextEventTime(), 20 * kMs);  // the disk is free, but g holds it until 20
  model.AdvanceTo(kNanosPerSecond, &started);
  ASSERT_EQ(started.size(), 3u);
  EXPECT_EQ(started[1].start, 20 * kMs);
  EXPECT_EQ(started[2].start, 40 * kMs);
  EXPECT_EQ(started[2].finish, 54 * kMs);

  // A request arriving during the g wait is chosen with the others at the start time.
  DiskModel clook(TestDisk(",g=20ms,queue=clook"), 0);
  started.clear();
  clook.Submit(Read(1, 5, 0), 0, &started);
  clook.Submit(Read(2, 9, 0), kMs, &started);
  clook.Submit(Read(3, 6, 0), 16 * kMs, &started);  // after the disk freed, before g allows
  clook.AdvanceTo(kNanosPerSecond, &started);
  EXPECT_EQ(Ids(started), (std::vector<uint64_t>{1, 3, 2}));
  EXPECT_EQ(started[1].start, 20 * kMs);
}

TEST(DiskModelTest, PerByteGapBoundsSequentialBandwidth) {
  // G = 2 us per byte (500 kB/s): a 4000-byte transfer takes 8 ms.
  DiskModel model(*ParseDiskModelSpec("hdd,access=10ms,G=2us,queue=fifo"), 0);
  std::vector<ModelStart> started;
  for (uint64_t i = 0; i < 10; ++i) model.Submit(Read(i + 1, 1, i * kBytes), 0, &started);
  model.AdvanceTo(kNanosPerSecond, &started);
  ASSERT_EQ(started.size(), 10u);
  EXPECT_EQ(started[9].finish, 10 * kMs + 10 * 8 * kMs);
  // 40000 bytes in 80 ms of transfer: 500 kB/s, the rate G allows.
  EXPECT_EQ(started[9].finish - started[0].start - 10 * kMs, 40000 * 2000);
}

TEST(DiskModelTest, LatencyDelaysCompletionWithoutOccupyingTheDisk) {
  DiskModel model(TestDisk(",L=5ms"), 0);
  std::vector<ModelStart> started;
  model.Submit(Read(1, 1, 0), 0, &started);
  model.Submit(Read(2, 2, 0), 0, &started);
  model.AdvanceTo(kNanosPerSecond, &started);
  ASSERT_EQ(started.size(), 2u);
  EXPECT_EQ(started[0].finish, 14 * kMs);
  EXPECT_EQ(started[0].deadline, 19 * kMs);
  EXPECT_EQ(started[1].start, 14 * kMs);  // not 19: L is not disk time
  EXPECT_EQ(started[1].deadline, 33 * kMs);
  EXPECT_EQ(model.Stats(kNanosPerSecond).busy_ns, 28 * kMs);
}

TEST(DiskModelTest, SlowdownMultipliesServiceTimeButNotLatency) {
  DiskModel model(TestDisk(",slowdown=2,L=5ms"), 0);
  std::vector<ModelStart> started;
  model.Submit(Read(1, 1, 0), 0, &started);
  model.Submit(Read(2, 1, kBytes), 0, &started);
  model.AdvanceTo(kNanosPerSecond, &started);
  ASSERT_EQ(started.size(), 2u);
  EXPECT_EQ(started[0].finish, 28 * kMs);
  EXPECT_EQ(started[0].deadline, 33 * kMs);
  EXPECT_EQ(started[1].transfer_ns, 8 * kMs);  // sequential: transfer only, doubled
  EXPECT_EQ(started[1].finish, 36 * kMs);
}

TEST(DiskModelTest, ConfigChangeAppliesToRequestsThatStartLater) {
  DiskModel model(TestDisk(), 0);
  std::vector<ModelStart> started;
  model.Submit(Read(1, 1, 0), 0, &started);
  model.Submit(Read(2, 2, 0), 0, &started);
  model.AdvanceTo(kMs, &started);
  model.SetConfig(TestDisk(",slowdown=2"));
  model.AdvanceTo(kNanosPerSecond, &started);
  ASSERT_EQ(started.size(), 2u);
  EXPECT_EQ(started[0].finish, 14 * kMs);  // already in service: unchanged
  EXPECT_EQ(started[1].finish, 14 * kMs + 28 * kMs);
}

TEST(DiskModelTest, StatisticsMatchHandComputedValues) {
  DiskModel model(TestDisk(), 0);
  std::vector<ModelStart> started;
  for (uint64_t i = 0; i < 3; ++i) model.Submit(Read(i + 1, 10 + i, 0), 0, &started);
  model.AdvanceTo(42 * kMs, &started);
  DiskStats s = model.Stats(42 * kMs);
  // Depth 3 for 14 ms, 2 for 14 ms, 1 for 14 ms: mean 2 over 42 ms.
  EXPECT_EQ(s.reads, 3u);
  EXPECT_EQ(s.bytes_read, 3 * kBytes);
  EXPECT_EQ(s.max_queue_depth, 3u);
  EXPECT_EQ(s.queue_depth, 0u);
  EXPECT_EQ(s.elapsed_ns, 42 * kMs);
  EXPECT_DOUBLE_EQ(s.avg_queue_depth, 2.0);
  EXPECT_EQ(s.busy_ns, 42 * kMs);
  EXPECT_EQ(s.queue_wait_ns, (0 + 14 + 28) * kMs);
  EXPECT_DOUBLE_EQ(s.utilization(), 1.0);

  // Idle time dilutes both averages.
  s = model.Stats(84 * kMs);
  EXPECT_DOUBLE_EQ(s.avg_queue_depth, 1.0);
  EXPECT_DOUBLE_EQ(s.utilization(), 0.5);

  // While requests are outstanding, the current depth shows them.
  model.Submit(Read(4, 20, 0), 84 * kMs, &started);
  model.Submit(Read(5, 21, 0), 84 * kMs, &started);
  EXPECT_EQ(model.Stats(90 * kMs).queue_depth, 2u);

  model.ResetStats();
  s = model.Stats(98 * kMs);
  EXPECT_EQ(s.reads, 0u);
  EXPECT_EQ(s.elapsed_ns, 14 * kMs);
  EXPECT_DOUBLE_EQ(s.avg_queue_depth, 2.0);
  EXPECT_EQ(s.max_queue_depth, 2u);
}

TEST(DiskModelTest, SyncCompletesWhenEveryEarlierRequestHasFinished) {
  DiskModel model(TestDisk(",L=1ms"), 0);
  std::vector<ModelStart> started;
  ModelRequest write{1, DiskRequest::Kind::kWrite, DiskRequest::Priority::kDemand, 1, 0, kBytes};
  ModelRequest sync{2, DiskRequest::Kind::kSync, DiskRequest::Priority::kDemand, 0, 0, 0};
  model.Submit(write, 0, &started);
  model.Submit(sync, kMs, &started);
  EXPECT_EQ(Ids(started), (std::vector<uint64_t>{1}));
  model.AdvanceTo(kNanosPerSecond, &started);
  ASSERT_EQ(Ids(started), (std::vector<uint64_t>{1, 2}));
  EXPECT_TRUE(started[1].sync);
  EXPECT_EQ(started[1].deadline, 15 * kMs);                   // write finished at 14, + L
  EXPECT_EQ(model.Stats(kNanosPerSecond).busy_ns, 14 * kMs);  // a sync does not occupy the disk

  // With nothing outstanding, a sync completes on arrival (+ L).
  started.clear();
  sync.id = 3;
  model.Submit(sync, 2 * kNanosPerSecond, &started);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].deadline, 2 * kNanosPerSecond + kMs);
  EXPECT_EQ(model.Stats(2 * kNanosPerSecond).syncs, 2u);
}

TEST(DiskModelTest, NoneProfileCostsNothing) {
  DiskModel model(*ParseDiskModelSpec("none"), 0);
  std::vector<ModelStart> started;
  model.Submit(Read(1, 1, 0, 1 << 20), 5, &started);
  model.Submit(Read(2, 2, 0, 1 << 20), 5, &started);
  ASSERT_EQ(started.size(), 2u);
  EXPECT_EQ(started[1].deadline, 5);
}

}  // namespace
}  // namespace tipfs::stripe
