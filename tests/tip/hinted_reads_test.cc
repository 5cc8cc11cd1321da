// Informed prefetching on a real mount over 4 emulated disks, in both data cache modes:
//  - 200 small files hinted by path in read order (TIPFS_IOC_HINT_PATHS through tipfs::Hinter)
//    are prefetched, and then read entirely from prefetched blocks with every byte correct;
//  - with --hints=ignore the hints are accepted and counted, nothing is prefetched, and the same
//    bytes come back;
//  - `tipfs hint FILES...` (warm-up from the shell) leaves nothing for the reads to fetch: the
//    emulated disks see no request while the files are read afterwards.
// The disk model is `hdd` slowed down 3x (about 40 ms a random request), so that the TIP horizon
// of a hinter that has not read yet (T_disk / (T_hit + T_driver)) spans the whole file set on a
// busy machine too; the checks are on counters and bytes, never on times.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"
#include "tests/tip/tip_support.h"
#include "tipfs/hint.hpp"

namespace tipfs::testing::tip {
namespace {

constexpr uint64_t kBlock = 64 * 1024;
constexpr int kFiles = 200;
const char kDiskModel[] = "hdd,slowdown=3";

std::string MountArgs(const std::string& data_cache, const std::string& extra = "") {
  return "--cache-size 32M --disk-model " + std::string(kDiskModel) + " " +
         DataCacheArgs(data_cache) + " " + extra;
}

// Discloses every file of the set, whole, in order, through the C++ wrapper of the path hints.
int HintFileSet(const std::string& mountpoint, const std::vector<TestFile>& files) {
  const int root = open(mountpoint.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return errno;
  int err = 0;
  {
    tipfs::Hinter hinter(root);
    for (const TestFile& f : files) {
      if ((err = hinter.Path(f.name)) != 0) break;
    }
    if (err == 0) err = hinter.Flush();
  }
  close(root);
  return err;
}

class HintedReadsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string reason = FuseUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
    SKIP_WITHOUT_FUSE_RING(MountArgs(GetParam()));
    files_ = SmallFileSet(kFiles, 7);
    ASSERT_EQ(volume_.Create(files_), "");
  }

