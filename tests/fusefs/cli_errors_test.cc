// Bad input to `tipfs mkfs`, `tipfs mount` and `tipfs umount`: each is refused with a non-zero
// exit status and exactly one line on stderr that names the path or value and the problem, and
// nothing changes on disk (the listing of every disk directory, with the label bytes, is the
// same before and after), nothing gets mounted, no daemon is left running.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

// Mount tests need FUSE; mkfs tests do not.
#define SKIP_WITHOUT_FUSE()                                              \
  do {                                                                   \
    const std::string reason = FuseUnavailableReason();                  \
    if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason; \
  } while (false)

class CliErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override { volume_ = std::make_unique<TipfsMount>(); }

  // A command that should have been refused but mounted something must not leave it behind:
  // everything mounted under the root goes (stacked mounts too, hence the rounds). The
  // TipfsMount's own unmount then finds nothing to do.
  void TearDown() override {
    if (volume_ == nullptr) return;
    for (int round = 0; round < 5 && !MountsUnderRoot().empty(); ++round) {
      for (const std::string& mountpoint : MountsUnderRoot()) {
        if (RunCommand(TipfsBinary() + " umount " + mountpoint) != 0) LazyUnmount(mountpoint);
      }
    }
  }

  std::string Tipfs() const { return TipfsBinary(); }
  std::string Disks() const {
    std::string text;
    for (const std::string& disk : volume_->disks()) text += " " + disk;
    return text;
  }
  std::string Root(const std::string& rel) const { return volume_->root() + "/" + rel; }

  // The listing of every directory directly under the volume's root except mount points, with
  // label bytes. `live` lists directories (relative to their disk) a running daemon writes.
  std::string Listing(const std::vector<std::string>& live = {}) const {
    std::string text;
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(volume_->root())) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const std::string path = Root(name);
      if (IsMountPoint(path)) {
        text += "[" + name + ": a mount]\n";
        continue;
      }
      text += "[" + name + "]\n" + DiskListing(path, live);
    }
    return text;
  }

  // Runs a command that must be refused; checks the one-line message and that nothing changed.
  // `exit_code` -1: any failure; else exactly it (2 a usage error, 1 a failure at run time).
  void ExpectRefused(const std::string& command, const std::vector<std::string>& mentions,
                     const std::vector<std::string>& live = {}, int exit_code = -1) {
    SCOPED_TRACE(command);
    const std::string before = Listing(live);
    const std::vector<std::string> mounted_before = MountsUnderRoot();
    CommandResult result = RunSplit(command);
    EXPECT_NE(result.exit_code, 0) << "accepted; stdout: " << result.out;
    if (exit_code >= 0) {
      EXPECT_EQ(result.exit_code, exit_code) << result.err;
    }
    EXPECT_LT(result.err.size(), 400u) << "a one-line message, not a page: " << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1)
        << "stderr must be exactly one line: [" << result.err << "]";
    EXPECT_TRUE(!result.err.empty() && result.err.back() == '\n') << "[" << result.err << "]";
    for (const std::string& mention : mentions) {
      EXPECT_NE(result.err.find(mention), std::string::npos)
          << "the message does not name '" << mention << "': " << result.err;
    }
    EXPECT_EQ(before, Listing(live)) << "the refused command changed the disks";
    EXPECT_EQ(mounted_before, MountsUnderRoot()) << "the refused command changed the mounts";
    EXPECT_TRUE(ProcessesMentioning(volume_->root() + "/").size() <= DaemonsExpected())
        << "a daemon was left running";
  }

  std::vector<std::string> MountsUnderRoot() const {
    std::vector<std::string> mounts;
    for (const auto& entry : std::filesystem::directory_iterator(volume_->root())) {
      if (IsMountPoint(entry.path().string())) mounts.push_back(entry.path().string());
    }
    return mounts;
  }

  size_t DaemonsExpected() const { return MountsUnderRoot().size(); }

  void Mkfs() {
    CommandResult made = RunSplit(Tipfs() + " mkfs" + Disks());
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }

  void Rename(const std::string& from, const std::string& to) {
    ASSERT_EQ(rename(Root(from).c_str(), Root(to).c_str()), 0) << from << " -> " << to;
  }

  std::unique_ptr<TipfsMount> volume_;
};

