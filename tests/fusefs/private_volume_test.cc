// What a volume keeps on its disks is its owner's alone: another user can reach the disk
// directories (and read the label) but not list or read the metadata store, whose files hold
// every file name, nor the objects; mkfs makes it so, and a mount repairs a volume whose modes
// were loosened.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/as_user.h"
#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

// errno of open(2) (O_RDONLY, O_DIRECTORY for directories) of each path as user `kNobody`; 0 for
// success, -1 when the child could not become that user.
std::vector<int> OpenAsNobody(const std::vector<std::string>& paths) {
  return ErrnosAsUser(kNobody, paths.size(), [&](size_t i) {
    struct stat st;
    const bool dir = stat(paths[i].c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    const int fd = open(paths[i].c_str(), O_RDONLY | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
    if (fd < 0) return errno;
    if (!dir) {
      close(fd);
      return 0;
    }
    // Opening a directory one can search but not read works; listing it must not.
    DIR* d = fdopendir(fd);
    errno = 0;
    const int listed = d != nullptr && readdir(d) != nullptr ? 0 : (errno != 0 ? errno : EACCES);
    if (d != nullptr) closedir(d);
    return listed;
  });
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

class PrivateVolumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = FuseUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
    if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
    volume_ = std::make_unique<TipfsMount>();
    // The temporary root is 0700: open it up so that only the volume's own modes protect it.
    chmod(volume_->root().c_str(), 0755);
    for (const std::string& disk : volume_->disks()) chmod(disk.c_str(), 0755);
  }

  // The store's files (after a mount wrote some), the store, every objects/ and fan-out dir.
  std::vector<std::string> Private() const {
    std::vector<std::string> paths = {Meta()};
    for (const auto& entry : std::filesystem::directory_iterator(Meta())) {
      paths.push_back(entry.path().string());
    }
    for (const std::string& disk : volume_->disks()) {
      paths.push_back(disk + "/objects");
      for (const auto& entry : std::filesystem::directory_iterator(disk + "/objects")) {
        paths.push_back(entry.path().string());
      }
    }
    return paths;
  }
  std::string Meta() const { return volume_->disks()[0] + "/meta"; }

  // Another user reaches the disk (the label is readable) but nothing private.
  void ExpectPrivate() {
    const std::string label = volume_->disks()[0] + "/tipfs-label";
    EXPECT_EQ(OpenAsNobody({label}), std::vector<int>{0}) << "the test cannot reach the disk";
    const std::vector<std::string> paths = Private();
    ASSERT_GT(paths.size(), 4u);
    std::vector<int> errors = OpenAsNobody(paths);
    for (size_t i = 0; i < paths.size(); ++i) {
      EXPECT_EQ(errors[i], EACCES) << paths[i] << " mode " << std::oct << ModeOf(paths[i]);
      const bool dir = std::filesystem::is_directory(paths[i]);
      EXPECT_EQ(ModeOf(paths[i]), dir ? 0700u : 0600u) << paths[i];
    }
  }

  std::unique_ptr<TipfsMount> volume_;
};

TEST_F(PrivateVolumeTest, AnotherUserCannotListOrReadTheStoreOrTheObjects) {
  ASSERT_EQ(volume_->Create(), "");
  ASSERT_EQ(volume_->Mount(), "");
  ASSERT_TRUE(WriteFileBytes(volume_->Path("salary-review-2027.txt"), PatternBytes(300000, 9)));
  ASSERT_EQ(RunCommand("sync"), 0);
  ExpectPrivate();
  ASSERT_EQ(volume_->Unmount(), "");
  ExpectPrivate();
}

TEST_F(PrivateVolumeTest, MountRepairsAVolumeWhoseModesWereLoosened) {
  ASSERT_EQ(volume_->Create(), "");
  ASSERT_EQ(volume_->Mount(), "");
  ASSERT_TRUE(WriteFileBytes(volume_->Path("names-are-data.txt"), PatternBytes(300000, 3)));
  ASSERT_EQ(volume_->Unmount(), "");
  // As an older tipfs left them (or a careless copy): the store world-readable.
  for (const std::string& path : Private()) {
    chmod(path.c_str(), std::filesystem::is_directory(path) ? 0755 : 0644);
  }
  EXPECT_EQ(OpenAsNobody({Meta() + "/CURRENT"}), std::vector<int>{0}) << "loosening failed";
  ASSERT_EQ(volume_->Mount(), "");
  ExpectPrivate();
  EXPECT_EQ(ReadFileOrDie(volume_->Path("names-are-data.txt")), PatternBytes(300000, 3));
}

}  // namespace
}  // namespace tipfs::testing
