// The TIP manager's estimators measured through the cache (issue 16, item 4): T_disk as the
// paper's access time of one read, on a disk serving one read at a time and on one serving
// several at once; T_driver as the whole CPU cost of a fetch, not only its submission; T_hit as
// the lookup and the copy, not the bookkeeping around them. The rig's CpuFakeClock gives each
// stage a CPU cost, so each test sees which stages an estimate counts.
#include <gtest/gtest.h>

#include <string>

#include "cache/file_cache.h"
#include "stripe/disk_wrapper.h"
#include "tests/cache/cache_rig.h"

namespace tipfs::cache::testing {
namespace {

constexpr uint32_t kBlock = 4096;
constexpr int64_t kMs = kNanosPerMilli;
constexpr int64_t kUs = kNanosPerMicro;

// Answers each read `latency` after it starts: at once on a parallel disk (every read is served
// at the same time, as an SSD or an OSD serves several), after the previous one on a FIFO disk.
// Each submission costs the submitting thread `submit_cpu` of CPU (the driver's work).
class LatencyDisk : public stripe::DiskWrapper {
 public:
  LatencyDisk(std::unique_ptr<stripe::Disk> inner, FakeClock* clock, int64_t latency, bool parallel,
              int64_t submit_cpu)
      : DiskWrapper(std::move(inner)),
        clock_(clock),
        latency_(latency),
        parallel_(parallel),
        submit_cpu_(submit_cpu) {}

  void Submit(stripe::DiskRequest request) override {
    if (request.kind != stripe::DiskRequest::Kind::kRead) return inner_->Submit(std::move(request));
    CpuFakeClock::Charge(submit_cpu_);
    // The time without the rig clock's charge for a reading: the disk's, not the cache's.
    const int64_t now = clock_->FakeClock::NowNanos();
    const int64_t done_at = (parallel_ ? now : std::max(now, busy_until_)) + latency_;
    busy_until_ = done_at;
    auto done = std::move(request.done);
    request.done = [this, done_at, done = std::move(done)](Result<uint64_t> r) mutable {
      clock_->RunAt(done_at,
                    [done = std::move(done), r = std::move(r)]() mutable { done(std::move(r)); });
    };
    inner_->Submit(std::move(request));
  }

