// The emulated disk array on a real mount (issue 3): `tipfs mount --disk-model` wraps every disk,
// `.tipfs/disk-model` changes the model live, and the per-disk counters of `.tipfs/stats.json`
// show what the model did. The tests assert on those counters (requests, positioning, modelled
// busy time, queue depth, completions), computed from the same DiskModelConfig the daemon
// parses, and compare measured durations only where the behaviour is a duration, with bounds
// explained where they are set.
//
// Each test writes its data through a mount without a model, then remounts with the model under
// test: a fresh daemon has a cold cache, and with --data-cache direct and --readahead off every
// read of one stripe unit is exactly one request to one disk.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "stripe/emulation/disk_model_config.h"
#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

constexpr uint64_t kUnit = 64 * 1024;  // the default stripe unit = the cache block
constexpr int kDisks = 4;

int64_t Nanos(double seconds) { return std::llround(seconds * 1e9); }

// Per-disk counters from the {"disks":[{...},...]} member of .tipfs/stats.json (flat objects of
// numbers, as stripe::DiskStatsJson writes them).
using DiskCounters = std::map<std::string, double>;

std::vector<DiskCounters> ParseDisks(const std::string& json) {
  std::vector<DiskCounters> disks;
  size_t pos = json.find("\"disks\":[");
  if (pos == std::string::npos) return disks;
  pos += 9;
  while (pos < json.size() && json[pos] == '{') {
    size_t end = json.find('}', pos);
    if (end == std::string::npos) break;
    DiskCounters counters;
    std::stringstream fields(json.substr(pos + 1, end - pos - 1));
    std::string field;
    while (std::getline(fields, field, ',')) {
      size_t colon = field.find(':');
      if (colon == std::string::npos || field.size() < 2 || field[0] != '"') continue;
      counters[field.substr(1, colon - 2)] = std::strtod(field.c_str() + colon + 1, nullptr);
    }
    disks.push_back(counters);
    pos = end + 1;
    if (pos < json.size() && json[pos] == ',') ++pos;
  }
  return disks;
}

// The "disk_model" member of .tipfs/stats.json.
std::string JsonDiskModel(const std::string& json) {
  const std::string key = "\"disk_model\":\"";
  size_t pos = json.find(key);
  if (pos == std::string::npos) return "";
  pos += key.size();
  return json.substr(pos, json.find('"', pos) - pos);
}

// Modelled service time of one random read of `bytes`, computed as DiskModel does.
int64_t RandomReadServiceNanos(const std::string& spec, uint64_t bytes) {
  Result<stripe::DiskModelConfig> config = stripe::ParseDiskModelSpec(spec);
  EXPECT_TRUE(config.ok()) << spec;
  if (!config.ok()) return 0;
  return std::llround(config->slowdown * static_cast<double>(config->PositioningNanos())) +
         std::llround(config->slowdown * static_cast<double>(config->TransferNanos(bytes)));
}

double Sum(const std::vector<DiskCounters>& disks, const std::string& name) {
  double total = 0;
  for (const DiskCounters& d : disks) total += d.at(name);
  return total;
}

class EmulatedMountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason = FuseUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
    VolumeSpec spec;
    spec.disks = kDisks;
    spec.mount_args = "--data-cache direct --readahead off --cache-size 1M";
    mount_ = std::make_unique<TipfsMount>(spec);
    ASSERT_EQ(mount_->Create(), "");
    // One stripe unit per disk, written without a model.
    ASSERT_EQ(mount_->Mount(), "");
    data_ = PatternBytes(kDisks * kUnit, 3);
    ASSERT_TRUE(WriteFileBytes(mount_->Path("data"), data_));
    ASSERT_EQ(mount_->Unmount(), "");
  }

  void TearDown() override { mount_.reset(); }

  // Remounts with `spec` as the disk model: a new daemon, cold cache, zeroed counters.
  void MountWithModel(const std::string& spec) {
    ASSERT_EQ(mount_->Mount("--disk-model '" + spec + "'"), "");
  }

  // Reads stripe unit `unit` of the data file with O_DIRECT and checks its bytes.
  void ReadUnit(int unit) {
    int fd = open(mount_->Path("data").c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    ASSERT_GE(fd, 0) << strerror(errno);
    void* buffer = std::aligned_alloc(4096, kUnit);
    ssize_t n = pread(fd, buffer, kUnit, static_cast<off_t>(unit * kUnit));
    int read_errno = errno;
    close(fd);
    EXPECT_EQ(n, static_cast<ssize_t>(kUnit)) << strerror(read_errno);
    EXPECT_EQ(n > 0 ? memcmp(buffer, data_.data() + unit * kUnit, kUnit) : 1, 0)
        << "unit " << unit << " read back different bytes";
    std::free(buffer);
  }

  std::string StatsJson() const { return ReadFileOrDie(mount_->Path(".tipfs/stats.json")); }
  std::vector<DiskCounters> Disks() const { return ParseDisks(StatsJson()); }

  // Writes `spec` to .tipfs/disk-model; returns 0 or the errno of the refusal.
  int WriteDiskModel(const std::string& spec) {
    int fd = open(mount_->Path(".tipfs/disk-model").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    ssize_t n = write(fd, spec.data(), spec.size());
    int error = n < 0 ? errno : (n == static_cast<ssize_t>(spec.size()) ? 0 : EIO);
    close(fd);
    return error;
  }

  // The first line of .tipfs/disk-model: the canonical spec.
  std::string CurrentSpec() const {
    std::string text = ReadFileOrDie(mount_->Path(".tipfs/disk-model"));
    return text.substr(0, text.find('\n'));
  }

  std::unique_ptr<TipfsMount> mount_;
  std::string data_;
};

TEST_F(EmulatedMountTest, OneRandomReadTakesTheModelledTimeOfTheHddProfile) {
  MountWithModel("hdd");
  const int64_t service = RandomReadServiceNanos("hdd", kUnit);
  ASSERT_GT(service, 12'000'000) << "hdd: a random 64 KiB read costs a positioning";

  auto start = std::chrono::steady_clock::now();
  ReadUnit(2);
  const int64_t wall =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();

  std::vector<DiskCounters> disks = Disks();
  ASSERT_EQ(disks.size(), static_cast<size_t>(kDisks));
  EXPECT_EQ(Sum(disks, "reads_total"), 1) << "one 64 KiB read is one disk request";
  int served = -1;
  for (int d = 0; d < kDisks; ++d) {
    if (disks[d].at("reads_total") == 1) served = d;
  }
  ASSERT_GE(served, 0);
  const DiskCounters& disk = disks[served];
  EXPECT_EQ(disk.at("read_bytes_total"), kUnit);
  EXPECT_EQ(disk.at("positioned_total"), 1) << "a cold random read pays the positioning";
  EXPECT_EQ(disk.at("sequential_total"), 0);
  EXPECT_EQ(Nanos(disk.at("busy_seconds_total")), service) << "seek + half turn + 64 KiB / rate";
  EXPECT_EQ(disk.at("queue_wait_seconds_total"), 0);
  EXPECT_EQ(disk.at("queue_depth_max"), 1);
  EXPECT_EQ(disk.at("completed_total"), 1);
  EXPECT_EQ(disk.at("errors_total"), 0);
  // Delivered no earlier than the model's deadline (how little later is a measurement: the QD 1
  // rows of bench/emulation/fidelity.sh), and the reader waited at least as long.
  EXPECT_GE(Nanos(disk.at("response_seconds_total")), service);
  EXPECT_GE(wall, service);
}

TEST_F(EmulatedMountTest, FourDisksServeFourConcurrentReadsInTheTimeOfOne) {
  // hold=on keeps every completion back: a reader's request stays in flight on its disk until
  // the hold ends, however the scheduler runs the readers. All four in flight in one snapshot of
  // the counters is the proof that the daemon issued them together, to four disks, and did not
  // wait for one before sending the next (how long they take together is a measurement:
  // bench/emulation/fidelity.sh, 4 disks at queue depth 4).
  const std::string spec = "hdd,access=50ms";
  MountWithModel(spec);
  const int64_t service = RandomReadServiceNanos(spec, kUnit);
  ASSERT_EQ(WriteDiskModel("hold=on\n"), 0);
  EXPECT_EQ(CurrentSpec(), spec + ",hold=on");

  std::vector<std::thread> readers;
  // Ends the hold on every path out of the test, so the readers finish and the mount unmounts.
  struct Release {
    std::function<void()> run;
    ~Release() { run(); }
  } release{[this, &readers] {
    (void)WriteDiskModel("hold=off\n");
    for (std::thread& t : readers) t.join();
  }};
  for (int unit = 0; unit < kDisks; ++unit) {
    readers.emplace_back([this, unit] { ReadUnit(unit); });  // unit k: disk (start + k) mod 4
  }
  // A bound on waiting for the readers to be scheduled at all, not a measure of anything.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::vector<DiskCounters> held = Disks();
  while (Sum(held, "in_flight") < kDisks && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    held = Disks();
  }
  ASSERT_EQ(held.size(), static_cast<size_t>(kDisks));
  for (int d = 0; d < kDisks; ++d) {
    EXPECT_EQ(held[d].at("in_flight"), 1) << "disk " << d << ": one reader's request, held";
    EXPECT_EQ(held[d].at("completed_total"), 0) << "disk " << d;
  }

  ASSERT_EQ(WriteDiskModel("hold=off\n"), 0);
  for (std::thread& t : readers) t.join();
  readers.clear();
  EXPECT_EQ(CurrentSpec(), spec);

  std::vector<DiskCounters> disks = Disks();
  ASSERT_EQ(disks.size(), static_cast<size_t>(kDisks));
  for (int d = 0; d < kDisks; ++d) {
    SCOPED_TRACE("disk " + std::to_string(d));
    EXPECT_EQ(disks[d].at("reads_total"), 1);
    EXPECT_EQ(disks[d].at("in_flight"), 0);
    EXPECT_EQ(disks[d].at("queue_depth_max"), 1) << "nothing queued behind another request";
    EXPECT_EQ(disks[d].at("queue_wait_seconds_total"), 0);
    EXPECT_EQ(Nanos(disks[d].at("busy_seconds_total")), service) << "one service time per disk";
    EXPECT_EQ(disks[d].at("completed_total"), 1);
  }
}

TEST_F(EmulatedMountTest, ChangingTheModelLiveAppliesToLaterRequestsAndBadSpecsChangeNothing) {
  MountWithModel("hdd");
  const int64_t hdd = RandomReadServiceNanos("hdd", kUnit);
  const int64_t ssd = RandomReadServiceNanos("ssd", kUnit);
  auto total_busy = [this] { return Nanos(Sum(Disks(), "busy_seconds_total")); };

  ReadUnit(0);
  EXPECT_EQ(total_busy(), hdd);
  EXPECT_EQ(CurrentSpec(), "hdd");

  // Keys alone apply on top of the current model.
  ASSERT_EQ(WriteDiskModel("slowdown=2\n"), 0);
  EXPECT_EQ(CurrentSpec(), "hdd,slowdown=2");
  EXPECT_EQ(JsonDiskModel(StatsJson()), "hdd,slowdown=2");
  std::string stats_text;
  ASSERT_EQ(RunCommand(TipfsBinary() + " stats " + mount_->mountpoint(), &stats_text), 0);
  EXPECT_NE(stats_text.find("disk model: hdd,slowdown=2\n"), std::string::npos) << stats_text;
  ReadUnit(1);  // another disk: positioned again, now twice as slow
  EXPECT_EQ(total_busy(), hdd + 2 * hdd);

  // Refused with EINVAL, and the model stays as it was.
  for (const char* bad : {"slowdown=-1", "L=5", "floppy", "hdd,wobble=1", "slowdown=2,,L=1ms"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(WriteDiskModel(bad), EINVAL);
    EXPECT_EQ(CurrentSpec(), "hdd,slowdown=2");
  }
  ReadUnit(2);
  EXPECT_EQ(total_busy(), 3 * hdd + 2 * hdd);

  // A whole spec replaces the model.
  ASSERT_EQ(WriteDiskModel("ssd"), 0);
  EXPECT_EQ(CurrentSpec(), "ssd");
  EXPECT_EQ(JsonDiskModel(StatsJson()), "ssd");
  ReadUnit(3);
  EXPECT_EQ(total_busy(), 5 * hdd + ssd);
  EXPECT_EQ(Sum(Disks(), "reads_total"), 4);
}

TEST_F(EmulatedMountTest, BadDiskModelAtMountIsOneLineNamingTheValueAndNothingIsMounted) {
  struct Case {
    const char* spec;
    const char* names;     // the offending value, as the message must quote it
    const char* accepted;  // what is accepted instead
  };
  const Case cases[] = {
      {"floppy", "'floppy'", "hp-c2247, hdd, ssd, nvme, none"},
      {"hdd,L=5", "L=5", "ns, us, ms, s"},
      {"hdd,L=5parsecs", "'parsecs'", "ns, us, ms, s"},
      {"hdd,wobble=1", "'wobble'", "access, seek, rpm, bw, G, L, o, g, slowdown, queue"},
      {"hdd,L=-2ms", "L=-2ms", "ns, us, ms, s"},
      {"hdd,L=30s", "L=30s", "at most 10s"},
      {"hdd,bw=5kB/s", "bw=5kB/s", "at least 10kB/s"},
      {"hdd,G=1ms", "G=1ms", "at most 100us per byte"},
      {"hdd,slowdown=0", "slowdown=0", "0 < K <= 1000"},
      {"hdd,rpm=99", "rpm=99", "1000 to 30000"},
      {"hdd,queue=lifo", "queue=lifo", "fifo, clook"},
      {"hdd,,L=1ms", "'hdd,,L=1ms'", "hp-c2247, hdd, ssd, nvme, none"},
      {"hdd,bw=40MB/s,G=25ns", "G=25ns", "give one"},
      {"L=1ms", "'L=1ms'", "hp-c2247, hdd, ssd, nvme, none"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    std::string output;
    int rc = RunCommand(TipfsBinary() + " mount --disk-model '" + std::string(c.spec) + "' " +
                            mount_->disks()[0] + " " + mount_->mountpoint(),
                        &output);
    EXPECT_NE(rc, 0);
    if (rc == 0 || IsMountPoint(mount_->mountpoint())) {
      ADD_FAILURE() << "mounted despite a bad model";
      RunCommand(TipfsBinary() + " umount " + mount_->mountpoint());
    }
    ASSERT_FALSE(output.empty());
    EXPECT_EQ(output.back(), '\n');
    EXPECT_EQ(output.find('\n'), output.size() - 1) << "one line: " << output;
    EXPECT_NE(output.find("--disk-model"), std::string::npos) << output;
    EXPECT_NE(output.find(c.names), std::string::npos) << output;
    EXPECT_NE(output.find(c.accepted), std::string::npos) << output;
    EXPECT_FALSE(IsMountPoint(mount_->mountpoint()));
    EXPECT_EQ(ReadDaemonPid(mount_->disks()[0]), 0) << "a daemon was left running";
  }
  // Nothing on the volume changed: a good model mounts and the data reads back.
  MountWithModel("ssd,L=1ms");
  ReadUnit(1);
  EXPECT_EQ(Sum(Disks(), "reads_total"), 1);
}

}  // namespace
}  // namespace tipfs::testing
