// Striping as seen from the backing disks: a 10 MiB file on a 4-disk volume puts a quarter of
// its bytes on each disk, unit k of a file lies on disk (start + k) mod N at object offset
// (k / N) * unit (DESIGN.md, stripe/), and the start disk rotates from file to file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

constexpr uint64_t kUnit = 64 * 1024;

class StripingTest : public MountedTest {
 protected:
  uint64_t WriteAndSync(const std::string& rel, const std::string& data) {
    int fd = open(Path(rel).c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
    EXPECT_GE(fd, 0) << ErrnoName(errno);
    if (fd < 0) return 0;
    EXPECT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    EXPECT_EQ(fsync(fd), 0);
    struct stat st;
    EXPECT_EQ(fstat(fd, &st), 0);
    close(fd);
    return st.st_ino;
  }

  uint64_t ObjectSize(int disk, uint64_t ino) const {
    struct stat st;
    return stat(ObjectPath(mount_->disks()[disk], ino).c_str(), &st) == 0 ? st.st_size : 0;
  }

  // Checks every stripe unit of `data` against the bytes in the objects, and returns the start
  // disk (the one holding unit 0), or -1.
  int CheckLayout(uint64_t ino, const std::string& data) {
    const int disks = static_cast<int>(mount_->disks().size());
    std::vector<std::string> objects;
    for (int d = 0; d < disks; ++d) {
      std::error_code ec;
      objects.push_back(std::filesystem::exists(ObjectPath(mount_->disks()[d], ino), ec)
                            ? ReadFileOrDie(ObjectPath(mount_->disks()[d], ino))
                            : "");
    }
    int start = -1;
    for (int d = 0; d < disks && start < 0; ++d) {
      if (objects[d].compare(0, kUnit, data, 0, kUnit) == 0 && !objects[d].empty()) start = d;
    }
    if (start < 0) {
      ADD_FAILURE() << "no disk holds unit 0 at object offset 0";
      return -1;
    }
    const uint64_t units = (data.size() + kUnit - 1) / kUnit;
    for (uint64_t k = 0; k < units; ++k) {
      const int disk = static_cast<int>((start + k) % disks);
      const uint64_t object_offset = (k / disks) * kUnit;
      const std::string expected = data.substr(k * kUnit, kUnit);
      const std::string actual =
          objects[disk].substr(std::min(object_offset, objects[disk].size()), expected.size());
      if (actual != expected) {
        ADD_FAILURE() << "unit " << k << " is not at disk " << disk << " object offset "
                      << object_offset;
        return start;
      }
    }
    return start;
  }
};

TEST_F(StripingTest, TenMebibyteFilePutsAQuarterOnEachDisk) {
  for (uint64_t size : {uint64_t{10} << 20, (uint64_t{10} << 20) + 12345}) {
    SCOPED_TRACE("file size " + std::to_string(size));
    const std::string data = PatternBytes(size, size);
    const uint64_t ino = WriteAndSync("big" + std::to_string(size), data);
    ASSERT_NE(ino, 0u);
    uint64_t total = 0;
    for (int d = 0; d < 4; ++d) {
      const uint64_t bytes = ObjectSize(d, ino);
      total += bytes;
      EXPECT_GE(bytes, size * 20 / 100) << "disk " << d;
      EXPECT_LE(bytes, size * 30 / 100) << "disk " << d;
      // Also what the disks hold in all: nothing but this file's objects are large.
      EXPECT_GE(ObjectBytes(mount_->disks()[d]), bytes);
    }
    EXPECT_EQ(total, size) << "objects of a dense file hold exactly its bytes";
    CheckLayout(ino, data);
  }
}

TEST_F(StripingTest, StartDiskRotatesFromFileToFile) {
  std::set<int> start_disks;
  for (int i = 0; i < 8; ++i) {
    const std::string data = PatternBytes(1000 + i, 100 + i);
    const uint64_t ino = WriteAndSync("small" + std::to_string(i), data);
    int holders = 0;
    for (int d = 0; d < 4; ++d) {
      if (ObjectSize(d, ino) > 0) {
        ++holders;
        start_disks.insert(d);
        EXPECT_EQ(ObjectSize(d, ino), data.size());
      }
    }
    EXPECT_EQ(holders, 1) << "a file smaller than a unit lives on one disk";
  }
  EXPECT_EQ(start_disks.size(), 4u) << "8 new files should start on every one of 4 disks";
}

TEST_F(StripingTest, SparseFileLeavesOtherDisksWithoutData) {
  // One byte at 10 MiB: unit 160 only; the disks of units 0..159 hold nothing of it.
  int fd = open(Path("sparse").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, "x", 1, 10 << 20), 1);
  ASSERT_EQ(fsync(fd), 0);
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  close(fd);
  uint64_t allocated = 0;
  for (int d = 0; d < 4; ++d) {
    struct stat object;
    if (stat(ObjectPath(mount_->disks()[d], st.st_ino).c_str(), &object) == 0) {
      allocated += static_cast<uint64_t>(object.st_blocks) * 512;
    }
  }
  EXPECT_LE(allocated, 64u * 1024) << "a 1-byte write must not allocate the holes";
  EXPECT_EQ(ReadFileOrDie(Path("sparse")), std::string(10 << 20, '\0') + "x");
}

}  // namespace
}  // namespace tipfs::testing