// ---- mkfs ----

TEST_F(CliErrorsTest, MkfsOverAnExistingVolumeWithoutForce) {
  Mkfs();
  ExpectRefused(Tipfs() + " mkfs" + Disks(), {volume_->disks()[0]});
  // One disk of the volume alone is refused just the same.
  ExpectRefused(Tipfs() + " mkfs " + volume_->disks()[2], {volume_->disks()[2]});
}

TEST_F(CliErrorsTest, MkfsOverADirectoryWithOtherFiles) {
  ASSERT_TRUE(WriteFileBytes(volume_->disks()[1] + "/precious.txt", "keep me"));
  ExpectRefused(Tipfs() + " mkfs" + Disks(), {volume_->disks()[1]});
  // --force makes the volume and still leaves the user's file alone.
  CommandResult forced = RunSplit(Tipfs() + " mkfs --force" + Disks());
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(ReadFileOrDie(volume_->disks()[1] + "/precious.txt"), "keep me");
}

TEST_F(CliErrorsTest, MkfsWithABadStripeUnit) {
  for (const char* unit : {"3K", "1G", "0", "100000"}) {
    ExpectRefused(Tipfs() + " mkfs --stripe-unit " + unit + Disks(), {"stripe unit"});
  }
  for (const char* unit : {"abc", "-4K", "64X"}) {
    ExpectRefused(Tipfs() + " mkfs --stripe-unit " + unit + Disks(), {unit});
  }
}

TEST_F(CliErrorsTest, MkfsWithZeroOr65Disks) {
  ExpectRefused(Tipfs() + " mkfs", {"DISK"});
  std::string many;
  for (int i = 0; i < 65; ++i) {
    const std::string dir = Root("many/d" + std::to_string(i));
    std::filesystem::create_directories(dir);
    many += " " + dir;
  }
  ExpectRefused(Tipfs() + " mkfs" + many, {"64"});
}

TEST_F(CliErrorsTest, MkfsWithTheSameDirectoryTwice) {
  const std::string d0 = volume_->disks()[0];
  ExpectRefused(Tipfs() + " mkfs " + d0 + " " + volume_->disks()[1] + " " + d0, {d0});
  // The same directory under another spelling.
  ExpectRefused(Tipfs() + " mkfs " + d0 + " " + d0 + "/../disk0/", {"same"});
}

TEST_F(CliErrorsTest, MkfsOfAMissingDirectoryOrAFile) {
  ExpectRefused(Tipfs() + " mkfs " + Root("does-not-exist"), {Root("does-not-exist")});
  ASSERT_TRUE(WriteFileBytes(Root("plainfile"), "x"));
  ExpectRefused(Tipfs() + " mkfs " + Root("plainfile"), {Root("plainfile")});
}

// ---- mount ----

TEST_F(CliErrorsTest, MountWithADiskMissing) {
  SKIP_WITHOUT_FUSE();
  Mkfs();
  Rename("disk2", "disk2.away");
  ExpectRefused(Tipfs() + " mount " + volume_->disks()[0] + " " + volume_->mountpoint(),
                {volume_->disks()[2]});
}

TEST_F(CliErrorsTest, MountWithADiskOfAnotherVolume) {
  SKIP_WITHOUT_FUSE();
  Mkfs();
  std::string others;
  for (int i = 0; i < 4; ++i) {
    std::filesystem::create_directories(Root("other" + std::to_string(i)));
    others += " " + Root("other" + std::to_string(i));
  }
  CommandResult made = RunSplit(Tipfs() + " mkfs" + others);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  Rename("disk1", "disk1.mine");
  Rename("other1", "disk1");
  ExpectRefused(Tipfs() + " mount " + volume_->disks()[0] + " " + volume_->mountpoint(),
                {volume_->disks()[1]});
}

