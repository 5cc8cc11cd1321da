// A mounted volume of four RADOS namespaces (label rados): one mount owns the volume (a second
// one, here or from another host, is refused naming the first), fsck is clean after real work
// and repairs what only RADOS disks can get wrong, `tipfs stats` shows each RADOS disk, the disk
// model wraps RADOS disks like any other, and the agrep workload gives the original's output
// under manual hints and under `tipfs run`.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rados/librados.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "stripe/disk_name.h"
#include "stripe/rados_cluster.h"
#include "stripe/rados_disk.h"
#include "tests/rados/rados_test_env.h"
#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

std::string ReadFile(const std::string& path) { return ReadFileOrDie(path); }
void WriteFile(const std::string& path, const std::string& data) {
  ASSERT_TRUE(WriteFileBytes(path, data)) << path << ": " << ErrnoName(errno);
}
std::string Quote(const std::string& s) { return ShellQuote(s); }

// Runs `command` on one RADOS disk's namespace through librados.
template <typename F>
void WithNamespace(const std::string& disk, F f) {
  stripe::RadosConnections connections;
  Result<stripe::DiskName> name = stripe::ParseDiskName(disk);
  ASSERT_TRUE(name.ok());
  auto ns = connections.OpenNamespace(*name);
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  f((*ns)->ioctx());
}

class RadosMountTest : public MountedTest {
 protected:
  VolumeSpec Spec() const override {
    VolumeSpec spec;
    spec.mkfs_args = "--rados-object-size 1M";
    spec.mount_args = "--cache-size 16M --data-cache direct";
    return spec;
  }
  std::string Tipfs(const std::string& args, int* status = nullptr) {
    std::string out;
    const int rc = RunCommand(TipfsBinary() + " " + args, &out);
    if (status != nullptr) *status = rc;
    return out;
  }
};

