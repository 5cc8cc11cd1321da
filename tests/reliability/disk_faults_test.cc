// Disks that fail under a running mount, made to fail for real (no fault injection inside tipfs;
// the ext4 cases use tests/support/loop_ext4):
//   - full: the disks are small tmpfs mounts; writes past their space get ENOSPC (never EIO),
//     `tipfs stats` shows the disk full, and once files are removed the volume takes writes again;
//   - read-only: one disk is ext4 on a loop device, forced into its emergency read-only state
//     (/sys/fs/ext4/<dev>/trigger_fs_error with errors=remount-ro, what a real disk error does);
//     writes that touch it get EROFS, reads keep working, the other disks keep taking writes;
//   - I/O errors: the loop device is cut short under ext4 (as in tests/fusefs/disk_errors_test),
//     reads of its objects get EIO; the disk shows as failed and no prefetch goes to it, while
//     hinted prefetches to the other disks go on;
//   - gone: a disk's objects/ tree is removed; writes to it get EIO and the disk shows as failed.
// Needs root (mounts) and, for the loop cases, losetup and mkfs.ext4; skips with the reason.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "tests/support/fs_inspect.h"
#include "tests/support/loop_ext4.h"
#include "tests/support/mount_fixture.h"
#include "tipfs/hint.h"

namespace tipfs::testing {
namespace {

constexpr uint64_t kUnit = 64 * 1024;

// A tmpfs of a given size mounted over a disk directory for the life of the object; unmounted
// (after `before_unmount`, which takes tipfs down) when it goes away.
class Tmpfs {
 public:
  std::function<void()> before_unmount;

  ~Tmpfs() {
    if (before_unmount) before_unmount();
    if (mounted_ && RunCommand("umount " + ShellQuote(dir_)) != 0) {
      RunCommand("umount -l " + ShellQuote(dir_));
    }
  }

  // "" when mounted, else why it cannot be done here.
  std::string Mount(const std::string& dir, const std::string& size) {
    if (geteuid() != 0) return "needs root to mount tmpfs";
    dir_ = dir;
    std::string output;
    if (RunCommand("mount -t tmpfs -o size=" + size + " tmpfs " + ShellQuote(dir), &output) != 0) {
      return "mount -t tmpfs failed: " + output;
    }
    mounted_ = true;
    return "";
  }

