// What df, du and the hole-aware copiers see on a real mount, against ext4 itself: the same
// sequence of sparse writes and truncates applied to a file on an ext4 file system and to a file
// on tipfs whose disks are directories of that ext4 must give the same st_blocks and the same
// data/hole map (SEEK_DATA / SEEK_HOLE); `cp --sparse=always` of a sparse file keeps it sparse;
// statfs of disks sharing one file system counts it once.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/fs_inspect.h"
#include "tests/support/loop_ext4.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

// A tipfs volume over directories of its own choosing, unmounted and removed on every path.
class VolumeOn {
 public:
  explicit VolumeOn(std::vector<std::string> disks, std::string mountpoint)
      : disks_(std::move(disks)), mountpoint_(std::move(mountpoint)) {}
  ~VolumeOn() {
    if (mounted_ && RunCommand(TipfsBinary() + " umount " + mountpoint_) != 0) {
      LazyUnmount(mountpoint_);
    }
  }
  std::string Start(const std::string& mount_args = "") {
    std::string command = TipfsBinary() + " mkfs";
    for (const std::string& disk : disks_) {
      std::filesystem::create_directories(disk);
      command += " " + disk;
    }
    std::filesystem::create_directories(mountpoint_);
    std::string output;
    if (RunCommand(command, &output) != 0) return "mkfs: " + output;
    if (RunCommand(TipfsBinary() + " mount " + mount_args + " " + disks_[0] + " " + mountpoint_,
                   &output) != 0) {
      return "mount: " + output;
    }
    mounted_ = true;
    return "";
  }
  std::string Stop() {
    std::string output;
    if (RunCommand(TipfsBinary() + " umount " + mountpoint_, &output) != 0) return output;
    mounted_ = false;
    return "";
  }

 private:
  std::vector<std::string> disks_;
  std::string mountpoint_;
  bool mounted_ = false;
};

// The data segments of a file as lseek reports them: [start, end) pairs.
std::vector<std::pair<off_t, off_t>> DataMap(int fd) {
  std::vector<std::pair<off_t, off_t>> map;
  off_t at = 0;
  while (true) {
    const off_t data = lseek(fd, at, SEEK_DATA);
    if (data < 0) break;  // ENXIO: no data after `at`
    const off_t hole = lseek(fd, data, SEEK_HOLE);
    if (hole < 0) break;
    map.emplace_back(data, hole);
    at = hole;
  }
  return map;
}

std::string Describe(const std::vector<std::pair<off_t, off_t>>& map) {
  std::string text;
  for (auto [start, end] : map)
    text += "[" + std::to_string(start) + "," + std::to_string(end) + ")";
  return text.empty() ? "(no data)" : text;
}

class SpaceMountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = FuseUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/tipfs-space-XXXXXX";
    root_ = mkdtemp(pattern.data());
  }
  void TearDown() override {
    volume_.reset();  // before the file systems under its disks go
    loops_.clear();
    if (!root_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(root_, ignored);
    }
  }
  // An ext4 of `size` mounted at root_/name; "" or why not (the test then skips).
  std::string Ext4(const std::string& name, const std::string& size) {
    loops_.push_back(std::make_unique<LoopExt4>());
    const std::string dir = root_ + "/" + name;
    std::filesystem::create_directories(dir);
    LoopExt4* loop = loops_.back().get();
    loop->before_unmount = [this] { volume_.reset(); };
    return loop->Mount(dir, size);
  }

  std::string root_;
  std::vector<std::unique_ptr<LoopExt4>> loops_;
  std::unique_ptr<VolumeOn> volume_;
};

