// A backing disk that fails during use: the affected reads and writes return EIO, everything
// else keeps working, and the daemon stays alive. The mounts use `--disk-model none` (real
// timing), a minimal daemon cache and no read-ahead, so that reads reach the backing disks.
//
// How the failures are made (root can open anything, so chmod 000 does not fail anything here):
//  - LoopDevice: disk 3 is an ext4 file system on a loop device; under the running mount the
//    image is truncated and the device shrunk (`losetup -c`), so that reading or writing back
//    object blocks fails in the block layer ("access beyond end of device") and ext4 returns a
//    genuine EIO. The page cache of the objects is dropped first (POSIX_FADV_DONTNEED on each
//    object file), so reads really go to the device. Needs root, losetup and mkfs.ext4.
//  - ObjectIsADirectory: an object file replaced by a directory while unmounted; opening it for
//    I/O fails (EISDIR from the backing file system) when the file is used after the mount.
//  - ObjectsDirectoryRemoved: a disk's objects/ directory removed under the running mount (a disk
//    that went away); new objects cannot be created there (ENOENT from the backing store).
// In all three the user of the file must see EIO: a read or write of a regular file has no other
// honest errno for "the storage under it failed".
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include "tests/support/fs_inspect.h"
#include "tests/support/loop_ext4.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

constexpr uint64_t kUnit = 64 * 1024;
// The smallest cache a mount takes (4 stripe units).
const char kMountArgs[] = "--disk-model none --cache-size 256K --readahead off --data-cache direct";

// Drops the cached pages of every object on `disk` (after writing them back).
void DropObjectPages(const std::string& disk) {
  for (const auto& [rel, size] : ObjectFiles(disk)) {
    int fd = open((disk + "/objects/" + rel).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
}

std::string WriteSynced(const std::string& path, const std::string& data, uint64_t* ino) {
  int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "open: " + ErrnoName(errno);
  std::string error;
  if (write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
    error = "write: " + ErrnoName(errno);
  } else if (fsync(fd) != 0) {
    error = "fsync: " + ErrnoName(errno);
  }
  struct stat st;
  if (ino != nullptr && fstat(fd, &st) == 0) *ino = st.st_ino;
  close(fd);
  return error;
}

// Reads `length` bytes at `offset`; returns the errno (0 when all bytes came back) and the data.
int ReadAt(const std::string& path, uint64_t offset, size_t length, std::string* data) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  data->assign(length, '\0');
  ssize_t n = pread(fd, data->data(), length, static_cast<off_t>(offset));
  int err = n < 0 ? errno : 0;
  close(fd);
  if (n >= 0) data->resize(static_cast<size_t>(n));
  return err;
}

// Writes at `offset` and fsyncs; returns the first errno (write or fsync), 0 on success.
int WriteAt(const std::string& path, uint64_t offset, const std::string& data) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = 0;
  if (pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset)) < 0) {
    err = errno;
  } else if (fsync(fd) != 0) {
    err = errno;
  }
  close(fd);
  return err;
}

class DiskErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason = FuseUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
    VolumeSpec spec;
    spec.mount_args = kMountArgs;
    volume_ = std::make_unique<TipfsMount>(spec);
  }

  std::string Path(const std::string& rel) const { return volume_->Path(rel); }
  const std::string& Disk(int i) const { return volume_->disks()[i]; }

  // The disk holding a one-unit file's only object, or -1.
  int DiskOf(uint64_t ino) const {
    for (int d = 0; d < static_cast<int>(volume_->disks().size()); ++d) {
      if (std::filesystem::exists(ObjectPath(Disk(d), ino))) return d;
    }
    return -1;
  }

  // The rest of the file system works and the daemon lives: metadata operations, and one-unit
  // files created now on disks other than `broken` read back what was written.
  void ExpectTheRestWorks(int broken, pid_t daemon) {
    struct stat st;
    EXPECT_EQ(stat(volume_->mountpoint().c_str(), &st), 0) << ErrnoName(errno);
    EXPECT_EQ(mkdir(Path("still_works").c_str(), 0755), 0) << ErrnoName(errno);
    EXPECT_TRUE(WriteFileBytes(Path("still_works/small"), "small"));
    EXPECT_EQ(ReadFileOrDie(Path("still_works/small")), "small");
    int healthy = 0;
    for (int i = 0; i < 8; ++i) {
      const std::string name = Path("still_works/f" + std::to_string(i));
      const std::string data = PatternBytes(5000, 300 + i);
      uint64_t ino = 0;
      std::string error = WriteSynced(name, data, &ino);
      const int disk = DiskOf(ino);
      if (disk < 0 || disk == broken) continue;
      ++healthy;
      EXPECT_EQ(error, "") << name << " on healthy disk " << disk;
      EXPECT_EQ(ReadFileOrDie(name), data) << name << " on healthy disk " << disk;
    }
    EXPECT_GE(healthy, 4) << "too few new files landed on healthy disks to tell";
    EXPECT_TRUE(ProcessAlive(daemon)) << "the daemon died";
    EXPECT_TRUE(IsMountPoint(volume_->mountpoint()));
  }

  std::unique_ptr<TipfsMount> volume_;
};