TEST_F(RadosMountTest, OneMountOwnsTheVolume) {
  WriteFile(Path("f"), "data");
  const std::string second = mount_->root() + "/second";
  std::filesystem::create_directories(second);
  int status = 0;
  // Through any disk, or the metadata directory: the lease on each RADOS disk refuses it.
  for (const std::string& name : {mount_->disks()[2], mount_->volume_name()}) {
    const std::string out = Tipfs("mount " + Quote(name) + " " + second, &status);
    EXPECT_EQ(status, 1) << out;
    EXPECT_NE(out.find("is mounted by tipfs pid"), std::string::npos) << out;
    EXPECT_NE(out.find("one mount at a time owns a volume"), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  }
  const std::string fsck = Tipfs("fsck " + Quote(mount_->volume_name()), &status);
  EXPECT_EQ(status, 8) << fsck;
  EXPECT_NE(fsck.find("refusing to check a mounted volume"), std::string::npos) << fsck;
  EXPECT_EQ(ReadFile(Path("f")), "data");  // the first mount never noticed

  // Another host's mount (its lock, as that host's tipfs takes it) is respected.
  ASSERT_EQ(mount_->Unmount(), "");
  WithNamespace(mount_->disks()[1], [&](rados_ioctx_t io) {
    const char* cookie = "tipfs:otherhost:4242:beef";
    ASSERT_EQ(rados_lock_exclusive(io, "tipfs-label", "tipfs-mount", cookie, "", nullptr, 0), 0);
    const std::string out = mount_->Mount();
    const std::string disk1 = mount_->disks()[1].substr(0, mount_->disks()[1].find('?'));
    EXPECT_NE(out.find("disk 1: " + disk1 + " is mounted by tipfs pid 4242 on host otherhost"),
              std::string::npos)
        << out;
    ASSERT_EQ(rados_unlock(io, "tipfs-label", "tipfs-mount", cookie), 0);
  });
  ASSERT_EQ(mount_->Mount(), "");
  EXPECT_EQ(ReadFile(Path("f")), "data");
}

// A daemon killed outright leaves its locks behind; the next mount on this host breaks them
// (the process is gone) instead of waiting for the leases to run out, and recovers.
TEST_F(RadosMountTest, MountAfterTheDaemonWasKilled) {
  const std::string data(3 << 20, 'k');
  const int fd = open(Path("k").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(fsync(fd), 0);  // what a kill may not lose
  ASSERT_EQ(close(fd), 0);
  const pid_t pid = ReadDaemonPid(mount_->root() + "/meta");
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  ASSERT_TRUE(WaitForProcessExit(pid, 10));
  LazyUnmount(mount_->mountpoint());
  ASSERT_EQ(mount_->Mount(), "");
  EXPECT_EQ(ReadFile(Path("k")), data);
}

TEST_F(RadosMountTest, FsckIsCleanAfterWorkAndRepairsRadosParts) {
  for (int i = 0; i < 6; ++i) {
    WriteFile(Path("file" + std::to_string(i)), std::string((i + 1) * 700000, 'a' + i));
  }
  ASSERT_EQ(truncate(Path("file5").c_str(), 1234567), 0);
  ASSERT_EQ(unlink(Path("file2").c_str()), 0);
  struct stat st;
  ASSERT_EQ(stat(Path("file3").c_str(), &st), 0);
  ASSERT_EQ(mount_->Unmount(), "");
  int status = 0;
  std::string out = Tipfs("fsck " + Quote(mount_->volume_name()), &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("; clean"), std::string::npos) << out;

  // Plant what only RADOS disks can get wrong: a part the head does not record, beyond the end
  // of file3, and a part of an inode that does not exist.
  const std::string disk = mount_->disks()[st.st_ino % 4];
  WithNamespace(disk, [&](rados_ioctx_t io) {
    ASSERT_EQ(rados_write(io, stripe::RadosDisk::PartName(st.st_ino, 40).c_str(), "x", 1, 0), 0);
    ASSERT_EQ(rados_write(io, stripe::RadosDisk::PartName(999999, 0).c_str(), "y", 1, 0), 0);
  });
  out = Tipfs("fsck " + Quote(disk), &status);
  EXPECT_EQ(status, 4) << out;
  EXPECT_NE(out.find("[unrecorded-part]"), std::string::npos) << out;
  EXPECT_NE(out.find("[leaked-object]"), std::string::npos) << out;
  out = Tipfs("fsck --repair " + Quote(mount_->volume_name()), &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("[object-too-long]"), std::string::npos) << out;  // the recorded part, trimmed
  out = Tipfs("fsck " + Quote(mount_->volume_name()), &status);
  EXPECT_EQ(status, 0) << out;
  ASSERT_EQ(mount_->Mount(), "");
  EXPECT_EQ(ReadFile(Path("file3")), std::string(4 * 700000, 'd'));
}

TEST_F(RadosMountTest, StatsShowEveryRadosDisk) {
  WriteFile(Path("s"), std::string(1 << 20, 's'));
  ASSERT_EQ(mount_->Unmount(), "");
  ASSERT_EQ(mount_->Mount(), "");
  EXPECT_EQ(ReadFile(Path("s")).size(), 1u << 20);
  const std::string text = Tipfs("stats " + mount_->mountpoint());
  for (int i = 0; i < 4; ++i) {
    EXPECT_NE(text.find("rados disk " + std::to_string(i) + " (rados:"), std::string::npos) << text;
  }
  const std::string json = ReadFile(Path(".tipfs/stats.json"));
  EXPECT_NE(json.find("\"rados_disks\":[{\"disk\":0,"), std::string::npos) << json;
  // The volume is mounted by its metadata directory: the measured per-disk table still has a
  // row for each of its disks, and the reads above are in it.
  // (Without a disk model that table is "disks".)
  const size_t activity = json.find("\"disks\":[{\"index\":0,");
  ASSERT_NE(activity, std::string::npos) << json;
  EXPECT_NE(json.find("{\"index\":3,", activity), std::string::npos) << json;
  const std::string prometheus = ReadFile(Path(".tipfs/metrics"));
  EXPECT_NE(prometheus.find("tipfs_rados_read_bytes_total{disk=\"3\"}"), std::string::npos);
}

// EmulatedDisk wraps RADOS disks like directories: the model's per-disk rows appear, and the
// modelled latency comes on top of the real one.
TEST_F(RadosMountTest, DiskModelWrapsRadosDisks) {
  WriteFile(Path("m"), std::string(600000, 'm'));
  ASSERT_EQ(mount_->Unmount(), "");
  ASSERT_EQ(mount_->Mount("--disk-model none,L=2ms"), "");
  EXPECT_EQ(ReadFile(Path("m")), std::string(600000, 'm'));
  const std::string text = Tipfs("stats " + mount_->mountpoint());
  EXPECT_NE(text.find("disk model: none,L=2ms"), std::string::npos) << text;
  EXPECT_NE(text.find("rados disk 0"), std::string::npos) << text;
}

// The workload the benchmarks use, on RADOS disks: the manual variant's hints and speculation
// under `tipfs run` change nothing in what agrep prints.
TEST_F(RadosMountTest, AgrepUnderManualHintsAndSpeculationPrintsWhatTheOriginalPrints) {
  std::string generated;
  ASSERT_EQ(RunCommand(std::string(TIPFS_BENCH_GEN) + " agrep --dir " + mount_->mountpoint() +
                           " --files 40 --total 2M 2>/dev/null",
                       &generated),
            0);
  std::string pattern = generated.substr(generated.find("pattern=") + 8);
  pattern.erase(pattern.find_last_not_of("\n") + 1);
  const std::string agrep = std::string(TIPFS_BENCH_AGREP) + " -p " + Quote(pattern);
  auto run = [&](const std::string& command) {
    EXPECT_EQ(mount_->Unmount(), "");  // cold: nothing cached
    EXPECT_EQ(mount_->Mount(), "");
    std::string out;
    EXPECT_EQ(RunCommand("cd " + mount_->mountpoint() + " && " + command, &out), 0) << command;
    // What agrep prints on stdout; its report line on stderr says how it ran, not what it found.
    std::string found;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("[tipfs-bench-agrep]", 0) != 0) found += line + "\n";
    }
    return found;
  };
  const std::string original = run(agrep + " --variant original text");
  EXPECT_NE(original.find("matching_lines="), std::string::npos) << original;
  EXPECT_EQ(run(agrep + " --variant manual text"), original);
  const std::string stats_file = mount_->root() + "/spec.stats";
  // In lockstep (the program waits for its child's next logged read), as tests/speculate does,
  // so that the child runs ahead whatever the machine's load.
  EXPECT_EQ(run("TIPSPEC_LIBRARY=" + std::string(TIPSPEC_LIBRARY_PATH) +
                " TIPSPEC_LOCKSTEP=1 TIPSPEC_STALL_USEC=0 TIPSPEC_WAIT=0 " + TipfsBinary() +
                " run --mount " + mount_->mountpoint() + " --stats-file " + stats_file + " -- " +
                agrep + " --variant original text"),
            original);
  const std::string stats = ReadFile(stats_file);
  EXPECT_NE(stats.find("forks"), std::string::npos) << stats;
  uint64_t consumed = 0;
  std::istringstream lines(stats);
  std::string key;
  uint64_t value;
  while (lines >> key >> value) {
    if (key.find("hints_consumed") != std::string::npos) consumed += value;
  }
  EXPECT_GT(consumed, 0u) << "speculation hinted nothing the program read:\n" << stats;
}

}  // namespace
}  // namespace tipfs::testing
