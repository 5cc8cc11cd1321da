// util/perf_context: nested sections count each nanosecond once, threads do not nest into each
// other, and the breakdown's shares (idle included) add up, as in seed 002's Figure 5.9.
#include "util/perf_context.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <thread>

#include "util/clock.h"

namespace tipfs {
namespace {

constexpr int64_t kMs = kNanosPerMilli;

TEST(PerfContextTest, NestedSectionsClaimExclusiveTime) {
  FakeClock clock(0);
  PerfCounters counters;
  {
    PerfSection dispatch(Subsystem::kFuseDispatch, &clock, &counters);
    clock.Advance(2 * kMs);
    {
      PerfSection metadata(Subsystem::kMetadata, &clock, &counters);
      clock.Advance(3 * kMs);
    }
    clock.Advance(1 * kMs);
    {
      PerfSection wait(Subsystem::kDiskWait, &clock, &counters);
      clock.Advance(1 * kMs);
      {
        PerfSection copy(Subsystem::kDataCopy, &clock, &counters);
        clock.Advance(1 * kMs);
      }
      clock.Advance(1 * kMs);
    }
    clock.Advance(1 * kMs);
  }
  PerfSnapshot s = counters.Snapshot();
  EXPECT_EQ(s[Subsystem::kFuseDispatch], 4 * kMs);  // 10 ms minus the 6 ms of inner sections
  EXPECT_EQ(s[Subsystem::kMetadata], 3 * kMs);
  EXPECT_EQ(s[Subsystem::kDiskWait], 2 * kMs);  // 3 ms minus the 1 ms copy inside it
  EXPECT_EQ(s[Subsystem::kDataCopy], 1 * kMs);
  EXPECT_EQ(s[Subsystem::kCacheLookup], 0);
  EXPECT_EQ(s.total_nanos(), 10 * kMs);  // the outer section's wall time, counted once
  EXPECT_EQ(s.sections[static_cast<size_t>(Subsystem::kFuseDispatch)], 1u);
}

TEST(PerfContextTest, SectionsOnOtherThreadsDoNotNest) {
  FakeClock clock(0);
  PerfCounters counters;
  {
    PerfSection dispatch(Subsystem::kFuseDispatch, &clock, &counters);
    std::thread other([&] {
      PerfSection hint(Subsystem::kHintProcessing, &clock, &counters);
      clock.Advance(5 * kMs);
    });
    other.join();
    clock.Advance(5 * kMs);
  }
  PerfSnapshot s = counters.Snapshot();
  EXPECT_EQ(s[Subsystem::kFuseDispatch], 10 * kMs);
  EXPECT_EQ(s[Subsystem::kHintProcessing], 5 * kMs);
}

TEST(PerfContextTest, AsynchronousSpansAndDisabledCounters) {
  FakeClock clock(0);
  PerfCounters counters;
  counters.Add(Subsystem::kDiskWait, 7 * kMs);
  counters.set_enabled(false);
  counters.Add(Subsystem::kDiskWait, 100 * kMs);
  {
    PerfSection ignored(Subsystem::kMetadata, &clock, &counters);
    clock.Advance(kMs);
  }
  counters.set_enabled(true);
  PerfSnapshot before = counters.Snapshot();
  EXPECT_EQ(before[Subsystem::kDiskWait], 7 * kMs);
  EXPECT_EQ(before[Subsystem::kMetadata], 0);

  counters.Add(Subsystem::kCacheLookup, 3);
  PerfSnapshot interval = counters.Snapshot().Since(before);
  EXPECT_EQ(interval[Subsystem::kDiskWait], 0);
  EXPECT_EQ(interval[Subsystem::kCacheLookup], 3);

  counters.Reset();
  EXPECT_EQ(counters.Snapshot().total_nanos(), 0);
}

TEST(PerfContextTest, GlobalCountersWithTheRealClock) {
  PerfSnapshot before = PerfCounters::Global()->Snapshot();
  { PerfSection s(Subsystem::kHintProcessing); }
  PerfSnapshot after = PerfCounters::Global()->Snapshot();
  EXPECT_EQ(after.Since(before).sections[static_cast<size_t>(Subsystem::kHintProcessing)], 1u);
}

TEST(PerfContextTest, BreakdownSharesIncludeIdleAndSumToOne) {
  PerfSnapshot s;
  s.nanos = {10 * kMs, 20 * kMs, 5 * kMs, 40 * kMs, 15 * kMs, 10 * kMs};
  PerfBreakdown b = ComputeBreakdown(s, 200 * kMs, 100);
  EXPECT_EQ(b.accounted_nanos, 100 * kMs);
  EXPECT_EQ(b.idle_nanos, 100 * kMs);
  EXPECT_DOUBLE_EQ(b.idle_share, 0.5);
  EXPECT_DOUBLE_EQ(b.share[static_cast<size_t>(Subsystem::kDiskWait)], 0.2);
  EXPECT_DOUBLE_EQ(std::accumulate(b.share.begin(), b.share.end(), b.idle_share), 1.0);
  EXPECT_DOUBLE_EQ(b.nanos_per_operation, 2.0 * kMs);

  // More accounted than capacity: no idle, shares of what was accounted.
  PerfBreakdown over = ComputeBreakdown(s, 50 * kMs);
  EXPECT_EQ(over.idle_nanos, 0);
  EXPECT_DOUBLE_EQ(over.share[static_cast<size_t>(Subsystem::kMetadata)], 0.2);

  std::string text = FormatBreakdown(b);
  EXPECT_NE(text.find("  disk wait          20.0%  40 ms\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  idle               50.0%  100 ms\n"), std::string::npos) << text;
  EXPECT_NE(text.find("100 operations, 2 ms per operation"), std::string::npos) << text;
  std::string json = BreakdownJson(b);
  EXPECT_NE(json.find("\"disk_wait\":{\"share\":0.200000,\"nanos\":40000000}"), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"idle\":{\"share\":0.500000,\"nanos\":100000000}"), std::string::npos)
      << json;
  EXPECT_STREQ(SubsystemName(Subsystem::kHintProcessing), "hint_processing");
  EXPECT_STREQ(SubsystemLabel(Subsystem::kFuseDispatch), "FUSE dispatch");
}

}  // namespace
}  // namespace tipfs