  std::vector<TestFile> files_;
  TipVolume volume_;
};

TEST_P(HintedReadsTest, HintedSmallFilesAreReadFromPrefetchedBlocks) {
  ASSERT_EQ(volume_.Remount(MountArgs(GetParam())), "");
  const std::string mnt = volume_.mountpoint();
  const uint64_t blocks = BlocksOf(files_, kBlock);
  const StatsSnapshot before = ReadStats(mnt);
  ASSERT_EQ(before.Count("disk.read.ops"), 0u);

  ASSERT_EQ(HintFileSet(mnt, files_), 0);
  const StatsSnapshot hinted = WaitForQuietDisks(mnt);
  EXPECT_EQ(hinted.Count("hints.refused"), 0u);
  EXPECT_EQ(hinted.Count("hints.manual.bytes"), [&] {
    uint64_t bytes = 0;
    for (const TestFile& f : files_) bytes += f.bytes.size();
    return bytes;
  }());
  // The manager prefetched the whole set: nothing in it is beyond the horizon or the cache.
  EXPECT_EQ(hinted.Count("hints.prefetched"), blocks) << hinted.raw;
  EXPECT_EQ(hinted.Count("disk.read.ops"), blocks) << hinted.raw;

  EXPECT_EQ(ReadAndVerify(mnt, files_), kFiles);

  const StatsSnapshot after = ReadStats(mnt);
  // Every block read was a prefetched one, consumed in order by the hinting process, and no read
  // reached a disk: the only disk reads are the prefetches.
  EXPECT_EQ(after.Count("hints.used"), blocks) << after.raw;
  EXPECT_EQ(after.Count("hints.manual.consumed"), blocks) << after.raw;
  EXPECT_EQ(after.Count("hints.prefetched"), blocks) << after.raw;
  EXPECT_EQ(after.Count("disk.read.ops"), blocks) << after.raw;
  EXPECT_LE(after.Count("demand.misses"), blocks / 50) << after.raw;
  EXPECT_GE(after.Count("demand.hits"), blocks - blocks / 50) << after.raw;
  EXPECT_EQ(after.Count("hints.evicted_unused"), 0u) << after.raw;
  EXPECT_EQ(after.Count("hints.outstanding.bytes"), 0u) << after.raw;
  // The manager's estimates are visible: T_disk measured on every disk, T_hit and T_driver.
  for (size_t d = 0; d < after.disks.size(); ++d) {
    EXPECT_GT(after.Get("hints.estimate.t_disk.disk" + std::to_string(d) + ".seconds"), 0.0);
  }
  EXPECT_GE(after.Get("hints.estimate.t_hit.seconds"), 0.0);
  EXPECT_GE(after.Get("hints.estimate.t_driver.seconds"), 0.0);
  // And what each T_disk rests on: every read the disks served was measured, alone on its disk
  // or behind another; none is in flight now; each disk gives the hinter a horizon.
  uint64_t measured = 0;
  for (size_t d = 0; d < after.disks.size(); ++d) {
    const std::string disk = "hints.estimate.disk" + std::to_string(d);
    EXPECT_GE(after.Count(disk + ".idle.samples"), 1u) << after.raw;
    measured += after.Count(disk + ".idle.samples") + after.Count(disk + ".queued.samples");
    EXPECT_EQ(after.Count(disk + ".in_flight"), 0u) << after.raw;
    EXPECT_GT(after.Get(disk + ".horizon"), 0.0) << after.raw;
  }
  EXPECT_EQ(measured, after.Count("disk.read.ops")) << after.raw;
}

TEST_P(HintedReadsTest, IgnoredHintsAreCountedButPrefetchNothing) {
  ASSERT_EQ(volume_.Remount(MountArgs(GetParam(), "--hints ignore")), "");
  const std::string mnt = volume_.mountpoint();
  ASSERT_EQ(HintFileSet(mnt, files_), 0);
  const StatsSnapshot hinted = WaitForQuietDisks(mnt);
  // Accepted, validated and counted ...
  EXPECT_GE(hinted.Count("hints.calls"), 1u);
  EXPECT_EQ(hinted.Count("hints.refused"), 0u);
  EXPECT_GT(hinted.Count("hints.manual.bytes"), 0u);
  // ... but acted on not at all.
  EXPECT_EQ(hinted.Count("disk.read.ops"), 0u) << hinted.raw;
  EXPECT_EQ(hinted.Count("hints.streams.active"), 0u) << hinted.raw;

  EXPECT_EQ(ReadAndVerify(mnt, files_), kFiles);
  const StatsSnapshot after = WaitForQuietDisks(mnt);
  EXPECT_EQ(after.Count("hints.prefetched"), 0u) << after.raw;
  EXPECT_EQ(after.Count("hints.used"), 0u) << after.raw;
  EXPECT_EQ(after.Count("hints.manual.consumed"), 0u) << after.raw;
  // Every block was read on demand (or by sequential read-ahead of the 2-block files).
  EXPECT_GE(after.Count("disk.read.ops"), BlocksOf(files_, kBlock)) << after.raw;
  EXPECT_GE(after.Count("demand.misses"), static_cast<uint64_t>(kFiles) / 2) << after.raw;
}

TEST_P(HintedReadsTest, AlwaysPrefetchingReadsHintedFilesFromPrefetchedBlocksToo) {
  const std::string refused = volume_.Remount(MountArgs(GetParam(), "--hints sometimes"));
  EXPECT_NE(refused.find("--hints"), std::string::npos) << refused;
  ASSERT_EQ(volume_.Remount(MountArgs(GetParam(), "--hints always")), "");
  const std::string mnt = volume_.mountpoint();
  const uint64_t blocks = BlocksOf(files_, kBlock);
  ASSERT_EQ(HintFileSet(mnt, files_), 0);
  const StatsSnapshot hinted = WaitForQuietDisks(mnt);
  EXPECT_EQ(hinted.Count("hints.prefetched"), blocks) << hinted.raw;
  EXPECT_EQ(ReadAndVerify(mnt, files_), kFiles);
  const StatsSnapshot after = ReadStats(mnt);
  EXPECT_EQ(after.Count("hints.used"), blocks) << after.raw;
  EXPECT_EQ(after.Count("disk.read.ops"), blocks) << after.raw;
  EXPECT_EQ(after.Count("hints.ejected"), 0u) << after.raw;
}

// After a warm-up of `warm` has been prefetched, reading those files causes no disk request.
void ExpectWarmedUp(const std::string& mnt, const std::vector<TestFile>& warm,
                    const TestFile& cold) {
  const StatsSnapshot warmed = WaitForQuietDisks(mnt);
  EXPECT_EQ(warmed.Count("hints.streams.active"), 0u) << warmed.raw;  // warm-up done
  EXPECT_EQ(warmed.Count("disk.read.ops"), BlocksOf(warm, kBlock)) << warmed.raw;
  EXPECT_GT(warmed.Count("hints.warmup.bytes"), 0u) << warmed.raw;
  const std::vector<uint64_t> disk_reads = warmed.DiskValues("reads_total");

  EXPECT_EQ(ReadAndVerify(mnt, warm), static_cast<int>(warm.size()));
  const StatsSnapshot after = WaitForQuietDisks(mnt);
  EXPECT_EQ(after.DiskValues("reads_total"), disk_reads) << after.raw;
  EXPECT_EQ(after.Count("demand.misses"), 0u) << after.raw;
  EXPECT_GT(after.Count("demand.hits"), 0u) << after.raw;

  // A file that was not warmed up does reach the disks (the counters above can move).
  EXPECT_EQ(ReadAndVerify(mnt, {cold}), 1);
  EXPECT_GT(ReadStats(mnt).DiskSum("reads_total"), warmed.DiskSum("reads_total"));
}

TEST_P(HintedReadsTest, WarmupFromTheShellLeavesNothingForTheReadsToFetch) {
  ASSERT_EQ(volume_.Remount(MountArgs(GetParam())), "");
  const std::string mnt = volume_.mountpoint();
  // Forty files of the set, four of them two blocks long.
  const std::vector<TestFile> warm(files_.begin(), files_.begin() + 40);
  std::string command = TipfsBinary() + " hint";
  for (const TestFile& f : warm) command += " " + ShellQuote(mnt + "/" + f.name);
  std::string output;
  ASSERT_EQ(RunCommand(command, &output), 0) << output;
  EXPECT_NE(output.find("hinted 40 files"), std::string::npos) << output;
  ExpectWarmedUp(mnt, warm, files_[100]);
}

// The same warm-up disclosed through the ioctl by a program (source warmup): what `tipfs hint`
// sends, so the cache side is covered on its own.
TEST_P(HintedReadsTest, WarmupHintsByIoctlLeaveNothingForTheReadsToFetch) {
  ASSERT_EQ(volume_.Remount(MountArgs(GetParam())), "");
  const std::string mnt = volume_.mountpoint();
  const std::vector<TestFile> warm(files_.begin() + 40, files_.begin() + 80);
  const int root = open(mnt.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(root, 0);
  {
    tipfs::Hinter hinter(root, TIPFS_STREAM_SELF, TIPFS_SOURCE_WARMUP);
    for (const TestFile& f : warm) ASSERT_EQ(hinter.Path(f.name), 0);
    ASSERT_EQ(hinter.Flush(), 0);
  }
  close(root);
  ExpectWarmedUp(mnt, warm, files_[100]);
}

INSTANTIATE_TEST_SUITE_P(DataCacheModes, HintedReadsTest, ::testing::ValuesIn(AllDataCacheModes()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tipfs::testing::tip
