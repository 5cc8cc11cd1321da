// The OSD stops while files are read (label rados). The test starts a one-node cluster of its
// own with scripts/ceph-dev.sh (stopping the shared test cluster's OSD would fail every other
// test running beside it) and mounts a volume of two directories and two namespaces with a 5 s
// operation timeout. With the OSD stopped:
//   - a read of a file on a RADOS disk fails with EIO, bounded by the timeout (no hang);
//   - files on the directory disks read, and the namespace works (metadata is local);
//   - tipfs stats counts the timeouts and shows the disk failing.
// After the OSD restarts (memstore saved its objects on the clean stop), the same reads
// return the right bytes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>

#include "tests/rados/rados_test_env.h"
#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

constexpr int kDisks = 4;  // disks 0 and 1 are directories, 2 and 3 namespaces

std::string ReadAll(const std::string& path, int* error) {
  *error = 0;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = errno;
    return "";
  }
  std::string out;
  char buffer[65536];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      *error = errno;
      break;
    }
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

class RadosFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason = FuseUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
    TIPFS_START_PRIVATE_CEPH_OR_SKIP(cluster_, false);
    conf_ = cluster_->conf();
    DiskBackend backend;
    backend.make = [this](const std::string& root, int disks) {
      std::vector<std::string> names;
      for (int i = 0; i < disks; ++i) {
        if (i < 2) {
          names.push_back(root + "/disk" + std::to_string(i));
          std::filesystem::create_directories(names.back());
        } else {
          names.push_back("rados:tipfs/fault" + std::to_string(i) + "?conf=" + conf_);
        }
      }
      return names;
    };
    SetDiskBackend(backend);
    VolumeSpec spec;
    spec.disks = kDisks;
    spec.mount_args = "--data-cache direct --cache-size 8M --readahead off --rados-timeout 5s";
    mount_ = std::make_unique<TipfsMount>(spec);
    ASSERT_EQ(mount_->Create(), "");
    ASSERT_EQ(mount_->Mount(), "");
  }

  void TearDown() override {
    mount_.reset();  // unmounts first: the daemon is a client of the cluster
    SetDiskBackend({});
    cluster_.reset();
  }

  std::string Path(const std::string& rel) const { return mount_->Path(rel); }

  std::unique_ptr<PrivateCephCluster> cluster_;
  std::string conf_;
  std::unique_ptr<TipfsMount> mount_;
};

TEST_F(RadosFaultTest, StoppedOsdFailsItsReadsWithEioWhileTheRestWorks) {
  // Small files (one stripe unit): each lives on disk (inode mod 4) alone.
  std::map<int, std::vector<std::string>> on_disk;
  for (int i = 0; i < 24; ++i) {
    const std::string name = "small" + std::to_string(i);
    ASSERT_TRUE(WriteFileBytes(Path(name), "contents of " + name));
    struct stat st;
    ASSERT_EQ(stat(Path(name).c_str(), &st), 0);
    on_disk[static_cast<int>(st.st_ino % kDisks)].push_back(name);
  }
  ASSERT_FALSE(on_disk[0].empty());
  ASSERT_FALSE(on_disk[2].empty());
  ASSERT_EQ(mount_->Unmount(), "");  // cold: nothing cached
  ASSERT_EQ(mount_->Mount(), "");

  ASSERT_EQ(cluster_->StopOsd(), "");
  const std::string& on_rados = on_disk[2][0];
  const auto start = std::chrono::steady_clock::now();
  int error = 0;
  ReadAll(Path(on_rados), &error);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(error, EIO) << "read of " << on_rados << " with the OSD stopped";
  // Bounded by the 5 s timeout: a guard against a hang, loose enough for a loaded machine.
  EXPECT_LT(seconds, 60.0);

  for (const std::string& name : on_disk[0]) {
    EXPECT_EQ(ReadAll(Path(name), &error), "contents of " + name);
    EXPECT_EQ(error, 0) << name;
  }
  ASSERT_EQ(mkdir(Path("made-while-down").c_str(), 0755), 0) << strerror(errno);
  struct stat st;
  EXPECT_EQ(stat(Path(on_rados).c_str(), &st), 0);
  EXPECT_EQ(std::filesystem::exists(Path("made-while-down")), true);

  std::string stats;
  RunCommand(TipfsBinary() + " stats " + mount_->mountpoint(), &stats);
  EXPECT_NE(stats.find("disk 2 (rados:tipfs/fault2"), std::string::npos) << stats;
  EXPECT_NE(stats.find("failed"), std::string::npos) << stats;
  const std::string json = ReadFileOrDie(Path(".tipfs/stats.json"));
  const size_t disk2 = json.find("{\"disk\":2,\"name\":\"rados:tipfs/fault2\"");
  ASSERT_NE(disk2, std::string::npos) << json;
  const size_t timeouts = json.find("\"timeouts\":", disk2);
  ASSERT_NE(timeouts, std::string::npos);
  EXPECT_GE(std::strtoull(json.c_str() + timeouts + 11, nullptr, 10), 1u) << json;

  ASSERT_EQ(cluster_->StartOsd(), "");
  for (int d : {2, 3}) {
    for (const std::string& name : on_disk[d]) {
      EXPECT_EQ(ReadAll(Path(name), &error), "contents of " + name) << name;
      EXPECT_EQ(error, 0) << name;
    }
  }
  // Writes work again too, and everything survives a remount.
  ASSERT_TRUE(WriteFileBytes(Path("after"), "after the restart"));
  ASSERT_EQ(mount_->Unmount(), "");
  ASSERT_EQ(mount_->Mount(), "");
  EXPECT_EQ(ReadAll(Path("after"), &error), "after the restart");
}

}  // namespace
}  // namespace tipfs::testing