TEST_F(CliErrorsTest, MountWithDisksInAnotherOrder) {
  SKIP_WITHOUT_FUSE();
  Mkfs();
  Rename("disk1", "swap");
  Rename("disk2", "disk1");
  Rename("swap", "disk2");
  ExpectRefused(Tipfs() + " mount " + volume_->disks()[0] + " " + volume_->mountpoint(),
                {volume_->disks()[1]});
  // Named through a swapped disk, too.
  ExpectRefused(Tipfs() + " mount " + volume_->disks()[2] + " " + volume_->mountpoint(), {"disk"});
}

TEST_F(CliErrorsTest, MountOfADirectoryThatIsNoVolume) {
  SKIP_WITHOUT_FUSE();
  ExpectRefused(Tipfs() + " mount " + volume_->disks()[0] + " " + volume_->mountpoint(),
                {volume_->disks()[0]});
}

TEST_F(CliErrorsTest, MountOnAMissingMountpointOrAFile) {
  SKIP_WITHOUT_FUSE();
  Mkfs();
  ExpectRefused(Tipfs() + " mount " + volume_->disks()[0] + " " + Root("no-such-dir"),
                {Root("no-such-dir")});
  ASSERT_TRUE(WriteFileBytes(Root("a-file"), "x"));
  ExpectRefused(Tipfs() + " mount " + volume_->disks()[0] + " " + Root("a-file"), {Root("a-file")});
}

TEST_F(CliErrorsTest, MountOnABusyMountpoint) {
  SKIP_WITHOUT_FUSE();
  Mkfs();
  ASSERT_EQ(volume_->Mount(), "");
  ASSERT_TRUE(WriteFileBytes(volume_->Path("first"), "first volume"));
  // Another volume onto the same mountpoint.
  TipfsMount other;
  ASSERT_EQ(other.Create(), "");
  ExpectRefused(Tipfs() + " mount " + other.disks()[0] + " " + volume_->mountpoint(),
                {volume_->mountpoint()}, {"meta"});
  EXPECT_EQ(ReadFileOrDie(volume_->Path("first")), "first volume");
}

TEST_F(CliErrorsTest, SecondMountOfAMountedVolume) {
  SKIP_WITHOUT_FUSE();
  Mkfs();
  ASSERT_EQ(volume_->Mount(), "");
  const pid_t daemon = ReadDaemonPid(volume_->disks()[0]);
  ASSERT_TRUE(WriteFileBytes(volume_->Path("first"), "still here"));
  std::filesystem::create_directories(Root("mnt2"));
  // The running daemon serves it (the message says where it is mounted).
  ExpectRefused(Tipfs() + " mount " + volume_->disks()[3] + " " + Root("mnt2"),
                {volume_->disks()[0], "already mounted at " + volume_->mountpoint()}, {"meta"});
  EXPECT_FALSE(IsMountPoint(Root("mnt2")));
  EXPECT_EQ(ReadDaemonPid(volume_->disks()[0]), daemon) << "the pid file was overwritten";
  EXPECT_EQ(ReadFileOrDie(volume_->Path("first")), "still here");
  ASSERT_EQ(UnmountRetryingWhileBusy(*volume_), "");
  EXPECT_FALSE(ProcessAlive(daemon));
}

TEST_F(CliErrorsTest, MountWithABadCacheSize) {
  SKIP_WITHOUT_FUSE();
  Mkfs();
  for (const char* size : {"abc", "12Q", "-1", "1.5.5M"}) {
    ExpectRefused(Tipfs() + " mount --cache-size " + size + " " + volume_->disks()[0] + " " +
                      volume_->mountpoint(),
                  {size});
  }
}

TEST_F(CliErrorsTest, MountWithABadDiskModel) {
  SKIP_WITHOUT_FUSE();
  Mkfs();
  for (const char* model : {"warp9", "hdd,L=abc", "hdd,bogus=1", "hdd,slowdown=-2", ","}) {
    ExpectRefused(Tipfs() + " mount --disk-model '" + model + "' " + volume_->disks()[0] + " " +
                      volume_->mountpoint(),
                  {"--disk-model"});
  }
}

// ---- umount ----

TEST_F(CliErrorsTest, UmountOfSomethingThatIsNoTipfsMount) {
  ExpectRefused(Tipfs() + " umount " + volume_->mountpoint(), {volume_->mountpoint()});
  ExpectRefused(Tipfs() + " umount " + Root("nowhere"), {Root("nowhere")});
  ExpectRefused(Tipfs() + " umount /proc", {"/proc"});
}

