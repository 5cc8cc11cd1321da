// Seeing what a mount does: per-disk statistics without a disk model, a refused live model change
// that says why, the timeline picture (an SVG with one row per disk) of `tipfs run --timeline`
// and `tipfs stats --timeline`, `tipfs stats --watch` rates, and /metrics over HTTP answered to a
// real client (curl) with names as Prometheus wants them.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

// A port nobody listens on right now (bound to 0, then released).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(a.sin_port);
}

class ObserveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = FuseUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
  }
  // A 4-disk volume with `files` files of 1 MiB, remounted (cold) with `mount_args`.
  void MakeVolume(const std::string& mount_args, int files = 4) {
    volume_ = std::make_unique<TipfsMount>(VolumeSpec{4, "", "--cache-size 16M " + mount_args});
    ASSERT_EQ(volume_->Create(), "");
    ASSERT_EQ(volume_->Mount(), "");
    for (int i = 0; i < files; ++i) {
      ASSERT_TRUE(WriteFileBytes(volume_->Path("f" + std::to_string(i)), PatternBytes(1 << 20, i)));
    }
    ASSERT_EQ(volume_->Unmount(), "");
    ASSERT_EQ(volume_->Mount(), "");
  }
  std::string ReadAllFiles(int files = 4) {
    std::string command = "cat";
    for (int i = 0; i < files; ++i) command += " " + volume_->Path("f" + std::to_string(i));
    return command + " > /dev/null";
  }
  std::unique_ptr<TipfsMount> volume_;
};

TEST_F(ObserveTest, PerDiskStatisticsWithoutADiskModel) {
  MakeVolume("--data-cache direct");
  ASSERT_EQ(RunCommand(ReadAllFiles()), 0);
  const std::string json = ReadFileOrDie(volume_->Path(".tipfs/stats.json"));
  EXPECT_NE(json.find("\"disk_model\":\"none\""), std::string::npos);
  // 4 MiB striped over 4 disks: each disk served reads, and they add up to the file bytes.
  std::regex read_bytes(
      "\"index\":(\\d),\"reads\":(\\d+),\"writes\":\\d+,\"syncs\":\\d+,"
      "\"read_bytes\":(\\d+)");
  uint64_t total = 0;
  int disks = 0;
  for (std::sregex_iterator it(json.begin(), json.end(), read_bytes), end; it != end; ++it) {
    ++disks;
    EXPECT_GT(std::stoull((*it)[2]), 0u) << "disk " << (*it)[1] << " read nothing: " << json;
    total += std::stoull((*it)[3]);
  }
  EXPECT_EQ(disks, 4) << json;
  EXPECT_GE(total, 4u << 20);
  const std::string text = ReadFileOrDie(volume_->Path(".tipfs/stats"));
  EXPECT_NE(text.find("disks, as tipfs saw them"), std::string::npos) << text;
  EXPECT_NE(text.find("\nall "), std::string::npos) << text;
  // No source gave hints: no accuracy to report, rather than a perfect one.
  EXPECT_TRUE(std::regex_search(text, std::regex("\n  manual +[^,]* hinted, 0 blocks consumed, "
                                                 "accuracy -\n")))
      << text;
}