TEST_F(DiskErrorsTest, LoopDeviceFailsUnderTheMount) {
  LoopExt4 loop;
  loop.before_unmount = [this] {
    if (volume_->mounted()) (void)volume_->Unmount();
  };
  const std::string skip = loop.Mount(Disk(3), "64M");
  if (!skip.empty()) GTEST_SKIP() << skip;
  ASSERT_EQ(volume_->Create(), "");
  ASSERT_EQ(volume_->Mount(), "");
  const pid_t daemon = ReadDaemonPid(Disk(0));

  const std::string big = PatternBytes(4 << 20, 41);  // 64 units: 16 on each disk
  uint64_t ino = 0;
  ASSERT_EQ(WriteSynced(Path("big"), big, &ino), "");
  int start = -1;  // the disk holding unit 0 at the start of its object
  for (int d = 0; d < 4 && start < 0; ++d) {
    std::string head;
    if (ReadAt(ObjectPath(Disk(d), ino), 0, kUnit, &head) == 0 && head == big.substr(0, kUnit)) {
      start = d;
    }
  }
  ASSERT_GE(start, 0) << "no disk holds unit 0";
  const uint64_t broken_unit = (3 + 4 - start) % 4;  // the first unit on disk 3
  const uint64_t healthy_unit = (broken_unit + 1) % 4;

  // Make disk 3 fail, and check that it does, bypassing tipfs.
  sync();
  DropObjectPages(Disk(3));
  ASSERT_EQ(loop.Shrink("1M"), "");
  std::string probe;
  int probe_error = ReadAt(ObjectPath(Disk(3), ino), 0, 4096, &probe);
  if (probe_error != EIO) {
    GTEST_SKIP() << "the shrunk loop device did not fail a read of an object (got "
                 << ErrnoName(probe_error) << "); cannot test EIO this way here";
  }

  std::string data;
  EXPECT_EQ(ErrnoName(ReadAt(Path("big"), broken_unit * kUnit, kUnit, &data)), "EIO")
      << "read of a unit on the failed disk";
  EXPECT_EQ(ReadAt(Path("big"), healthy_unit * kUnit, kUnit, &data), 0);
  EXPECT_TRUE(data == big.substr(healthy_unit * kUnit, kUnit)) << "a healthy unit's bytes";
  // A read spanning both returns EIO or the bytes before the failed unit, never wrong bytes.
  int spanning = ReadAt(Path("big"), 0, 4 * kUnit, &data);
  if (spanning == 0) {
    EXPECT_TRUE(big.compare(0, data.size(), data) == 0 && data.size() < 4 * kUnit);
  } else {
    EXPECT_EQ(ErrnoName(spanning), "EIO");
  }
  // Writing the failed disk's unit fails with EIO at the latest at fsync.
  EXPECT_EQ(ErrnoName(WriteAt(Path("big"), broken_unit * kUnit + 100, "overwrite")), "EIO");
  EXPECT_EQ(WriteAt(Path("big"), healthy_unit * kUnit + 100, "overwrite"), 0);
  ExpectTheRestWorks(3, daemon);
  EXPECT_EQ(UnmountRetryingWhileBusy(*volume_), "");
}

TEST_F(DiskErrorsTest, ObjectIsADirectory) {
  ASSERT_EQ(volume_->Create(), "");
  ASSERT_EQ(volume_->Mount(), "");
  const std::string data = PatternBytes(4 * kUnit, 42);  // one unit on each disk
  uint64_t ino = 0;
  ASSERT_EQ(WriteSynced(Path("victim"), data, &ino), "");
  ASSERT_EQ(UnmountRetryingWhileBusy(*volume_), "");
  const std::string object = ObjectPath(Disk(2), ino);
  ASSERT_EQ(unlink(object.c_str()), 0) << object;
  ASSERT_EQ(mkdir(object.c_str(), 0700), 0);
  ASSERT_EQ(volume_->Mount(), "");
  const pid_t daemon = ReadDaemonPid(Disk(0));

  int unit_on_2 = -1;
  for (int k = 0; k < 4; ++k) {
    std::string bytes;
    int err = ReadAt(Path("victim"), k * kUnit, kUnit, &bytes);
    if (err == 0) {
      EXPECT_TRUE(bytes == data.substr(k * kUnit, kUnit)) << "unit " << k << " bytes";
    } else {
      EXPECT_EQ(ErrnoName(err), "EIO") << "read of unit " << k;
      unit_on_2 = k;
    }
  }
  EXPECT_NE(unit_on_2, -1) << "no read failed although disk 2's object is a directory";
  if (unit_on_2 >= 0) {
    EXPECT_EQ(ErrnoName(WriteAt(Path("victim"), unit_on_2 * kUnit, "x")), "EIO");
  }
  ExpectTheRestWorks(2, daemon);
  EXPECT_EQ(UnmountRetryingWhileBusy(*volume_), "");
}

TEST_F(DiskErrorsTest, ObjectsDirectoryRemovedUnderTheMount) {
  ASSERT_EQ(volume_->Create(), "");
  ASSERT_EQ(volume_->Mount(), "");
  const pid_t daemon = ReadDaemonPid(Disk(0));
  std::error_code ec;
  std::filesystem::remove_all(Disk(1) + "/objects", ec);
  ASSERT_FALSE(ec) << ec.message();
  // A new file over all four disks: its unit on disk 1 cannot be stored.
  const std::string data = PatternBytes(4 * kUnit, 43);
  int fd = open(Path("spread").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  int err = 0;
  for (int k = 0; k < 4 && err == 0; ++k) {
    if (pwrite(fd, data.data() + k * kUnit, kUnit, k * kUnit) < 0) err = errno;
  }
  if (err == 0 && fsync(fd) != 0) err = errno;
  close(fd);
  EXPECT_EQ(ErrnoName(err), "EIO") << "writing a file with a unit on a disk that went away";
  ExpectTheRestWorks(1, daemon);
  EXPECT_EQ(UnmountRetryingWhileBusy(*volume_), "");
}

}  // namespace
}  // namespace tipfs::testing