// ---- messages a new user hit (issue 13): one line naming the value; usage 2, run time 1 ----

TEST_F(CliErrorsTest, UsageErrorsExit2AndNameTheValue) {
  ExpectRefused(Tipfs() + " frobnicate", {"'frobnicate'", "mkfs", "mount"}, {}, 2);
  ExpectRefused(Tipfs() + " mount --bogus-option a b", {"--bogus-option"}, {}, 2);
  ExpectRefused(Tipfs() + " mkfs", {"DISK"}, {}, 2);
  ExpectRefused(Tipfs() + " stats --watch 0 /", {"--watch", "'0'"}, {}, 2);
  ExpectRefused(Tipfs() + " stats --watch abc /", {"--watch", "'abc'"}, {}, 2);
  ExpectRefused(Tipfs() + " mount --data-cache fast a b", {"--data-cache", "'fast'"}, {}, 2);
  ExpectRefused(Tipfs() + " hint --source manual /", {"--source manual"}, {}, 2);
  ExpectRefused(Tipfs() + " umount " + Root("nowhere"), {Root("nowhere")}, {}, 2);
}

TEST_F(CliErrorsTest, MountRefusesACacheBelowTheMinimumAndBadDashOOptions) {
  SKIP_WITHOUT_FUSE();
  Mkfs();
  const std::string target = " " + volume_->disks()[0] + " " + volume_->mountpoint();
  for (const char* size : {"0", "10K", "255K"}) {
    ExpectRefused(Tipfs() + " mount --cache-size " + size + target,
                  {std::string("--cache-size ") + size, "minimum of 256 KiB"}, {}, 2);
  }
  ExpectRefused(Tipfs() + " mount -o cache_size=10K" + target, {"--cache-size 10K"}, {}, 2);
  ExpectRefused(Tipfs() + " mount -o bogus=1" + target, {"'bogus=1'"}, {}, 2);
  ExpectRefused(Tipfs() + " mount -o data_cache=fast" + target, {"data_cache=fast"}, {}, 2);
  ExpectRefused(Tipfs() + " mount -o cache_size" + target, {"cache_size"}, {}, 2);
  ExpectRefused(Tipfs() + " mount -o fuse_io_uring=yes" + target, {"fuse_io_uring=yes"}, {}, 2);
  ExpectRefused(Tipfs() + " mount --fuse-io-uring yes" + target, {"--fuse-io-uring", "'yes'"}, {},
                2);
}

TEST_F(CliErrorsTest, MountWithALogInAMissingDirectory) {
  SKIP_WITHOUT_FUSE();
  Mkfs();
  const std::string log = Root("no-such-dir/tipfs.log");
  ExpectRefused(
      Tipfs() + " mount --log " + log + " " + volume_->disks()[0] + " " + volume_->mountpoint(),
      {log, "No such file or directory"}, {}, 1);
}

TEST_F(CliErrorsTest, MkfsSaysItsNameOnce) {
  CommandResult result = RunSplit(Tipfs() + " mkfs " + Root("does-not-exist"));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err.find("mkfs: mkfs"), std::string::npos) << result.err;
  EXPECT_EQ(result.err.rfind("tipfs mkfs: ", 0), 0u) << result.err;
}

TEST_F(CliErrorsTest, HintErrorsNameThePath) {
  ExpectRefused(Tipfs() + " hint " + Root("missing-file"), {Root("missing-file")}, {}, 1);
  ASSERT_TRUE(WriteFileBytes(Root("outside"), "x"));
  ExpectRefused(Tipfs() + " hint " + Root("outside"), {Root("outside"), "not inside a tipfs mount"},
                {}, 1);
  ExpectRefused(Tipfs() + " hint --list " + Root("no-list"), {Root("no-list")}, {}, 1);
}

