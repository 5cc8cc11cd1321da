// Bad input to `tipfs mkfs`, `tipfs mount` and `tipfs umount`: each is refused with a non-zero
// exit status and exactly one line on stderr that names the path or value and the problem, and
// nothing changes on disk (the listing of every disk directory, with the label bytes, is the
// same before and after), nothing gets mounted, no daemon is left running.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
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
  void ExpectRefused(const std::string& command, const std::vector<std::string>& mentions,
                     const std::vector<std::string>& live = {}) {
    SCOPED_TRACE(command);
    const std::string before = Listing(live);
    const std::vector<std::string> mounted_before = MountsUnderRoot();
    CommandResult result = RunSplit(command);
    EXPECT_NE(result.exit_code, 0) << "accepted; stdout: " << result.out;
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
  // The metadata store is locked by the running daemon (the message says so and names it).
  ExpectRefused(Tipfs() + " mount " + volume_->disks()[3] + " " + Root("mnt2"),
                {volume_->disks()[0], "locked"}, {"meta"});
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

}  // namespace
}  // namespace tipfs::testing
