// What a program's open and close cost in FUSE requests. tipfs's FLUSH has nothing to do (writes
// reach the disks as they arrive), so every open answers FOPEN_NOFLUSH and a close sends no FLUSH,
// except an O_RDWR open in kernel data-cache mode: only such an open can map the file shared and
// writable, and the kernel's flush at its close writes the mapping's dirty pages back. The
// daemon's request counters (tipfs stats, "files") show what reached it.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

class RoundTripsTest : public DataCacheModeTest {
 protected:
  uint64_t Counter(const std::string& name) const {
    return MountCounter(mount_->mountpoint(), name);
  }

  // Opens "f" with `flags`, writes `bytes` when given, closes; the FLUSH requests that sent.
  uint64_t FlushesOfOpenClose(int flags, const std::string& bytes = "") {
    const uint64_t before = Counter("fuse.flush.ops");
    const int fd = open(Path("f").c_str(), flags | O_CLOEXEC, 0644);
    EXPECT_GE(fd, 0) << ErrnoName(errno);
    if (fd < 0) return 0;
    if (!bytes.empty()) {
      EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()))
          << ErrnoName(errno);
    }
    EXPECT_EQ(close(fd), 0) << ErrnoName(errno);
    return Counter("fuse.flush.ops") - before;
  }
};

TEST_P(RoundTripsTest, AClosedFileSendsNoFlushUnlessItMayBeMappedWritable) {
  const uint64_t creates = Counter("fuse.create.ops");
  EXPECT_EQ(FlushesOfOpenClose(O_CREAT | O_WRONLY, "data"), 0u);
  EXPECT_EQ(Counter("fuse.create.ops") - creates, 1u);
  EXPECT_EQ(FlushesOfOpenClose(O_RDONLY), 0u);
  EXPECT_EQ(FlushesOfOpenClose(O_WRONLY | O_APPEND, "data"), 0u);
  EXPECT_EQ(FlushesOfOpenClose(O_RDWR), GetParam() == "kernel" ? 1u : 0u);
  // The writes arrived without a flush to push them.
  EXPECT_EQ(ReadFileOrDie(Path("f")), "datadata");

  const uint64_t unlinks = Counter("fuse.unlink.ops");
  ASSERT_EQ(unlink(Path("f").c_str()), 0) << ErrnoName(errno);
  EXPECT_EQ(Counter("fuse.unlink.ops") - unlinks, 1u);
}

INSTANTIATE_TEST_SUITE_P(DataCache, RoundTripsTest, ::testing::Values("direct", "kernel"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tipfs::testing
