// Unlinked-but-open files on a real mount: they stay readable and writable through their
// descriptors, their objects leave the disks at the last close, and when the daemon dies while
// one is open, the next mount reclaims it.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

constexpr size_t kFileBytes = 300000;  // about 4.6 stripe units of 64 KiB: every disk holds some

class UnlinkedOpenTest : public DataCacheModeTest {
 protected:
  int ObjectsOf(uint64_t ino) const {
    int present = 0;
    for (const std::string& disk : mount_->disks()) {
      present += std::filesystem::exists(ObjectPath(disk, ino)) ? 1 : 0;
    }
    return present;
  }

  // The kernel sends RELEASE after close(2) returns, so reclaiming is asynchronous to the test.
  bool WaitUntilNoObjects(uint64_t ino) const {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (ObjectsOf(ino) > 0) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
};

std::string PreadAll(int fd, size_t length, off_t offset = 0) {
  std::string data(length, '\0');
  size_t done = 0;
  while (done < length) {
    ssize_t n = pread(fd, data.data() + done, length - done, offset + static_cast<off_t>(done));
    if (n < 0) return "pread failed: " + ErrnoName(errno);
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  data.resize(done);
  return data;
}

uint64_t InodeOf(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

TEST_P(UnlinkedOpenTest, StaysUsableThroughItsDescriptorsUntilTheLastClose) {
  const std::string path = Path("doomed");
  const std::string data = PatternBytes(kFileBytes, 11);
  int fd = open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  ASSERT_EQ(pwrite(fd, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(fsync(fd), 0);
  int reader = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  const uint64_t ino = InodeOf(fd);
  ASSERT_NE(ino, 0u);
  ASSERT_EQ(ObjectsOf(ino), 4) << "a 300000-byte file should have an object on each of 4 disks";

  ASSERT_EQ(unlink(path.c_str()), 0) << ErrnoName(errno);
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), -1);
  EXPECT_EQ(errno, ENOENT);
  ASSERT_EQ(fstat(fd, &st), 0) << ErrnoName(errno);
  EXPECT_EQ(st.st_nlink, 0u);
  EXPECT_EQ(st.st_size, static_cast<off_t>(kFileBytes));
  EXPECT_EQ(PreadAll(fd, kFileBytes), data);

  // Still writable: extend it sparsely, then shrink it, and read through the other descriptor.
  const std::string tail = PatternBytes(70000, 12);
  ASSERT_EQ(pwrite(fd, tail.data(), tail.size(), 500000), static_cast<ssize_t>(tail.size()));
  ASSERT_EQ(fstat(reader, &st), 0);
  EXPECT_EQ(st.st_size, 570000);
  std::string expected = data + std::string(500000 - kFileBytes, '\0') + tail;
  EXPECT_EQ(PreadAll(reader, expected.size()), expected);
  ASSERT_EQ(ftruncate(fd, 200000), 0) << ErrnoName(errno);
  EXPECT_EQ(PreadAll(reader, 600000), data.substr(0, 200000));
  EXPECT_EQ(fchmod(fd, 0600), 0) << ErrnoName(errno);
  EXPECT_EQ(fsync(fd), 0) << ErrnoName(errno);

  ASSERT_EQ(close(fd), 0);
  EXPECT_GT(ObjectsOf(ino), 0) << "objects went away while a descriptor is still open";
  EXPECT_EQ(PreadAll(reader, 200000), data.substr(0, 200000));

  // The name is free for a new file meanwhile, which must not share anything with the old one.
  ASSERT_TRUE(WriteFileBytes(path, "new"));
  EXPECT_EQ(ReadFileOrDie(path), "new");
  EXPECT_EQ(PreadAll(reader, 200000), data.substr(0, 200000));

  ASSERT_EQ(close(reader), 0);
  EXPECT_TRUE(WaitUntilNoObjects(ino)) << "objects of inode " << ino << " still on the disks";
  EXPECT_EQ(ReadFileOrDie(path), "new");
}

TEST_P(UnlinkedOpenTest, RenameOverAnOpenFileKeepsItReadable) {
  const std::string victim = Path("victim");
  const std::string data = PatternBytes(kFileBytes, 13);
  ASSERT_TRUE(WriteFileBytes(victim, data));
  int fd = open(victim.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const uint64_t ino = InodeOf(fd);
  ASSERT_TRUE(WriteFileBytes(Path("replacement"), "replacement"));
  ASSERT_EQ(rename(Path("replacement").c_str(), victim.c_str()), 0) << ErrnoName(errno);
  EXPECT_EQ(ReadFileOrDie(victim), "replacement");
  EXPECT_EQ(PreadAll(fd, kFileBytes), data);
  EXPECT_EQ(ObjectsOf(ino), 4);
  ASSERT_EQ(close(fd), 0);
  EXPECT_TRUE(WaitUntilNoObjects(ino));
  EXPECT_EQ(ReadFileOrDie(victim), "replacement");
}

TEST_P(UnlinkedOpenTest, UnlinkWithoutOpenDescriptorsReclaimsAtOnce) {
  const std::string path = Path("plain");
  ASSERT_TRUE(WriteFileBytes(path, PatternBytes(kFileBytes, 14)));
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  ASSERT_EQ(ObjectsOf(st.st_ino), 4);
  ASSERT_EQ(unlink(path.c_str()), 0);
  EXPECT_TRUE(WaitUntilNoObjects(st.st_ino));
}

// The daemon is killed (SIGKILL: no cleanup at all) while an unlinked file is open. The next
// mount must reclaim the orphan's objects before it reports the mount usable.
TEST_P(UnlinkedOpenTest, OrphanOfAKilledDaemonIsReclaimedAtTheNextMount) {
  const std::string keep_data = PatternBytes(kFileBytes, 15);
  ASSERT_TRUE(WriteFileBytes(Path("survivor"), keep_data));
  const std::string path = Path("orphan");
  int fd = open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  const std::string data = PatternBytes(kFileBytes, 16);
  ASSERT_EQ(pwrite(fd, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(fsync(fd), 0);
  const uint64_t ino = InodeOf(fd);
  ASSERT_EQ(unlink(path.c_str()), 0);
  ASSERT_EQ(ObjectsOf(ino), 4);

  const pid_t daemon = ReadDaemonPid(mount_->disks()[0]);
  ASSERT_TRUE(ProcessAlive(daemon)) << "no live daemon in " << mount_->disks()[0] << "/tipfs.pid";
  ASSERT_EQ(kill(daemon, SIGKILL), 0);
  ASSERT_TRUE(WaitForProcessExit(daemon, 30)) << "daemon " << daemon << " survived SIGKILL";
  close(fd);  // fails with ENOTCONN on the dead connection; the descriptor is gone either way
  LazyUnmount(mount_->mountpoint());
  ASSERT_FALSE(IsMountPoint(mount_->mountpoint()));
  EXPECT_EQ(ObjectsOf(ino), 4) << "nobody ran: the orphan's objects must still be there";

  ASSERT_EQ(mount_->Mount(), "");
  EXPECT_EQ(ObjectsOf(ino), 0) << "the mount did not reclaim the orphan (inode " << ino << ")";
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), -1);
  EXPECT_EQ(ReadFileOrDie(Path("survivor")), keep_data);
  // The volume keeps working: a new file of the same size gets its own objects.
  ASSERT_TRUE(WriteFileBytes(Path("after"), data));
  EXPECT_EQ(ReadFileOrDie(Path("after")), data);
}

INSTANTIATE_TEST_SUITE_P(DataCache, UnlinkedOpenTest, ::testing::ValuesIn(AllDataCacheModes()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tipfs::testing
