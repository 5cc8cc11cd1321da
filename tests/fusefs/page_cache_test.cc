// Kernel data-cache mode: what of a reader's work still reaches the daemon. A sequential reader
// of the page cache is read ahead in max_readahead requests (1 MiB), not in the 128 KiB the
// kernel gives every new FUSE mount (fusefs/kernel_readahead.h).
#include <fcntl.h>
#include <unistd.h>

#include <sstream>
#include <string>

#include "fusefs/kernel_readahead.h"
#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

TEST(PageCacheTest, SequentialReadsReachTheDaemonInOneMibRequests) {
  const std::string reason = FuseUnavailableReason();
  if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
  if (geteuid() != 0) GTEST_SKIP() << "only root may change a mount's read_ahead_kb";
  TipfsMount volume(VolumeSpec{4, "", "--cache-size 32M --data-cache kernel"});
  ASSERT_EQ(volume.Create(), "");
  ASSERT_EQ(volume.Mount(), "");
  constexpr size_t kMib = 1 << 20;
  constexpr int kMibs = 8;
  const std::string bytes = PatternBytes(kMibs * kMib, 11);
  ASSERT_TRUE(WriteFileBytes(volume.Path("f"), bytes));
  ASSERT_EQ(volume.Unmount(), "");
  ASSERT_EQ(volume.Mount(), "");  // a new superblock: nothing of f in the page cache

  const uint64_t before = MountCounter(volume.mountpoint(), "fuse.read.ops");
  const int fd = open(volume.Path("f").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::string buffer(kMib, '\0');
  for (int i = 0; i < kMibs; ++i) {
    ASSERT_EQ(read(fd, buffer.data(), kMib), static_cast<ssize_t>(kMib)) << "MiB " << i;
    ASSERT_EQ(buffer, bytes.substr(i * kMib, kMib)) << "MiB " << i;
  }
  close(fd);
  // One request per MiB read ahead; the kernel's 128 KiB default made it 64.
  EXPECT_LE(MountCounter(volume.mountpoint(), "fuse.read.ops") - before, 2u * kMibs);
}

TEST(PageCacheTest, TheMountsDeviceIsFoundByItsUnescapedPath) {
  std::istringstream table(
      "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
      "90 22 0:55 / /tmp/a\\040b rw - fuse.tipfs /d0 rw\n"
      "91 22 0:56 / /tmp/c rw - fuse.tipfs /d1 rw\n"
      "92 22 0:57 / /tmp/a\\040b rw - fuse.tipfs /d2 rw\n");
  EXPECT_EQ(fusefs::MountDeviceOf(table, "/tmp/a b"), "0:57");  // the last, visible mount
  table.clear();
  table.seekg(0);
  EXPECT_EQ(fusefs::MountDeviceOf(table, "/tmp/none"), "");
}

}  // namespace
}  // namespace tipfs::testing