TEST_F(SpaceMountTest, StBlocksAndTheHoleMapMatchExt4OnTheSameSequence) {
  const std::string skip = Ext4("ext4", "256M");
  if (!skip.empty()) GTEST_SKIP() << skip;
  const std::string ext4 = root_ + "/ext4";
  volume_ = std::make_unique<VolumeOn>(
      std::vector<std::string>{ext4 + "/d0", ext4 + "/d1", ext4 + "/d2", ext4 + "/d3"},
      root_ + "/mnt");
  ASSERT_EQ(volume_->Start(), "");

  const int ref = open((ext4 + "/reference").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  const int tip = open((root_ + "/mnt/sparse").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(ref, 0);
  ASSERT_GE(tip, 0);
  constexpr off_t kGiB = off_t{1} << 30;
  // Few extents on the ext4 side (at most four, which fit in its inode: no extent block).
  struct Step {
    const char* what;
    off_t offset;
    size_t length;  // 0: truncate to offset
  };
  const std::vector<Step> steps = {
      {"4 KiB at 0", 0, 4096},
      {"100 bytes across the first stripe unit boundary", 64 * 1024 - 50, 100},
      {"1 MiB at 3 MiB", 3 << 20, 1 << 20},
      {"truncate to 10 GiB", 10 * kGiB, 0},
      {"1 byte at 5 GiB + 7", 5 * kGiB + 7, 1},
      {"truncate to 2 MiB + 100", (2 << 20) + 100, 0},
      {"8 KiB at 2 MiB + 100", (2 << 20) + 100, 8192},
  };
  for (const Step& step : steps) {
    SCOPED_TRACE(step.what);
    for (int fd : {ref, tip}) {
      if (step.length == 0) {
        ASSERT_EQ(ftruncate(fd, step.offset), 0);
      } else {
        const std::string data(step.length, 'z');
        ASSERT_EQ(pwrite(fd, data.data(), data.size(), step.offset),
                  static_cast<ssize_t>(step.length));
      }
      ASSERT_EQ(fsync(fd), 0);
    }
    struct stat ref_st, tip_st;
    ASSERT_EQ(fstat(ref, &ref_st), 0);
    ASSERT_EQ(fstat(tip, &tip_st), 0);
    EXPECT_EQ(tip_st.st_size, ref_st.st_size);
    EXPECT_EQ(tip_st.st_blocks, ref_st.st_blocks);
    EXPECT_EQ(Describe(DataMap(tip)), Describe(DataMap(ref)));
  }
  // A sparse file copied with cp --sparse=always stays sparse on tipfs (64 MiB: cmp reads it all).
  ASSERT_EQ(ftruncate(tip, 64 << 20), 0);
  const std::string tail(5000, 'e');
  ASSERT_EQ(pwrite(tip, tail.data(), tail.size(), (64 << 20) - 5000), 5000);
  close(ref);
  close(tip);
  std::string output;
  ASSERT_EQ(
      RunCommand("cp --sparse=always " + root_ + "/mnt/sparse " + root_ + "/mnt/copy", &output), 0)
      << output;
  struct stat copy;
  ASSERT_EQ(stat((root_ + "/mnt/copy").c_str(), &copy), 0);
  EXPECT_EQ(copy.st_size, 64 << 20);
  EXPECT_LE(copy.st_blocks, 128) << "the copy of a sparse file is dense";
  ASSERT_EQ(RunCommand("cmp " + root_ + "/mnt/sparse " + root_ + "/mnt/copy", &output), 0)
      << output;
  ASSERT_EQ(volume_->Stop(), "");
}

TEST_F(SpaceMountTest, StatfsCountsAFileSystemSharedByDisksOnce) {
  for (const char* name : {"a", "b"}) {
    const std::string skip = Ext4(name, "96M");
    if (!skip.empty()) GTEST_SKIP() << skip;
  }
  // Three disks on a, one on b: the volume is a + b, not 3a + b.
  const std::string a = root_ + "/a", b = root_ + "/b";
  volume_ = std::make_unique<VolumeOn>(
      std::vector<std::string>{a + "/d0", a + "/d1", a + "/d2", b + "/d3"}, root_ + "/mnt");
  ASSERT_EQ(volume_->Start(), "");
  struct statvfs va, vb, vm;
  ASSERT_EQ(statvfs(a.c_str(), &va), 0);
  ASSERT_EQ(statvfs(b.c_str(), &vb), 0);
  ASSERT_EQ(statvfs((root_ + "/mnt").c_str(), &vm), 0);
  auto bytes = [](const struct statvfs& v, fsblkcnt_t n) { return uint64_t(n) * v.f_frsize; };
  EXPECT_EQ(bytes(vm, vm.f_blocks), bytes(va, va.f_blocks) + bytes(vb, vb.f_blocks));
  // Free space moves only by what the daemon's own metadata writes between the calls.
  const int64_t avail = int64_t(bytes(va, va.f_bavail) + bytes(vb, vb.f_bavail));
  EXPECT_NEAR(double(bytes(vm, vm.f_bavail)), double(avail), 4 << 20);
  const int64_t free_all = int64_t(bytes(va, va.f_bfree) + bytes(vb, vb.f_bfree));
  EXPECT_NEAR(double(bytes(vm, vm.f_bfree)), double(free_all), 4 << 20);
  // df says the same: size of the mount = size of a + size of b (1K blocks).
  std::string df;
  ASSERT_EQ(
      RunCommand("df -k --output=size " + root_ + "/mnt " + a + " " + b + " | tail -n 3", &df), 0);
  std::vector<uint64_t> sizes;
  size_t pos = 0;
  while (pos < df.size()) {
    size_t end = df.find('\n', pos);
    sizes.push_back(std::stoull(df.substr(pos, end - pos)));
    pos = end == std::string::npos ? df.size() : end + 1;
  }
  ASSERT_EQ(sizes.size(), 3u) << df;
  EXPECT_EQ(sizes[0], sizes[1] + sizes[2]) << df;
  ASSERT_EQ(volume_->Stop(), "");
}

}  // namespace
}  // namespace tipfs::testing
