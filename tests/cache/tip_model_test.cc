// The TIP formulas and estimators against hand-computed values.
#include "cache/tip_model.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tipfs::cache {
namespace {

constexpr double kMs = 1e6;
constexpr double kUs = 1e3;

TEST(TipModelTest, HorizonIsDiskTimeOverApplicationTime) {
  // 15 ms disk, 100 µs per access (T_cpu + T_hit + T_driver): 150 accesses.
  EXPECT_DOUBLE_EQ(PrefetchHorizon(15 * kMs, 100 * kUs), 150.0);
  // The application time never counts as less than kMinAppNanos (1 µs).
  EXPECT_DOUBLE_EQ(PrefetchHorizon(15 * kMs, 0), 15'000.0);
}

TEST(TipModelTest, PrefetchBenefitFollowsTheStallCurve) {
  const double t_disk = 15 * kMs, t_app = 100 * kUs;  // P = 150
  EXPECT_DOUBLE_EQ(PrefetchBenefit(t_disk, t_app, 0), 0.0);
  // The first buffer saves T_app (one access's computation overlapped), the second
  // 15 ms / (2 * 1); both are valued at their mean, so the curve the exchange sees is concave.
  const double pair = (100 * kUs + 7.5 * kMs) / 2;
  EXPECT_DOUBLE_EQ(PrefetchBenefit(t_disk, t_app, 1), pair);
  EXPECT_DOUBLE_EQ(PrefetchBenefit(t_disk, t_app, 2), pair);
  EXPECT_DOUBLE_EQ(PrefetchBenefit(t_disk, t_app, 1) + PrefetchBenefit(t_disk, t_app, 2),
                   15 * kMs - (15 * kMs / 2 - 100 * kUs));  // T_stall(0) - T_stall(2)
  EXPECT_DOUBLE_EQ(PrefetchBenefit(t_disk, t_app, 3), 15 * kMs / 6);
  EXPECT_DOUBLE_EQ(PrefetchBenefit(t_disk, t_app, 10), 15 * kMs / 90);
  EXPECT_DOUBLE_EQ(PrefetchBenefit(t_disk, t_app, 150), 15 * kMs / (150.0 * 149.0));
  EXPECT_DOUBLE_EQ(PrefetchBenefit(t_disk, t_app, 151), 0.0);  // beyond the horizon
  for (uint64_t x = 2; x < 151; ++x) {
    EXPECT_LE(PrefetchBenefit(t_disk, t_app, x), PrefetchBenefit(t_disk, t_app, x - 1)) << x;
  }
  // A slow consumer (P < 2) gains only from the next block, and at most the whole stall.
  EXPECT_DOUBLE_EQ(PrefetchBenefit(t_disk, 10 * kMs, 2), 0.0);
  EXPECT_DOUBLE_EQ(PrefetchBenefit(t_disk, 10 * kMs, 1), 10 * kMs);
  EXPECT_DOUBLE_EQ(PrefetchBenefit(t_disk, 20 * kMs, 1), 15 * kMs);
}

TEST(TipModelTest, EjectCostSpreadsTheRefetchBeyondTheHorizon) {
  const double t_disk = 15 * kMs, t_app = 100 * kUs, t_driver = 20 * kUs;  // P = 150
  // Needed 200 accesses ahead: T_driver over the 50 accesses the buffer is free for.
  EXPECT_DOUBLE_EQ(EjectCost(t_disk, t_app, t_driver, 200), 20 * kUs / 50);
  // Needed 100 ahead (inside the horizon): a prefetch now still stalls 15 - 10 = 5 ms.
  EXPECT_DOUBLE_EQ(EjectCost(t_disk, t_app, t_driver, 100), 20 * kUs + 5 * kMs);
  // Exactly at the horizon: no stall, spread over one access.
  EXPECT_DOUBLE_EQ(EjectCost(t_disk, t_app, t_driver, 150), 20 * kUs);
  // Cost falls with distance: the furthest hinted block is the cheapest to give up.
  EXPECT_GT(EjectCost(t_disk, t_app, t_driver, 160), EjectCost(t_disk, t_app, t_driver, 400));
}

TEST(TipModelTest, LruShrinkCostIsMarginalHitsTimesMissPenalty) {
  EXPECT_DOUBLE_EQ(LruShrinkCost(0.01, 15 * kMs), 150 * kUs);
  EXPECT_DOUBLE_EQ(LruShrinkCost(0, 15 * kMs), 0.0);
}

TEST(TipModelTest, EwmaStartsAtFirstSample) {
  Ewma e(0.125, 42);
  EXPECT_DOUBLE_EQ(e.value(), 42.0);
  e.Add(10);
  EXPECT_DOUBLE_EQ(e.value(), 10.0);
  e.Add(18);
  EXPECT_DOUBLE_EQ(e.value(), 11.0);  // 10 + (18 - 10) / 8
}

TEST(TipModelTest, ClippedEwmaIgnoresALoneOutlierButFollowsALastingChange) {
  Ewma e(0.125, 0);
  e.AddClipped(100, 4);  // the first sample is taken as is
  EXPECT_DOUBLE_EQ(e.value(), 100.0);
  e.AddClipped(10'000, 4);  // counts as 400: 100 + (400 - 100) / 8
  EXPECT_DOUBLE_EQ(e.value(), 137.5);
  e.AddClipped(100, 4);
  EXPECT_DOUBLE_EQ(e.value(), 132.8125);
  for (int i = 0; i < 40; ++i) e.AddClipped(1000, 4);  // a lasting change gets through
  EXPECT_NEAR(e.value(), 1000.0, 10.0);
  const double before = e.value();
  e.AddClipped(10, 4);  // samples below the estimate are never clipped
  EXPECT_DOUBLE_EQ(e.value(), before + (10.0 - before) / 8);
}

TEST(TipModelTest, DecayingRateHalvesEachHalfLife) {
  DecayingRate r(1'000'000'000);
  r.Add(0, 4);
  EXPECT_DOUBLE_EQ(r.Sum(0), 4.0);
  EXPECT_DOUBLE_EQ(r.Sum(1'000'000'000), 2.0);
  EXPECT_DOUBLE_EQ(r.Sum(2'000'000'000), 1.0);
  EXPECT_DOUBLE_EQ(r.Rate(1'000'000'000), 2.0 * std::log(2.0));
  // Steady events every 10 ms approach 100 per second.
  DecayingRate steady(1'000'000'000);
  for (int64_t t = 0; t <= 20'000'000'000; t += 10'000'000) steady.Add(t);
  EXPECT_NEAR(steady.Rate(20'000'000'000), 100.0, 2.0);
}

TEST(TipModelTest, DiskServiceTimeIsTheLatencyOfReadsThatFoundTheDiskIdle) {
  DiskServiceEstimator d(5 * kMs);
  EXPECT_DOUBLE_EQ(d.nanos(), 5 * kMs);  // the assumption until measured
  // Three requests submitted together, served one after another, 10 ms each: the first found
  // the disk idle; the others' completion gaps are 10 ms too.
  const bool first = d.RecordSubmit();
  const bool second = d.RecordSubmit();
  const bool third = d.RecordSubmit();
  EXPECT_TRUE(first);
  EXPECT_FALSE(second);
  EXPECT_FALSE(third);
  EXPECT_EQ(d.in_flight(), 3u);
  d.RecordCompletion(0, 10'000'000, first);
  d.RecordCompletion(0, 20'000'000, second);
  d.RecordCompletion(0, 30'000'000, third);
  EXPECT_DOUBLE_EQ(d.nanos(), 10 * kMs);
  EXPECT_DOUBLE_EQ(d.queued_nanos(), 10 * kMs);
  EXPECT_EQ(d.in_flight(), 0u);
  // Three served at once, 10 ms each: the gaps after the first are 0 (queued_nanos falls), the
  // access time stays.
  for (int i = 0; i < 3; ++i) d.RecordSubmit();
  d.RecordCompletion(50'000'000, 60'000'000, true);
  d.RecordCompletion(50'000'000, 60'000'000, false);
  d.RecordCompletion(50'000'000, 60'000'000, false);
  EXPECT_DOUBLE_EQ(d.nanos(), 10 * kMs);
  EXPECT_LT(d.queued_nanos(), 8 * kMs);
  // A lone request later, 5 ms: the average moves an eighth of the way. A failed one says nothing.
  d.RecordCompletion(100'000'000, 105'000'000, d.RecordSubmit());
  d.RecordSubmit();
  d.RecordCompletion(200'000'000, 200'000'001, true, /*ok=*/false);
  EXPECT_DOUBLE_EQ(d.nanos(), 10 * kMs + (5 * kMs - 10 * kMs) / 8);
  EXPECT_EQ(d.idle_samples(), 3u);
  EXPECT_EQ(d.queued_samples(), 4u);
  EXPECT_EQ(d.in_flight(), 0u);
}

TEST(TipModelTest, DiskServiceTimeFallsBackToQueuedGapsOnADiskThatNeverIdles) {
  DiskServiceEstimator d(5 * kMs);
  d.RecordCompletion(0, 10'000'000, d.RecordSubmit());
  d.RecordSubmit();  // always one more in flight from here on
  int64_t t = 10'000'000;
  for (uint64_t i = 0; i < DiskServiceEstimator::kStaleCompletions; ++i) {
    d.RecordSubmit();
    d.RecordCompletion(t, t + 20'000'000, false);
    t += 20'000'000;
  }
  // The disk slowed to 20 ms and never drained its queue: the gaps say so.
  EXPECT_NEAR(d.nanos(), 20 * kMs, 0.01 * kMs);
}

TEST(TipModelTest, LruMarginalHitsAverageTailAndGhosts) {
  LruMarginalEstimator e(1'000'000'000);
  for (int i = 0; i < 4; ++i) e.RecordTailHit(0);
  for (int i = 0; i < 2; ++i) e.RecordGhostHit(0);
  for (int i = 0; i < 100; ++i) e.RecordAccess(0);
  const double ln2 = std::log(2.0);
  // Tail: 4 ln2 hits/s over 4 buffers; ghosts: 2 ln2 over 4 slots; the mean: 0.75 ln2.
  EXPECT_DOUBLE_EQ(e.MarginalHitsPerSecond(0, 4, 4), 0.75 * ln2);
  EXPECT_DOUBLE_EQ(e.MarginalHitRatio(0, 4, 4), 0.75 * ln2 / (100 * ln2));
  // A queue shorter than k: the tail hits are spread over the buffers it has.
  EXPECT_DOUBLE_EQ(e.MarginalHitsPerSecond(0, 2, 4), (2 * ln2 + 0.5 * ln2) / 2);
  LruMarginalEstimator idle;
  EXPECT_DOUBLE_EQ(idle.MarginalHitRatio(0, 4, 4), 0.0);
}

TEST(TipModelTest, AccuracyStartsFromAPriorAndFollowsOutcomes) {
  AccuracyEstimator a(8, 4096);
  EXPECT_DOUBLE_EQ(a.accuracy(), 1.0);
  a.RecordUnused(8);
  EXPECT_DOUBLE_EQ(a.accuracy(), 0.5);  // (0 + 8) / (0 + 8 + 8)
  a.RecordUsed(16);
  EXPECT_DOUBLE_EQ(a.accuracy(), 0.75);  // (16 + 8) / (24 + 8)
  // Only recent outcomes matter: a long run of misses drives it toward 0.
  for (int i = 0; i < 100'000; ++i) a.RecordUnused();
  EXPECT_LT(a.accuracy(), 0.01);
}

}  // namespace
}  // namespace tipfs::cache
