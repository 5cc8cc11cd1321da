// The mount's life cycle as a user drives it: `tipfs mount` returns only when the mount is
// usable, `tipfs umount` returns only when the daemon has exited, and neither leaves anything
// behind (kernel mount, pid file, process), over repeated cycles, in the foreground mode, and
// when the daemon is asked to stop by a signal.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

class MountLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason = FuseUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
    volume_ = std::make_unique<TipfsMount>();
    ASSERT_EQ(volume_->Create(), "");
  }

  // Mounts made outside the TipfsMount (relative paths, foreground) are undone here too.
  void TearDown() override {
    if (volume_ == nullptr || !IsMountPoint(volume_->mountpoint())) return;
    RunCommand(TipfsBinary() + " umount " + volume_->mountpoint());
    if (IsMountPoint(volume_->mountpoint())) LazyUnmount(volume_->mountpoint());
  }

  std::string PidFile() const { return volume_->disks()[0] + "/tipfs.pid"; }

  // Nothing of a mount is left: no kernel mount, no pid file, no live daemon.
  void ExpectNothingLeft(pid_t daemon) {
    EXPECT_FALSE(IsMountPoint(volume_->mountpoint())) << volume_->mountpoint() << " still mounted";
    EXPECT_FALSE(std::filesystem::exists(PidFile())) << PidFile() << " left behind";
    EXPECT_FALSE(ProcessAlive(daemon)) << "daemon " << daemon << " still running";
  }

  std::unique_ptr<TipfsMount> volume_;
};

TEST_F(MountLifecycleTest, MountAndUnmountTwiceInARowLeaveNothingBehind) {
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    ASSERT_EQ(volume_->Mount(), "");
    // Usable the moment the command returned.
    EXPECT_TRUE(IsMountPoint(volume_->mountpoint()));
    struct stat st;
    ASSERT_EQ(stat(volume_->mountpoint().c_str(), &st), 0) << ErrnoName(errno);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    const std::string name = volume_->Path("round" + std::to_string(round));
    ASSERT_TRUE(WriteFileBytes(name, "data of round " + std::to_string(round)));
    const pid_t daemon = ReadDaemonPid(volume_->disks()[0]);
    EXPECT_TRUE(ProcessAlive(daemon)) << "pid file names " << daemon;
    ASSERT_EQ(UnmountRetryingWhileBusy(*volume_), "");
    ExpectNothingLeft(daemon);
  }
  ASSERT_EQ(volume_->Mount(), "");
  EXPECT_EQ(ReadFileOrDie(volume_->Path("round0")), "data of round 0");
  EXPECT_EQ(ReadFileOrDie(volume_->Path("round1")), "data of round 1");
  const pid_t daemon = ReadDaemonPid(volume_->disks()[0]);
  ASSERT_EQ(UnmountRetryingWhileBusy(*volume_), "");
  ExpectNothingLeft(daemon);
}

TEST_F(MountLifecycleTest, RelativePathsAndTrailingSlash) {
  const std::string root = volume_->root();
  CommandResult mounted =
      RunSplit("cd " + ShellQuote(root) + " && " + TipfsBinary() + " mount disk2 mnt");
  ASSERT_EQ(mounted.exit_code, 0) << mounted.err;
  ASSERT_TRUE(IsMountPoint(volume_->mountpoint()));
  // Any disk identifies the volume; the daemon still records itself on disk 0.
  const pid_t daemon = ReadDaemonPid(volume_->disks()[0]);
  EXPECT_TRUE(ProcessAlive(daemon));
  ASSERT_TRUE(WriteFileBytes(volume_->Path("f"), "x"));
  CommandResult unmounted =
      RunSplit("cd " + ShellQuote(root) + " && " + TipfsBinary() + " umount mnt/");
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.err;
  if (IsMountPoint(volume_->mountpoint())) LazyUnmount(volume_->mountpoint());
  ExpectNothingLeft(daemon);
}