 private:
  std::string dir_;
  bool mounted_ = false;
};

// What ext4 does on a real error with errors=remount-ro: the file system turns read-only.
std::string ForceReadOnly(const LoopExt4& loop, const std::string& dir) {
  std::string output;
  if (RunCommand("mount -o remount,errors=remount-ro " + ShellQuote(dir), &output) != 0) {
    return "remount with errors=remount-ro failed: " + output;
  }
  const std::string knob =
      "/sys/fs/ext4/" + loop.device().substr(loop.device().rfind('/') + 1) + "/trigger_fs_error";
  if (access(knob.c_str(), W_OK) != 0) return "no " + knob + " on this kernel";
  if (RunCommand("echo 1 > " + knob, &output) != 0) return "writing " + knob + ": " + output;
  return "";
}

// Writes all of `data` at `offset` (creating the file; a short write goes on with the rest, as
// stdio would, and so reports the errno that stopped it), then fsyncs unless `sync` is false.
// The first errno, 0 on success.
int WriteAt(const std::string& path, uint64_t offset, const std::string& data, bool sync = true) {
  int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int err = 0;
  for (size_t done = 0; done < data.size() && err == 0;) {
    ssize_t n =
        pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      err = errno;
    } else {
      done += static_cast<size_t>(n);
    }
  }
  if (err == 0 && sync && fsync(fd) != 0) err = errno;
  if (close(fd) != 0 && err == 0) err = errno;
  return err;
}

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

// Drops the cached pages of every object on `disk`, so reads really reach its device.
void DropObjectPages(const std::string& disk) {
  for (const auto& [rel, size] : ObjectFiles(disk)) {
    int fd = open((disk + "/objects/" + rel).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
}

class DiskFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason = FuseUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
    if (geteuid() != 0) GTEST_SKIP() << "needs root to make backing file systems";
    VolumeSpec spec;
    spec.mount_args = "--disk-model none --cache-size 32M --readahead off --data-cache direct";
    volume_ = std::make_unique<TipfsMount>(spec);
  }
  void TearDown() override {
    if (volume_ && volume_->mounted()) (void)volume_->Unmount();
  }
  // For BackingFs::before_unmount: tipfs goes first.
  std::function<void()> UnmountTipfs() {
    return [this] {
      if (volume_->mounted()) (void)volume_->Unmount();
    };
  }
  void CreateAndMount() {
    ASSERT_EQ(volume_->Create(), "");
    ASSERT_EQ(volume_->Mount(), "");
  }

  std::string Path(const std::string& rel) const { return volume_->Path(rel); }
  const std::string& Disk(int i) const { return volume_->disks()[i]; }

  // The state `tipfs stats --json` gives disk `d` ("healthy", "full", "read-only", "failed").
  std::string StateOf(int d, uint64_t* errors = nullptr) {
    const std::string json = ReadFileOrDie(Path(".tipfs/stats.json"));
    const std::string key = "{\"disk\":" + std::to_string(d) + ",\"state\":\"";
    size_t at = json.find(key);
    if (at == std::string::npos) return "missing from stats.json";
    at += key.size();
    if (errors != nullptr) {
      size_t e = json.find("\"errors\":", at);
      *errors = e == std::string::npos ? 0 : std::stoull(json.substr(e + 9));
    }
    return json.substr(at, json.find('"', at) - at);
  }
  double StatsValue(const std::string& name) {
    const std::string json = ReadFileOrDie(Path(".tipfs/stats.json"));
    size_t at = json.find("\"" + name + "\":");
    return at == std::string::npos ? -1 : std::stod(json.substr(at + name.size() + 3));
  }
  std::string StatsText() {
    CommandResult r = RunSplit(TipfsBinary() + " stats " + ShellQuote(volume_->mountpoint()));
    return r.out + r.err;
  }
  // The disk a new one-unit file's object landed on.
  int DiskOfSmallFile(const std::string& rel) {
    struct stat st;
    if (stat(Path(rel).c_str(), &st) != 0) return -1;
    for (int d = 0; d < 4; ++d) {
      if (std::filesystem::exists(ObjectPath(Disk(d), st.st_ino))) return d;
    }
    return -1;
  }
  // Writes small files until `want` of them landed on disks other than `avoid`; checks they
  // read back. The rest of the volume is still usable.
  void ExpectOtherDisksTakeWrites(int avoid, const std::string& prefix, int want = 3) {
    int landed = 0;
    for (int i = 0; i < 32 && landed < want; ++i) {
      const std::string rel = prefix + std::to_string(i);
      const std::string data = PatternBytes(3000, 700 + i);
      int err = WriteAt(Path(rel), 0, data);
      const int disk = DiskOfSmallFile(rel);
      if (disk == avoid || disk < 0) continue;
      EXPECT_EQ(ErrnoName(err), "OK") << rel << " on healthy disk " << disk;
      EXPECT_EQ(ReadFileOrDie(Path(rel)), data);
      ++landed;
    }
    EXPECT_EQ(landed, want);
  }

  std::unique_ptr<TipfsMount> volume_;
};

TEST_F(DiskFaultsTest, FullVolumeGivesEnospcAndTakesWritesAgainOnceSpaceIsFreed) {
  std::vector<std::unique_ptr<Tmpfs>> backing;
  for (int d = 0; d < 4; ++d) {
    backing.push_back(std::make_unique<Tmpfs>());
    // Disk 0 also holds the metadata store (whose log RocksDB preallocates).
    ASSERT_EQ(backing.back()->Mount(Disk(d), d == 0 ? "40m" : "12m"), "");
  }
  backing.front()->before_unmount = UnmountTipfs();
  CreateAndMount();

  std::vector<std::string> complete;
  int err = 0;
  for (int i = 0; i < 64 && err == 0; ++i) {
    const std::string rel = "fill" + std::to_string(i);
    err = WriteAt(Path(rel), 0, PatternBytes(2 << 20, 900 + i));
    if (err == 0) complete.push_back(rel);
  }
  ASSERT_EQ(ErrnoName(err), "ENOSPC") << "filling the volume must end with ENOSPC";
  ASSERT_GE(complete.size(), 3u);
  int full_disks = 0;
  for (int d = 0; d < 4; ++d) full_disks += StateOf(d) == "full";
  EXPECT_GE(full_disks, 1) << StatsText();
  EXPECT_NE(StatsText().find(": full"), std::string::npos);
  // What was written before is intact, and metadata still works.
  for (size_t i = 0; i < complete.size(); ++i) {
    EXPECT_EQ(HashFile(Path(complete[i])), HashBytes(PatternBytes(2 << 20, 900 + i)))
        << complete[i];
  }
  EXPECT_EQ(mkdir(Path("dir-while-full").c_str(), 0755), 0) << ErrnoName(errno);
  EXPECT_EQ(rename(Path(complete[0]).c_str(), Path("renamed-while-full").c_str()), 0);
  struct statvfs vfs;
  EXPECT_EQ(statvfs(volume_->mountpoint().c_str(), &vfs), 0) << ErrnoName(errno);

  // Free space, then the volume takes a file as large as before, and every disk is healthy.
  EXPECT_EQ(unlink(Path("renamed-while-full").c_str()), 0);
  for (size_t i = 1; i < complete.size(); i += 2) EXPECT_EQ(unlink(Path(complete[i]).c_str()), 0);
  for (int i = 0; i < 64; ++i) (void)unlink(Path("fill" + std::to_string(i)).c_str());
  const std::string again = PatternBytes(2 << 20, 999);
  EXPECT_EQ(ErrnoName(WriteAt(Path("after-free"), 0, again)), "OK");
  EXPECT_EQ(HashFile(Path("after-free")), HashBytes(again));
  for (int d = 0; d < 4; ++d) EXPECT_EQ(StateOf(d), "healthy") << "disk " << d;

  ASSERT_EQ(volume_->Unmount(), "");
  CommandResult fsck = RunSplit(TipfsBinary() + " fsck " + ShellQuote(Disk(0)));
  EXPECT_EQ(fsck.exit_code, 0) << fsck.out << fsck.err;
}

TEST_F(DiskFaultsTest, ReadOnlyDiskGivesErofsWhileReadsAndOtherDisksWork) {
  LoopExt4 ext4;
  ext4.before_unmount = UnmountTipfs();
  const std::string skip = ext4.Mount(Disk(2), "64M");
  if (!skip.empty()) GTEST_SKIP() << skip;
  CreateAndMount();
  const std::string spread = PatternBytes(4 * kUnit, 51);  // one unit on each disk
  ASSERT_EQ(WriteAt(Path("spread"), 0, spread), 0);
  struct stat st;
  ASSERT_EQ(stat(Path("spread").c_str(), &st), 0);
  int unit_on_2 = -1;
  for (int k = 0; k < 4; ++k) {
    std::string head;
    const std::string object = ObjectPath(Disk(2), st.st_ino);
    if (ReadAt(object, 0, kUnit, &head) == 0 && head == spread.substr(k * kUnit, kUnit)) {
      unit_on_2 = k;
    }
  }
  ASSERT_GE(unit_on_2, 0);

  const std::string why = ForceReadOnly(ext4, Disk(2));
  if (!why.empty()) GTEST_SKIP() << why;
  EXPECT_EQ(ErrnoName(WriteAt(Path("spread"), unit_on_2 * kUnit + 10, "x")), "EROFS");
  EXPECT_EQ(StateOf(2), "read-only") << StatsText();
  EXPECT_NE(StatsText().find("(" + Disk(2) + "): read-only"), std::string::npos) << StatsText();
  // Every unit still reads back, the read-only disk's too, and the failed write changed nothing.
  std::string data;
  EXPECT_EQ(ReadAt(Path("spread"), 0, spread.size(), &data), 0);
  EXPECT_TRUE(data == spread);
  // A unit on another disk takes a write. (Its fsync reports EROFS: the file has an object on
  // the read-only disk, and a sync goes to every disk of the file.)
  const uint64_t healthy = ((unit_on_2 + 1) % 4) * kUnit + 10;
  EXPECT_EQ(ErrnoName(WriteAt(Path("spread"), healthy, "y", /*sync=*/false)), "OK");
  EXPECT_EQ(ReadAt(Path("spread"), healthy, 1, &data), 0);
  EXPECT_EQ(data, "y");
  // A truncation that cannot cut the read-only disk's object fails. (It may have cut the others:
  // the range it was to remove can then read as zeros; tipfs has no journal to undo that.)
  EXPECT_EQ(truncate(Path("spread").c_str(), 0), -1);
  EXPECT_EQ(ErrnoName(errno), "EROFS");
  struct stat after;
  ASSERT_EQ(stat(Path("spread").c_str(), &after), 0);
  EXPECT_EQ(static_cast<uint64_t>(after.st_size), spread.size());
  ExpectOtherDisksTakeWrites(2, "small");
  for (int d : {0, 1, 3}) EXPECT_EQ(StateOf(d), "healthy") << "disk " << d;
}

TEST_F(DiskFaultsTest, FailedDiskShowsInStatsAndGetsNoPrefetchesWhileTheOthersServe) {
  LoopExt4 ext4;
  ext4.before_unmount = UnmountTipfs();
  const std::string skip = ext4.Mount(Disk(3), "64M");
  if (!skip.empty()) GTEST_SKIP() << skip;
  CreateAndMount();
  const std::string big = PatternBytes(4 << 20, 61);  // 64 units: 16 on each disk
  ASSERT_EQ(WriteAt(Path("big"), 0, big), 0);
  struct stat st;
  ASSERT_EQ(stat(Path("big").c_str(), &st), 0);
  int first_on_3 = -1;
  for (int k = 0; k < 4; ++k) {
    std::string head;
    if (ReadAt(ObjectPath(Disk(3), st.st_ino), 0, kUnit, &head) == 0 &&
        head == big.substr(k * kUnit, kUnit)) {
      first_on_3 = k;
    }
  }
  ASSERT_GE(first_on_3, 0);

  sync();
  DropObjectPages(Disk(3));
  ASSERT_EQ(ext4.Shrink("1M"), "");
  std::string probe;
  if (ReadAt(ObjectPath(Disk(3), st.st_ino), 0, 4096, &probe) != EIO) {
    GTEST_SKIP() << "the shrunk loop device did not fail a read of an object here";
  }
  std::string data;
  EXPECT_EQ(ErrnoName(ReadAt(Path("big"), first_on_3 * kUnit, kUnit, &data)), "EIO");
  uint64_t errors_before = 0;
  EXPECT_EQ(StateOf(3, &errors_before), "failed");
  EXPECT_GE(errors_before, 1u);
  const std::string text = StatsText();
  EXPECT_NE(text.find("(" + Disk(3) + "): failed (reads)"), std::string::npos) << text;

  // Hint the whole file: the other disks get prefetches, the failed one none.
  const double prefetched_before = StatsValue("hints.prefetched");
  int fd = open(Path("big").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(tipfs_hint_range(fd, 0, 0), 0) << ErrnoName(errno);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (StatsValue("hints.prefetched") <= prefetched_before &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(StatsValue("hints.prefetched"), prefetched_before);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let any stray prefetch land
  uint64_t errors_after = 0;
  EXPECT_EQ(StateOf(3, &errors_after), "failed");
  EXPECT_EQ(errors_after, errors_before) << "a prefetch was sent to the failed disk";
  close(fd);
  // Units on the other disks read back right.
  for (int k = 0; k < 8; ++k) {
    if (k % 4 == first_on_3) continue;
    EXPECT_EQ(ReadAt(Path("big"), k * kUnit, kUnit, &data), 0) << "unit " << k;
    EXPECT_TRUE(data == big.substr(k * kUnit, kUnit)) << "unit " << k;
  }
  ExpectOtherDisksTakeWrites(3, "small");
}

TEST_F(DiskFaultsTest, DiskThatDisappearsGivesEioAndShowsAsFailed) {
  CreateAndMount();
  const std::string before = PatternBytes(8 * kUnit, 72);  // two units on each disk
  ASSERT_EQ(WriteAt(Path("existing"), 0, before), 0);
  // A fresh daemon: no descriptor of the objects is open (an open one would still serve them).
  ASSERT_EQ(volume_->Unmount(), "");
  ASSERT_EQ(volume_->Mount(), "");
  std::error_code ec;
  std::filesystem::remove_all(Disk(1) + "/objects", ec);
  ASSERT_FALSE(ec) << ec.message();
  // A file with units there reads as an I/O error, never as zeros where its data was (writes
  // do not fill the daemon's cache, so the read goes to the disks), and new files fail too.
  int failed_units = 0;
  for (int k = 0; k < 8; ++k) {
    std::string got;
    const int err = ReadAt(Path("existing"), k * kUnit, kUnit, &got);
    if (err != 0) {
      EXPECT_EQ(ErrnoName(err), "EIO") << "unit " << k;
      ++failed_units;
    } else {
      EXPECT_TRUE(got == before.substr(k * kUnit, kUnit)) << "unit " << k << " read wrong bytes";
    }
  }
  EXPECT_EQ(failed_units, 2) << "the two units on the disk that went away";
  const std::string data = PatternBytes(4 * kUnit, 71);
  EXPECT_EQ(ErrnoName(WriteAt(Path("spread"), 0, data)), "EIO");
  EXPECT_EQ(StateOf(1), "failed") << StatsText();
  for (int d : {0, 2, 3}) EXPECT_EQ(StateOf(d), "healthy") << "disk " << d;
  ExpectOtherDisksTakeWrites(1, "small");
}

}  // namespace
}  // namespace tipfs::testing