TEST_F(ObserveTest, ALiveModelChangeOnAMountWithoutAModelIsRefusedWithTheReasonLogged) {
  volume_ = std::make_unique<TipfsMount>(VolumeSpec{4, "", ""});
  ASSERT_EQ(volume_->Create(), "");
  const std::string log = volume_->root() + "/daemon.log";
  ASSERT_EQ(volume_->Mount("--log " + log), "");
  const int fd = open(volume_->Path(".tipfs/disk-model").c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(write(fd, "hdd\n", 4), -1);
  EXPECT_EQ(errno, ENODEV) << "no emulated device to change: " << strerror(errno);
  close(fd);
  const std::string logged = ReadFileOrDie(log);
  EXPECT_NE(logged.find(".tipfs/disk-model: refused 'hdd'"), std::string::npos) << logged;
  EXPECT_NE(logged.find("--disk-model none"), std::string::npos) << logged;
  EXPECT_EQ(ReadFileOrDie(volume_->Path(".tipfs/disk-model")), "none\n");
}

// The SVG parses (python3's XML parser) and has one row per disk and a row of stalls.
void ExpectTimelineSvg(const std::string& path, int disks) {
  std::string out;
  const std::string check =
      "python3 -c 'import sys, xml.etree.ElementTree as E\n"
      "root = E.parse(sys.argv[1]).getroot()\n"
      "ns = \"{http://www.w3.org/2000/svg}\"\n"
      "rows = [g for g in root.iter(ns + \"g\") if g.get(\"class\") == \"disk\"]\n"
      "stalls = [g for g in root.iter(ns + \"g\") if g.get(\"class\") == \"stalls\"]\n"
      "bars = sum(len(g.findall(ns + \"rect\")) - 1 for g in rows)\n"
      "print(len(rows), len(stalls), sorted(g.get(\"data-disk\") for g in rows), bars > 0)' " +
      path;
  ASSERT_EQ(RunCommand(check, &out), 0) << out;
  std::string rows;
  for (int d = 0; d < disks; ++d) rows += (d ? ", '" : "'") + std::to_string(d) + "'";
  EXPECT_EQ(out, std::to_string(disks) + " 1 [" + rows + "] True\n");
}

TEST_F(ObserveTest, RunTimelineDrawsOneRowPerDisk) {
  MakeVolume("--disk-model ssd --data-cache direct");
  const std::string svg = volume_->root() + "/run.svg";
  CommandResult run = RunSplit(TipfsBinary() + " run --mount " + volume_->mountpoint() +
                               " --timeline " + svg + " -- sh -c '" + ReadAllFiles() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("tipfs run: timeline " + svg + ": 4 disks busy"), std::string::npos)
      << run.err;
  ExpectTimelineSvg(svg, 4);
  // Without a mount to record, --timeline is a usage error that names the problem.
  CommandResult none = RunSplit(TipfsBinary() + " run --mount " + volume_->root() + " --timeline " +
                                svg + " -- true");
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_NE(none.err.find(volume_->root() + ": not a tipfs mount point"), std::string::npos)
      << none.err;
}

TEST_F(ObserveTest, StatsTimelineRecordsForSecondsWhileAProgramReads) {
  MakeVolume("--disk-model ssd --data-cache direct", 8);
  const std::string svg = volume_->root() + "/stats.svg";
  // The reader starts once the recording has: it waits for the file the recording creates.
  const std::string reader = "while [ ! -e " + svg + " ]; do sleep 0.01; done; " + ReadAllFiles(8);
  CommandResult both = RunSplit("(" + reader + ") & " + TipfsBinary() + " stats --timeline " + svg +
                                " --seconds 1 " + volume_->mountpoint() + "; wait");
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_NE(both.out.find("timeline " + svg + ": 4 disks busy"), std::string::npos) << both.out;
  ExpectTimelineSvg(svg, 4);
}

TEST_F(ObserveTest, WatchPrintsRatesPerInterval) {
  MakeVolume("--data-cache direct");
  CommandResult watch =
      RunSplit(TipfsBinary() + " stats --watch 0.2 --count 3 " + volume_->mountpoint());
  ASSERT_EQ(watch.exit_code, 0) << watch.err;
  std::istringstream lines(watch.out);
  std::string header, line;
  std::getline(lines, header);
  EXPECT_NE(header.find("read MB/s"), std::string::npos) << watch.out;
  EXPECT_NE(header.find("hits/s"), std::string::npos) << watch.out;
  int rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    EXPECT_TRUE(std::regex_match(line, std::regex("( +[0-9.]+){10}"))) << line;
  }
  EXPECT_EQ(rows, 3) << watch.out;
}

