// util/statistics: tickers count exactly under concurrency, read back by name, and export in the
// Prometheus text format.
#include "util/statistics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

namespace tipfs {
namespace {

TEST(StatisticsTest, CountsAndNamesEveryTicker) {
  Statistics stats;
  RecordTick(&stats, DISK_READ_BYTES, 4096);
  RecordTick(&stats, DISK_READ_BYTES, 4096);
  RecordTick(&stats, DISK_READ_OPS);
  RecordTick(nullptr, DISK_READ_OPS, 7);  // no collector: nothing happens
  EXPECT_EQ(stats.Get(DISK_READ_BYTES), 8192u);
  EXPECT_EQ(stats.Get(DISK_READ_OPS), 1u);
  EXPECT_EQ(stats.Get(FUSE_READ_OPS), 0u);
  EXPECT_STREQ(TickerName(DISK_BUSY_NANOS), "disk.busy.nanos");
  EXPECT_STREQ(TickerName(FUSE_WRITE_BYTES), "fuse.write.bytes");

  std::string text = stats.ToString();
  EXPECT_NE(text.find("disk.read.bytes 8192\n"), std::string::npos) << text;
  EXPECT_NE(text.find("fuse.read.ops 0\n"), std::string::npos) << text;
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  EXPECT_EQ(lines, static_cast<size_t>(TICKER_ENUM_MAX));

  auto snapshot = stats.Snapshot();
  EXPECT_EQ(snapshot[DISK_READ_BYTES], 8192u);
  stats.Reset();
  EXPECT_EQ(stats.Get(DISK_READ_BYTES), 0u);
}

TEST(StatisticsTest, ConcurrentRecordingLosesNothing) {
  Statistics stats;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&stats] {
      for (int i = 0; i < 100000; ++i) RecordTick(&stats, DISK_WRITE_OPS);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(stats.Get(DISK_WRITE_OPS), 400000u);
}

TEST(StatisticsTest, PrometheusTextFormat) {
  Statistics stats;
  stats.Record(DISK_SYNC_OPS, 3);
  std::string out = stats.ToPrometheus();
  EXPECT_NE(out.find("# HELP tipfs_disk_sync_ops_total disk.sync.ops\n"
                     "# TYPE tipfs_disk_sync_ops_total counter\n"
                     "tipfs_disk_sync_ops_total 3\n"),
            std::string::npos)
      << out;

  EXPECT_EQ(PrometheusName("disk.queue-depth avg"), "tipfs_disk_queue_depth_avg");

  std::string sample;
  AppendPrometheusSample(&sample, "tipfs_x", {{"path", "a\"b\\c\nd"}, {"disk", "1"}}, 0.5);
  EXPECT_EQ(sample, "tipfs_x{path=\"a\\\"b\\\\c\\nd\",disk=\"1\"} 0.5\n");
  sample.clear();
  AppendPrometheusSample(&sample, "tipfs_y", {}, 12345678901.0);
  AppendPrometheusSample(&sample, "tipfs_y", {}, std::nan(""));
  AppendPrometheusSample(&sample, "tipfs_y", {}, -INFINITY);
  EXPECT_EQ(sample, "tipfs_y 12345678901\ntipfs_y NaN\ntipfs_y -Inf\n");

  std::string header;
  AppendPrometheusHeader(&header, "tipfs_z", "gauge", "line one\nback\\slash");
  EXPECT_EQ(header, "# HELP tipfs_z line one\\nback\\\\slash\n# TYPE tipfs_z gauge\n");
}

}  // namespace
}  // namespace tipfs