TEST_F(MountLifecycleTest, ForegroundMountServesUntilUnmounted) {
  const std::string log = volume_->root() + "/foreground.log";
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    execl(TipfsBinary().c_str(), "tipfs", "mount", "--foreground", volume_->disks()[0].c_str(),
          volume_->mountpoint().c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // A foreground mount has no "ready" signal but the mount table.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool up = false;
  while (!up && std::chrono::steady_clock::now() < deadline) {
    up = IsMountPoint(volume_->mountpoint()) && ReadDaemonPid(volume_->disks()[0]) == child;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (waitpid(child, nullptr, WNOHANG) == child) break;
  }
  if (!up) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    LazyUnmount(volume_->mountpoint());
    FAIL() << "foreground mount did not come up: " << ReadFileOrDie(log);
  }
  EXPECT_TRUE(WriteFileBytes(volume_->Path("fg"), "foreground"));
  // `tipfs umount` waits for the daemon to exit; this process is its parent and must reap it.
  CommandResult unmounted;
  std::thread umount(
      [&] { unmounted = RunSplit(TipfsBinary() + " umount " + volume_->mountpoint()); });
  int status = 0;
  pid_t reaped = waitpid(child, &status, 0);
  umount.join();
  EXPECT_EQ(reaped, child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "foreground daemon status " << status << ", log: " << ReadFileOrDie(log);
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.err;
  if (IsMountPoint(volume_->mountpoint())) LazyUnmount(volume_->mountpoint());
  ExpectNothingLeft(child);
  ASSERT_EQ(volume_->Mount(), "");
  EXPECT_EQ(ReadFileOrDie(volume_->Path("fg")), "foreground");
}

// SIGTERM (shutdown, `kill`) makes the daemon unmount, make everything durable and exit.
TEST_F(MountLifecycleTest, TerminatedDaemonUnmountsAndKeepsTheData) {
  ASSERT_EQ(volume_->Mount(), "");
  const std::string data = PatternBytes(1 << 20, 21);
  ASSERT_TRUE(WriteFileBytes(volume_->Path("big"), data));
  const pid_t daemon = ReadDaemonPid(volume_->disks()[0]);
  ASSERT_TRUE(ProcessAlive(daemon));
  ExpectTerminatedDaemonUnmounts(daemon, volume_->mountpoint());
  ExpectNothingLeft(daemon);
  ASSERT_EQ(volume_->Mount(), "");
  EXPECT_EQ(ReadFileOrDie(volume_->Path("big")), data);
}

// What fsync acknowledged survives the daemon being killed outright (SIGKILL: no unmount, no
// final sync): names, sizes, data and the xattr of fsync'ed files after the next mount.
TEST_F(MountLifecycleTest, FsyncedDataSurvivesAKilledDaemon) {
  ASSERT_EQ(volume_->Mount(), "");
  ASSERT_EQ(mkdir(volume_->Path("dir").c_str(), 0755), 0);
  struct Synced {
    std::string rel;
    std::string data;
  };
  std::vector<Synced> files;
  std::vector<int> still_open;
  for (int i = 0; i < 6; ++i) {
    Synced file{"dir/f" + std::to_string(i), PatternBytes(1000 + i * 150000, 50 + i)};
    int fd = open(volume_->Path(file.rel).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0640);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    ASSERT_EQ(write(fd, file.data.data(), file.data.size()),
              static_cast<ssize_t>(file.data.size()));
    ASSERT_EQ(fsetxattr(fd, "user.i", &i, sizeof(i), 0), 0);
    ASSERT_EQ(i % 2 == 0 ? fsync(fd) : fdatasync(fd), 0) << ErrnoName(errno);
    files.push_back(file);
    // Left open on purpose for some: the kill comes while they are open.
    if (i >= 3) {
      close(fd);
    } else {
      still_open.push_back(fd);
    }
  }
  const pid_t daemon = ReadDaemonPid(volume_->disks()[0]);
  ASSERT_TRUE(ProcessAlive(daemon));
  ASSERT_EQ(kill(daemon, SIGKILL), 0);
  ASSERT_TRUE(WaitForProcessExit(daemon, 30));
  for (int fd : still_open) close(fd);  // ENOTCONN: the connection died with the daemon
  LazyUnmount(volume_->mountpoint());
  ASSERT_FALSE(IsMountPoint(volume_->mountpoint()));
  ASSERT_EQ(volume_->Mount(), "");
  for (int i = 0; i < static_cast<int>(files.size()); ++i) {
    const std::string path = volume_->Path(files[i].rel);
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0) << files[i].rel << ": " << ErrnoName(errno);
    EXPECT_EQ(st.st_mode & 07777, 0640u);
    EXPECT_EQ(static_cast<size_t>(st.st_size), files[i].data.size()) << files[i].rel;
    EXPECT_TRUE(ReadFileOrDie(path) == files[i].data) << files[i].rel << " lost data";
    int value = -1;
    EXPECT_EQ(getxattr(path.c_str(), "user.i", &value, sizeof(value)), 4) << ErrnoName(errno);
    EXPECT_EQ(value, i);
  }
}

}  // namespace
}  // namespace tipfs::testing