TEST_F(CliErrorsTest, HelpUsesTheManPagesNotation) {
  for (const char* command :
       {"", " mkfs", " mount", " umount", " stats", " hint", " run", " fsck"}) {
    SCOPED_TRACE(command);
    CommandResult help = RunSplit(Tipfs() + command + " --help");
    EXPECT_EQ(help.exit_code, 0);
    // CLI11's own words: type names, counts and markers.
    const std::regex notation("\\b(TEXT|REQUIRED|FLOAT|INT|UINT)\\b|\\(\\d+x\\)|:SIZE| x \\d");
    EXPECT_FALSE(std::regex_search(help.out, notation)) << help.out;
  }
  CommandResult version = RunSplit(Tipfs() + " --version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("tipfs ", 0), 0u) << version.out;
}

TEST_F(CliErrorsTest, AfterTheDaemonDiedStatsAndMountSayRunTipfsUmount) {
  SKIP_WITHOUT_FUSE();
  Mkfs();
  ASSERT_EQ(volume_->Mount(), "");
  const pid_t daemon = ReadDaemonPid(volume_->disks()[0]);
  ASSERT_EQ(kill(daemon, SIGKILL), 0);
  ASSERT_TRUE(WaitForProcessExit(daemon, 30));
  const std::string mnt = volume_->mountpoint();
  CommandResult stats = RunSplit(Tipfs() + " stats " + mnt);
  EXPECT_EQ(stats.exit_code, 1);
  EXPECT_NE(stats.err.find("tipfs umount " + mnt), std::string::npos) << stats.err;
  EXPECT_EQ(std::count(stats.err.begin(), stats.err.end(), '\n'), 1) << stats.err;
  CommandResult mount = RunSplit(Tipfs() + " mount " + volume_->disks()[0] + " " + mnt);
  EXPECT_EQ(mount.exit_code, 1);
  EXPECT_NE(mount.err.find("tipfs umount " + mnt), std::string::npos) << mount.err;
  // And that advice works: the dead mount goes, the next mount recovers.
  CommandResult umount = RunSplit(Tipfs() + " umount " + mnt);
  EXPECT_EQ(umount.exit_code, 0) << umount.err;
  EXPECT_FALSE(IsMountPoint(mnt));
  ASSERT_EQ(volume_->Mount(), "");
}

TEST_F(CliErrorsTest, UmountOfABusyMountNamesWhoHoldsItAndLazyDetaches) {
  SKIP_WITHOUT_FUSE();
  Mkfs();
  ASSERT_EQ(volume_->Mount(), "");
  const std::string mnt = volume_->mountpoint();
  ASSERT_EQ(RunCommand("mkdir " + mnt + "/work"), 0);
  // A process working inside the mount: its cwd and an open file are there.
  pid_t holder = fork();
  if (holder == 0) {
    if (chdir((mnt + "/work").c_str()) != 0) _exit(1);
    execlp("sh", "sh", "-c", "exec 3>held; exec sleep 600", nullptr);
    _exit(1);
  }
  for (int i = 0; i < 3000 && access((mnt + "/work/held").c_str(), F_OK) != 0; ++i) usleep(10000);
  const pid_t daemon = ReadDaemonPid(volume_->disks()[0]);
  CommandResult busy = RunSplit(Tipfs() + " umount " + mnt);
  EXPECT_EQ(busy.exit_code, 1);
  EXPECT_EQ(std::count(busy.err.begin(), busy.err.end(), '\n'), 1) << busy.err;
  EXPECT_NE(busy.err.find("pid " + std::to_string(holder) + " (sleep)"), std::string::npos)
      << busy.err;
  EXPECT_NE(busy.err.find("--lazy"), std::string::npos) << busy.err;
  EXPECT_TRUE(IsMountPoint(mnt)) << "a busy mount must stay mounted";
  CommandResult lazy = RunSplit(Tipfs() + " umount --lazy " + mnt);
  EXPECT_EQ(lazy.exit_code, 0) << lazy.err;
  EXPECT_FALSE(IsMountPoint(mnt));
  // The daemon serves the process still inside until it lets go, then exits.
  EXPECT_TRUE(ProcessAlive(daemon));
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  EXPECT_TRUE(WaitForProcessExit(daemon, 60));
}

}  // namespace
}  // namespace tipfs::testing
