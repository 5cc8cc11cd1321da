// What the daemon undoes when a reply does not reach the kernel (the request was interrupted, or
// the connection is going away): libfuse then returns an error from fuse_reply_*, and whatever
// the daemon counted for the kernel must be given back. The daemon runs with the reply-fault
// shim (tests/support/reply_faults.c) preloaded, which makes chosen replies fail that way.
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

class ReplyFaultTest : public MountedTest {
 protected:
  void SetUp() override {
    faults_ = std::string(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") + "/reply-faults-" +
              std::to_string(getpid());
    std::ofstream(faults_).flush();
    // Only the daemon started by SetUp gets the shim (it inherits this environment).
    const char* asan = getenv("ASAN_OPTIONS");
    saved_asan_ = asan != nullptr ? asan : "";
    // Under AddressSanitizer the runtime must come first; the shim only wraps two functions.
    setenv("ASAN_OPTIONS", (saved_asan_ + ":verify_asan_link_order=0").c_str(), 1);
    setenv("LD_PRELOAD", REPLY_FAULTS_SHIM, 1);
    setenv("TIPFS_TEST_REPLY_FAULTS", faults_.c_str(), 1);
    MountedTest::SetUp();
    unsetenv("LD_PRELOAD");
    unsetenv("TIPFS_TEST_REPLY_FAULTS");
    setenv("ASAN_OPTIONS", saved_asan_.c_str(), 1);
  }
  void TearDown() override {
    MountedTest::TearDown();
    unlink(faults_.c_str());
  }
  // The next `count` replies of `kind` (open, buf) to this process's requests fail.
  void Arm(const std::string& kind, int count) {
    std::ofstream(faults_) << kind << " " << count << " " << getpid() << "\n";
  }
  uint64_t InodesInUse() const {
    struct statvfs st;
    if (statvfs(mount_->mountpoint().c_str(), &st) != 0) return 0;
    return st.f_files - st.f_ffree;
  }

  std::string faults_;
  std::string saved_asan_;
};

TEST_F(ReplyFaultTest, AReaddirplusReplyThatFailsGivesBackItsLookupReferences) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop the kernel's inode cache";
  constexpr int kFiles = 20;
  ASSERT_EQ(mkdir(Path("d").c_str(), 0755), 0);
  for (int i = 0; i < kFiles; ++i) {
    ASSERT_TRUE(WriteFileBytes(Path("d/f" + std::to_string(i)), "x"));
  }
  const uint64_t with_files = InodesInUse();

  // The first listing of a directory is a readdirplus: one lookup reference per entry it hands
  // the kernel. This reply never arrives (the lister gets EIO), so the kernel holds none.
  Arm("buf", 1);
  DIR* dir = opendir(Path("d").c_str());
  ASSERT_NE(dir, nullptr);
  errno = 0;
  EXPECT_EQ(readdir(dir), nullptr);
  EXPECT_EQ(errno, EIO) << "the failed reply was not the listing";
  closedir(dir);

  // Unlinked, the files' records go when the kernel has forgotten every reference it held; a
  // reference counted for the failed reply would keep them forever.
  for (int i = 0; i < kFiles; ++i) ASSERT_EQ(unlink(Path("d/f" + std::to_string(i)).c_str()), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (InodesInUse() != with_files - kFiles && std::chrono::steady_clock::now() < deadline) {
    sync();
    std::ofstream("/proc/sys/vm/drop_caches") << "2\n";  // the kernel forgets unused inodes
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(InodesInUse(), with_files - kFiles)
      << "records of unlinked files kept by leaked lookups";
}

TEST_F(ReplyFaultTest, AControlFileOpenWhoseReplyFailsLeavesTheMountWorking) {
  // The handle made for the open is freed with the failed reply; under AddressSanitizer (this
  // test is labelled sanitize) a leak of it fails the run at unmount.
  Arm("open", 1);
  EXPECT_EQ(open(Path(".tipfs/stats").c_str(), O_RDONLY), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_NE(ReadFileOrDie(Path(".tipfs/stats")).find("disk"), std::string::npos);
  // And a regular file's open undone the same way keeps the file usable and its count right.
  ASSERT_TRUE(WriteFileBytes(Path("plain"), "contents"));
  Arm("open", 1);
  EXPECT_EQ(open(Path("plain").c_str(), O_RDONLY), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(ReadFileOrDie(Path("plain")), "contents");
  ASSERT_EQ(unlink(Path("plain").c_str()), 0);
}

}  // namespace
}  // namespace tipfs::testing