 private:
  FakeClock* const clock_;
  const int64_t latency_;
  const bool parallel_;
  const int64_t submit_cpu_;
  int64_t busy_until_ = 0;  // the tests submit from one thread
};

struct Rig : CacheRig {
  Rig(bool parallel, int64_t latency, int64_t submit_cpu = 0, uint64_t blocks = 64)
      : CacheRig(1, kBlock, TestOptions(blocks), Wrap::kNone,
                 [parallel, latency, submit_cpu](std::unique_ptr<stripe::Disk> d, Clock* c) {
                   return std::make_unique<LatencyDisk>(std::move(d), static_cast<FakeClock*>(c),
                                                        latency, parallel, submit_cpu);
                 }) {}
};

ReadContext Reader() {
  ReadContext ctx;
  ctx.stream = 7;
  ctx.pid = 7;
  return ctx;
}

// Eight reads of four blocks each, all on the one disk: each read's four fetches go out together.
void ReadInFours(Rig* rig, uint64_t file_size) {
  for (uint64_t i = 0; i < 8; ++i) {
    rig->ReadWaiting(Reader(), 1, i * 4 * kBlock, 4 * kBlock, file_size);
    rig->clock.Advance(50 * kMs);  // the disk drains between them
  }
}

TEST(TipEstimatorsTest, DiskTimeIsTheAccessTimeOnADiskServingSeveralReadsAtOnce) {
  Rig rig(/*parallel=*/true, 10 * kMs);
  const std::string data = RandomBytes(64 * kBlock, 1);
  rig.WriteUnderneath(1, data);
  ReadInFours(&rig, data.size());
  const CacheStats s = rig.cache->Stats();
  // Every read took 10 ms. Completion minus the later of submission and the previous completion
  // gave 10 ms for the first of each four and 0 for the other three: about 2 ms.
  EXPECT_NEAR(s.t_disk_nanos[0], 10.0 * kMs, 0.1 * kMs);
  ASSERT_EQ(s.disk_estimates.size(), 1u);
  EXPECT_EQ(s.disk_estimates[0].idle_samples, 8u);
  EXPECT_EQ(s.disk_estimates[0].queued_samples, 24u);
  EXPECT_LT(s.disk_estimates[0].queued_nanos, 1.0 * kMs);  // what the old estimate measured
  EXPECT_EQ(s.disk_estimates[0].in_flight, 0u);
}

TEST(TipEstimatorsTest, DiskTimeIsTheServiceTimeOnADiskServingOneReadAtATime) {
  Rig rig(/*parallel=*/false, 10 * kMs);
  const std::string data = RandomBytes(64 * kBlock, 2);
  rig.WriteUnderneath(1, data);
  ReadInFours(&rig, data.size());
  const CacheStats s = rig.cache->Stats();
  // The fourth read of each four waited 40 ms, 30 of them queued: not the disk's access time.
  EXPECT_NEAR(s.t_disk_nanos[0], 10.0 * kMs, 0.1 * kMs);
  EXPECT_NEAR(s.disk_estimates[0].queued_nanos, 10.0 * kMs, 0.1 * kMs);
}

TEST(TipEstimatorsTest, DriverTimeCountsTheFetchsCompletionNotOnlyItsSubmission) {
  constexpr int64_t kSubmit = 50 * kUs;
  constexpr int64_t kPerStage = 10 * kUs;
  Rig rig(/*parallel=*/true, kMs, kSubmit);
  const std::string data = RandomBytes(256 * kBlock, 3);
  rig.WriteUnderneath(1, data);
  // Each stage of the data path that reads the clock costs kPerStage: the fetch's submission
  // and its completion each do, besides the disk's own kSubmit.
  rig.clock.set_cpu_per_clock_read(kPerStage);
  // 256 misses: at least four of them sampled (one fetch in 64).
  for (uint64_t i = 0; i < 256; ++i) rig.ReadWaiting(Reader(), 1, i * kBlock, kBlock, data.size());
  const CacheStats s = rig.cache->Stats();
  // Timing the submission call only gave exactly kSubmit.
  EXPECT_GE(s.t_driver_nanos, kSubmit + 2 * kPerStage - 1);
  EXPECT_LE(s.t_driver_nanos, kSubmit + 4 * kPerStage);
}

TEST(TipEstimatorsTest, HitTimeIsTheLookupAndTheCopyOnly) {
  Rig rig(/*parallel=*/true, kMs);
  const std::string data = RandomBytes(32 * kBlock, 4);
  rig.WriteUnderneath(1, data);
  for (uint64_t i = 0; i < 32; ++i) rig.ReadWaiting(Reader(), 1, i * kBlock, kBlock, data.size());
  // From here every clock reading costs CPU: the reader's timing, the manager's consumption and
  // wake-up and the end-of-read stamp around a hit read the clock; the lookup and copy do not.
  rig.clock.set_cpu_per_clock_read(10 * kUs);
  for (int pass = 0; pass < 4; ++pass) {
    for (uint64_t i = 0; i < 32; ++i) {
      ASSERT_EQ(rig.Read(Reader(), 1, i * kBlock, kBlock, data.size()),
                data.substr(i * kBlock, kBlock));
    }
  }
  const CacheStats s = rig.cache->Stats();
  EXPECT_EQ(s.demand_hits, 128u);
  // Timing the whole call counted the end-of-read stamp: 10 us per hit.
  EXPECT_LT(s.t_hit_nanos, 1.0 * kUs);
}

}  // namespace
}  // namespace tipfs::cache::testing
