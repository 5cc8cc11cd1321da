// EmulatedArray: what the mount uses. Disks built from a spec run in parallel, a run-time spec
// changes every disk, statistics come back per disk as structs, text, Prometheus and JSON.
#include "stripe/emulation/emulated_array.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/support/mem_disk.h"
#include "util/clock.h"

namespace tipfs::stripe {
namespace {

using testing::MemDisk;

constexpr int64_t kMs = kNanosPerMilli;

class EmulatedArrayTest : public ::testing::Test {
 protected:
  void Make(const std::string& spec, uint32_t disks) {
    Result<std::shared_ptr<EmulatedArray>> array =
        EmulatedArray::Create(spec, &clock_, &statistics_, /*burn_overhead=*/false);
    ASSERT_TRUE(array.ok()) << array.status().ToString();
    array_ = *array;
    auto wrap = array_->WrapFunction();
    for (uint32_t i = 0; i < disks; ++i) {
      disks_.push_back(wrap(std::make_unique<MemDisk>("mem" + std::to_string(i)), i));
    }
  }

  // Reads 4000 bytes from object 1 of `disk`; returns where the completion time will be written.
  int64_t* Read(uint32_t disk, ObjectId object = 1) {
    done_at_.push_back(std::make_unique<int64_t>(-1));
    int64_t* at = done_at_.back().get();
    DiskRequest r;
    r.object = object;
    r.length = sizeof(buffer_);
    r.buffer = buffer_;
    r.done = [this, at](Result<uint64_t>) { *at = clock_.NowNanos() - start_; };
    disks_[disk]->Submit(std::move(r));
    return at;
  }

  FakeClock clock_;
  const int64_t start_ = clock_.NowNanos();
  Statistics statistics_;
  std::shared_ptr<EmulatedArray> array_;
  std::vector<std::unique_ptr<Disk>> disks_;
  std::vector<std::unique_ptr<int64_t>> done_at_;
  char buffer_[4000];
};

TEST_F(EmulatedArrayTest, FourDisksServeFourRequestsInTheTimeOfOne) {
  Make("hdd,access=10ms,bw=1MB/s", 4);
  std::vector<int64_t*> at;
  for (uint32_t i = 0; i < 4; ++i) at.push_back(Read(i));
  clock_.Advance(kNanosPerSecond);
  for (int64_t* t : at) EXPECT_EQ(*t, 14 * kMs);

  // The same four on one disk queue behind each other.
  std::vector<int64_t*> queued;
  const int64_t t0 = clock_.NowNanos() - start_;
  for (ObjectId o = 10; o < 14; ++o) queued.push_back(Read(0, o));
  clock_.Advance(kNanosPerSecond);
  EXPECT_EQ(*queued[3], t0 + 4 * 14 * kMs);

  std::vector<DiskStats> stats = array_->Stats();
  ASSERT_EQ(stats.size(), 4u);
  EXPECT_EQ(stats[0].reads, 5u);
  EXPECT_EQ(stats[3].reads, 1u);
  DiskStats total = SumDiskStats(stats);
  EXPECT_EQ(total.reads, 8u);
  EXPECT_EQ(total.busy_ns, 8 * 14 * kMs);
  EXPECT_EQ(total.max_queue_depth, 4u);
  // Disk 0 was busy 70 of the elapsed time, the others 14: the array's mean utilization.
  EXPECT_DOUBLE_EQ(total.utilization(), (70.0 + 3 * 14.0) / (4 * stats[0].elapsed_ns / 1e6));
}

TEST_F(EmulatedArrayTest, RunTimeSpecChangesEveryDisk) {
  Make("hdd,access=10ms,bw=1MB/s", 2);
  ASSERT_TRUE(array_->Update("L=5ms,slowdown=2").ok());
  EXPECT_EQ(array_->spec(), "hdd,access=10ms,bw=1MB/s,L=5ms,slowdown=2");
  int64_t* a = Read(0);
  int64_t* b = Read(1);
  clock_.Advance(kNanosPerSecond);
  EXPECT_EQ(*a, 28 * kMs + 5 * kMs);
  EXPECT_EQ(*b, 28 * kMs + 5 * kMs);

  // A bad change is refused whole and changes nothing.
  Status bad = array_->Update("L=1ms,slowdown=0");
  EXPECT_EQ(bad.error(), EINVAL);
  EXPECT_EQ(bad.message(), "slowdown=0: must be positive; expected 0 < K <= 1000");
  EXPECT_EQ(array_->config().latency_ns, 5 * kMs);

  // A whole new profile replaces the model.
  ASSERT_TRUE(array_->Update("none").ok());
  EXPECT_EQ(array_->spec(), "none");
  int64_t* c = Read(0);
  clock_.Advance(0);
  EXPECT_EQ(*c, kNanosPerSecond);  // MemDisk is instant and `none` adds nothing
}

TEST_F(EmulatedArrayTest, CreateRefusesABadSpec) {
  Result<std::shared_ptr<EmulatedArray>> array = EmulatedArray::Create("hdd,L=2", &clock_);
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().message(), "L=2: missing unit (accepted: ns, us, ms, s)");
}

TEST_F(EmulatedArrayTest, StatisticsOutliveTheDisksAndPrintInEveryFormat) {
  Make("hdd,access=10ms,bw=1MB/s", 3);
  Read(0);
  Read(2);
  Read(2, 2);
  clock_.Advance(kNanosPerSecond);
  disks_.clear();  // the volume is gone; its statistics are not

  std::vector<DiskStats> stats = array_->Stats();
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_EQ(stats[2].reads, 2u);
  EXPECT_EQ(stats[1].reads, 0u);

  std::string text = FormatDiskStats(stats);
  EXPECT_NE(text.find("disk  requests"), std::string::npos) << text;
  EXPECT_NE(text.find("\nall "), std::string::npos) << text;

  std::string metrics;
  AppendDiskStatsPrometheus(&metrics, stats);
  EXPECT_NE(metrics.find("# TYPE tipfs_disk_model_reads_total counter\n"), std::string::npos);
  EXPECT_NE(metrics.find("tipfs_disk_model_reads_total{disk=\"2\"} 2\n"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tipfs_disk_model_busy_seconds_total{disk=\"2\"} 0.028\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tipfs_disk_model_queue_depth_max{disk=\"2\"} 2\n"), std::string::npos);
  // Disk 2 held two requests for one service time (14 ms) and one for another: 42 ms x requests
  // over the 1 s the statistics cover.
  EXPECT_NE(metrics.find("tipfs_disk_model_elapsed_seconds_total{disk=\"2\"} 1\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tipfs_disk_model_queue_depth_seconds_total{disk=\"2\"} 0.042\n"),
            std::string::npos)
      << metrics;

  std::string json = DiskStatsJson(stats);
  EXPECT_EQ(json.rfind("{\"disks\":[{\"index\":0,\"reads_total\":1,", 0), 0u) << json;
  EXPECT_NE(json.find("{\"index\":2,\"reads_total\":2,"), std::string::npos) << json;

  array_->ResetStats();
  EXPECT_EQ(SumDiskStats(array_->Stats()).reads, 0u);
}

}  // namespace
}  // namespace tipfs::stripe
