// Damaged labels and metadata stores (flipped bytes, truncated or missing files) of an unmounted
// volume: `tipfs mount` refuses with one line naming what is damaged and leaves nothing mounted,
// `tipfs fsck` reports it (exit 4) and never crashes, and what fsck can safely repair (a label,
// from the other disks) it repairs, after which the volume mounts with its data intact.
// Damage inside a table block of the store is only found when that block is read: the mount
// succeeds, operations that touch it fail with EUCLEAN, and fsck (which reads every record)
// reports it.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

namespace fs_std = std::filesystem;

constexpr int kFiles = 40;

void FlipByte(const std::string& path, int64_t offset) {  // negative: from the end
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f) << path;
  f.seekg(0, std::ios::end);
  const int64_t size = f.tellg();
  const int64_t at = offset >= 0 ? offset : size + offset;
  ASSERT_GE(at, 0);
  ASSERT_LT(at, size);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x5a;
  f.seekp(at);
  f.write(&c, 1);
}

void Cut(const std::string& path, double fraction) {
  std::error_code ec;
  const auto size = fs_std::file_size(path, ec);
  ASSERT_FALSE(ec) << path;
  fs_std::resize_file(path, static_cast<uintmax_t>(size * fraction));
}

// The newest file in `dir` whose name ends with `suffix` (or starts with it, for MANIFEST-).
std::string Newest(const std::string& dir, const std::string& part) {
  std::string best;
  for (const auto& e : fs_std::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(part) == std::string::npos) continue;
    if (best.empty() || name > fs_std::path(best).filename().string()) best = e.path().string();
  }
  return best;
}