TEST_F(ObserveTest, MetricsOverHttpAnswerARealClientWithPrometheusNames) {
  if (RunCommand("command -v curl") != 0) GTEST_SKIP() << "curl is not installed";
  const int port = FreePort();
  ASSERT_GT(port, 0);
  MakeVolume("--metrics-listen 127.0.0.1:" + std::to_string(port));
  ASSERT_EQ(RunCommand(ReadAllFiles()), 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  std::string metrics;
  ASSERT_EQ(RunCommand("curl -sSf --max-time 30 " + url + "/metrics", &metrics), 0) << metrics;
  EXPECT_NE(metrics.find("tipfs_demand_stall_seconds_total"), std::string::npos);
  EXPECT_NE(metrics.find("tipfs_disk_io_read_bytes_total{disk=\"3\",purpose=\"demand\"}"),
            std::string::npos);
  // The exposition format: each metric declared once, names in base units, counters _total.
  std::istringstream in(metrics);
  std::string line;
  std::set<std::string> declared;
  std::regex type_line("# TYPE (tipfs_[a-z0-9_]+) (counter|gauge)");
  std::regex sample(
      "(tipfs_[a-z0-9_]+)(\\{[^}]*\\})? -?[0-9.e+-]+|(tipfs_[a-z0-9_]+)(\\{[^}]*\\})? NaN");
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (std::regex_match(line, m, type_line)) {
      EXPECT_TRUE(declared.insert(m[1]).second) << "declared twice: " << m[1];
      EXPECT_EQ(m[1].str().find("nanos"), std::string::npos) << line;
      if (m[2] == "counter") {
        EXPECT_EQ(m[1].str().substr(m[1].str().size() - 6), "_total") << line;
      }
      continue;
    }
    EXPECT_TRUE(std::regex_match(line, sample)) << "not a sample: " << line;
  }
  EXPECT_GT(declared.size(), 30u);
  std::string code;
  RunCommand("curl -s -o /dev/null -w '%{http_code}' " + url + "/other", &code);
  EXPECT_EQ(code, "404");
  // The same text as the control file (both render the same counters; values move).
  EXPECT_NE(ReadFileOrDie(volume_->Path(".tipfs/metrics")).find("# TYPE tipfs_demand_reads_total"),
            std::string::npos);
}

TEST_F(ObserveTest, StreamsListsHintStreamsByProcessAndSource) {
  MakeVolume("--data-cache direct");
  CommandResult none = RunSplit(TipfsBinary() + " stats --streams " + volume_->mountpoint());
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(none.out, "0 hint streams\n");
  // A process that disclosed two files and reads nothing: its stream stays while it lives.
  const std::string ready = volume_->root() + "/ready";
  const std::string holder = "PYTHONPATH=" TIPFS_SOURCE_DIR
                             "/python python3 -c 'import sys, time, tipfs\n"
                             "s = tipfs.HintStream(sys.argv[1])\n"
                             "s.disclose([sys.argv[1] + \"/f0\", sys.argv[1] + \"/f1\"])\n"
                             "open(sys.argv[2], \"w\").close()\n"
                             "time.sleep(600)' " +
                             volume_->mountpoint() + " " + ready + " >/dev/null 2>&1 & echo $!";
  std::string pid;
  ASSERT_EQ(RunCommand(holder, &pid), 0);
  for (int i = 0; i < 3000 && access(ready.c_str(), F_OK) != 0; ++i) usleep(10000);
  CommandResult listed = RunSplit(TipfsBinary() + " stats --streams " + volume_->mountpoint());
  RunCommand("kill " + pid);
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_TRUE(std::regex_search(listed.out, std::regex("^1 hint stream\n"))) << listed.out;
  EXPECT_TRUE(std::regex_search(
      listed.out, std::regex("stream " + std::to_string(std::stoi(pid)) + " of pid " +
                             std::to_string(std::stoi(pid)) + " \\(python3\\), reader: ")))
      << listed.out;
  EXPECT_TRUE(std::regex_search(listed.out,
                                std::regex("\n  manual +2[.0]* MiB outstanding; source accuracy ")))
      << listed.out;
}

}  // namespace
}  // namespace tipfs::testing