class CorruptionTest : public MountedTest {
 protected:
  void SetUp() override {
    MountedTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    for (int i = 0; i < kFiles; ++i) {
      ASSERT_TRUE(WriteFileBytes(Path("f" + std::to_string(i)), PatternBytes(70'000, i)));
    }
    ASSERT_EQ(mount_->Unmount(), "");
  }

  std::string Meta() const { return mount_->disks()[0] + "/meta"; }
  CommandResult Tipfs(const std::string& args) { return RunSplit(TipfsBinary() + " " + args); }
  CommandResult Fsck(const std::string& args = "", int disk = 0) {
    return Tipfs("fsck " + args + " " + ShellQuote(mount_->disks()[disk]));
  }
  // The mount is refused with one line on stderr containing `what`, and nothing is mounted.
  void ExpectMountRefused(const std::string& what) {
    CommandResult r =
        Tipfs("mount " + ShellQuote(mount_->disks()[0]) + " " + ShellQuote(mount_->mountpoint()));
    EXPECT_NE(r.exit_code, 0) << "the damaged volume was mounted";
    EXPECT_LT(r.exit_code, 128) << "tipfs mount crashed";
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(IsMountPoint(mount_->mountpoint()));
    if (IsMountPoint(mount_->mountpoint())) (void)mount_->Unmount();
  }
  void ExpectFsckReports(const std::string& kind) {
    CommandResult r = Fsck();
    EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
    EXPECT_NE(r.out.find("[" + kind + "]"), std::string::npos) << r.out << r.err;
    CommandResult repair = Fsck("--repair");  // what it cannot repair, it leaves: no crash
    EXPECT_EQ(repair.exit_code, 4) << repair.out << repair.err;
  }
  void ExpectDataIntact() {
    ASSERT_EQ(mount_->Mount(), "");
    for (int i = 0; i < kFiles; ++i) {
      EXPECT_EQ(HashFile(Path("f" + std::to_string(i))), HashBytes(PatternBytes(70'000, i)));
    }
    ASSERT_EQ(mount_->Unmount(), "");
    EXPECT_EQ(Fsck().exit_code, 0);
  }
};

TEST_F(CorruptionTest, LeakedAndOverlongObjectsOnARealDiskAreRepaired) {
  // An object no inode owns (space a lost file left), and one that runs past its file's end.
  const std::string leaked = ObjectPath(mount_->disks()[1], 0xABCDEF);
  fs_std::create_directories(fs_std::path(leaked).parent_path());
  ASSERT_TRUE(WriteFileBytes(leaked, PatternBytes(5000, 1)));
  struct stat st;
  ASSERT_EQ(mount_->Mount(), "");
  ASSERT_EQ(stat(Path("f0").c_str(), &st), 0);
  ASSERT_EQ(mount_->Unmount(), "");
  std::string longer;
  for (const std::string& disk : mount_->disks()) {
    if (fs_std::exists(ObjectPath(disk, st.st_ino))) longer = ObjectPath(disk, st.st_ino);
  }
  ASSERT_FALSE(longer.empty());
  fs_std::resize_file(longer, fs_std::file_size(longer) + 100'000);
  CommandResult check = Fsck();
  EXPECT_EQ(check.exit_code, 4) << check.out << check.err;
  EXPECT_NE(check.out.find("[leaked-object]"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("[object-too-long]"), std::string::npos) << check.out;
  CommandResult repair = Fsck("--repair");
  EXPECT_EQ(repair.exit_code, 1) << repair.out << repair.err;
  EXPECT_NE(repair.out.find("2 problems, 2 repaired, 0 left"), std::string::npos) << repair.out;
  EXPECT_FALSE(fs_std::exists(leaked));
  ExpectDataIntact();
}

TEST_F(CorruptionTest, MountedVolumeIsRefused) {
  ASSERT_EQ(mount_->Mount(), "");
  CommandResult r = Fsck("--repair");
  EXPECT_EQ(r.exit_code, 8) << r.out << r.err;
  EXPECT_NE(r.err.find("refusing to check a mounted volume"), std::string::npos) << r.err;
  ASSERT_EQ(mount_->Unmount(), "");
  EXPECT_EQ(Fsck().exit_code, 0);
}

TEST_F(CorruptionTest, DamagedLabelIsRefusedReportedAndRewrittenFromTheOthers) {
  const std::string label = mount_->disks()[2] + "/tipfs-label";
  FlipByte(label, 40);
  ExpectMountRefused(mount_->disks()[2]);
  CommandResult check = Fsck();
  EXPECT_EQ(check.exit_code, 4) << check.out << check.err;
  EXPECT_NE(check.out.find("[label] disk 2 (" + mount_->disks()[2] + ")"), std::string::npos)
      << check.out;
  CommandResult repair = Fsck("--repair");
  EXPECT_EQ(repair.exit_code, 1) << repair.out << repair.err;
  EXPECT_NE(repair.out.find("repaired: label rewritten"), std::string::npos) << repair.out;
  ExpectDataIntact();
}

TEST_F(CorruptionTest, TruncatedOrMissingLabels) {
  Cut(mount_->disks()[1] + "/tipfs-label", 0.5);
  ExpectMountRefused(mount_->disks()[1]);
  EXPECT_EQ(Fsck("--repair").exit_code, 1);
  ExpectDataIntact();
  // The label of the disk fsck is pointed at cannot be judged from that disk alone: an
  // operational error naming it; pointed at another disk, fsck rewrites it.
  fs_std::remove(mount_->disks()[0] + "/tipfs-label");
  ExpectMountRefused(mount_->disks()[0]);
  CommandResult from0 = Fsck("--repair", 0);
  EXPECT_EQ(from0.exit_code, 8) << from0.out << from0.err;
  EXPECT_NE(from0.err.find(mount_->disks()[0]), std::string::npos) << from0.err;
  EXPECT_EQ(Fsck("--repair", 3).exit_code, 1);
  ExpectDataIntact();
}

TEST_F(CorruptionTest, DamagedLogOfACleanlyClosedStoreIsRefused) {
  // After a clean unmount the log is whole: a flipped byte anywhere in it, or a cut, is damage
  // (silently dropping the records after it would lose files without a word).
  const std::string log = Newest(Meta(), ".log");
  ASSERT_FALSE(log.empty());
  FlipByte(log, fs_std::file_size(log) / 2);
  ExpectMountRefused("metadata store");
  ExpectFsckReports("store-damaged");
}

TEST_F(CorruptionTest, CutLogOfACleanlyClosedStoreIsRefused) {
  const std::string log = Newest(Meta(), ".log");
  ASSERT_FALSE(log.empty());
  Cut(log, 0.7);
  ExpectMountRefused("metadata store");
  ExpectFsckReports("store-damaged");
}

TEST_F(CorruptionTest, DamagedManifestOrCurrentIsRefused) {
  const std::vector<std::pair<std::string, std::function<void()>>> damages = {
      {"flipped MANIFEST", [&] { FlipByte(Newest(Meta(), "MANIFEST-"), -8); }},
      {"cut MANIFEST", [&] { Cut(Newest(Meta(), "MANIFEST-"), 0.1); }},
      {"garbage CURRENT", [&] { std::ofstream(Meta() + "/CURRENT") << "MANIFEST-999999\n"; }},
      {"no CURRENT", [&] { fs_std::remove(Meta() + "/CURRENT"); }},
  };
  const std::string saved = mount_->root() + "/meta-saved";
  fs_std::copy(Meta(), saved, fs_std::copy_options::recursive);
  for (const auto& [what, damage] : damages) {
    SCOPED_TRACE(what);
    damage();
    ExpectMountRefused("metadata store");
    ExpectFsckReports("store-damaged");
    fs_std::remove_all(Meta());
    fs_std::copy(saved, Meta(), fs_std::copy_options::recursive);
  }
  ExpectDataIntact();
}

TEST_F(CorruptionTest, DamagedTableFileIsReportedAndNeverServedAsData) {
  // One mount and unmount more, so the records sit in a table file rather than the log.
  ASSERT_EQ(mount_->Mount(), "");
  ASSERT_EQ(mount_->Unmount(), "");
  ASSERT_EQ(mount_->Mount(), "");
  ASSERT_EQ(mount_->Unmount(), "");
  std::string table;
  for (const auto& e : fs_std::directory_iterator(Meta())) {
    const std::string name = e.path().string();
    if (name.size() > 4 && name.substr(name.size() - 4) == ".sst" &&
        (table.empty() || fs_std::file_size(name) > fs_std::file_size(table))) {
      table = name;
    }
  }
  ASSERT_FALSE(table.empty());
  FlipByte(table, 200);  // inside the first data block
  CommandResult mount =
      Tipfs("mount " + ShellQuote(mount_->disks()[0]) + " " + ShellQuote(mount_->mountpoint()));
  EXPECT_LT(mount.exit_code, 128);
  if (mount.exit_code == 0) {
    // The damaged block is read on access: listing or opening fails, no wrong data comes back.
    int served = 0, failed = 0;
    for (int i = 0; i < kFiles; ++i) {
      const std::string path = Path("f" + std::to_string(i));
      struct stat st;
      if (stat(path.c_str(), &st) != 0) {
        ++failed;
        EXPECT_TRUE(errno == EUCLEAN || errno == EIO || errno == ENOENT) << ErrnoName(errno);
        continue;
      }
      ++served;
      EXPECT_EQ(HashFile(path), HashBytes(PatternBytes(70'000, i))) << path;
    }
    EXPECT_GT(failed, 0) << "the damaged block was never noticed";
    CommandResult umount = Tipfs("umount " + ShellQuote(mount_->mountpoint()));
    if (umount.exit_code != 0) LazyUnmount(mount_->mountpoint());
  } else {
    EXPECT_NE(mount.err.find("metadata store"), std::string::npos) << mount.err;
  }
  ExpectFsckReports("store-damaged");
}

}  // namespace
}  // namespace tipfs::testing
