// Disk health tracking (stripe/disk_health.h): the states a disk's request results lead to, and
// the cache's reaction: no prefetch goes to a disk whose reads fail, demand reads still do (and
// get the error), and prefetching resumes once the disk works again.
#include "stripe/disk_health.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cache/file_cache.h"
#include "stripe/faulty_disk.h"
#include "stripe/striped_io.h"
#include "stripe/volume.h"
#include "tests/support/mem_disk.h"
#include "util/clock.h"

namespace tipfs::testing {
namespace {

using stripe::DiskHealth;
using stripe::DiskHealthBoard;
using stripe::DiskState;

TEST(DiskHealthBoardTest, StatesFollowTheErrnoOfTheLastRequestOfEachKind) {
  DiskHealthBoard board;
  EXPECT_EQ(board.Get(1).state, DiskState::kHealthy);
  board.Record(1, /*write=*/true, false, Status::NoSpace("full"));
  EXPECT_EQ(board.Get(1).state, DiskState::kFull);
  board.Record(1, /*write=*/true, false, Status::FromErrno(EROFS, "ro"));
  EXPECT_EQ(board.Get(1).state, DiskState::kReadOnly);
  board.Record(1, /*write=*/false, false, Status::IOError("bad sector"));
  DiskHealth h = board.Get(1);
  EXPECT_EQ(h.state, DiskState::kFailed);
  EXPECT_TRUE(h.reads_failing);
  EXPECT_FALSE(h.writes_failing);
  EXPECT_EQ(h.errors, 3u);
  EXPECT_NE(h.last_error.find("bad sector"), std::string::npos);
  // A good write does not vouch for reads; a good read does.
  board.Record(1, /*write=*/true, false, Status::OK());
  EXPECT_EQ(board.Get(1).state, DiskState::kFailed);
  board.Record(1, /*write=*/false, false, Status::OK());
  EXPECT_EQ(board.Get(1).state, DiskState::kHealthy);
  EXPECT_EQ(board.Get(1).errors, 3u);  // the history stays
  // A disk whose directory vanished: disk-wide ENOENT fails reads and writes.
  board.Record(2, false, /*disk_wide=*/true, Status::NotFound("objects/ is gone"));
  EXPECT_TRUE(board.Get(2).reads_failing);
  EXPECT_TRUE(board.Get(2).writes_failing);
  EXPECT_EQ(board.disk_count(), 3u);
  EXPECT_EQ(board.Get(0).state, DiskState::kHealthy);
}

TEST(DiskHealthBoardTest, ACancelledRequestSaysNothingAboutTheDisk) {
  // ECANCELED is what the kernel answers for a request whose submitter went away, not something
  // the disk did: it neither fails the disk nor counts as one of its errors.
  DiskHealthBoard board;
  board.Record(0, /*write=*/true, false, Status::FromErrno(ECANCELED, "write: canceled"));
  board.Record(0, /*write=*/false, false, Status::FromErrno(ECANCELED, "read: canceled"));
  DiskHealth h = board.Get(0);
  EXPECT_EQ(h.state, DiskState::kHealthy);
  EXPECT_FALSE(h.reads_failing);
  EXPECT_FALSE(h.writes_failing);
  EXPECT_EQ(h.errors, 0u);
  EXPECT_EQ(h.last_error, "");
  // A failing disk stays failing: a cancelled read does not vouch for it either.
  board.Record(0, /*write=*/false, false, Status::IOError("bad sector"));
  board.Record(0, /*write=*/false, false, Status::FromErrno(ECANCELED, "read: canceled"));
  EXPECT_TRUE(board.Get(0).reads_failing);
  EXPECT_EQ(board.Get(0).errors, 1u);
}

TEST(DiskHealthBoardTest, ListenerHearsOnlyChangesOfReadFailure) {
  DiskHealthBoard board;
  std::vector<std::pair<uint32_t, bool>> heard;
  board.SetListener([&](uint32_t disk, bool failing) { heard.emplace_back(disk, failing); });
  board.Record(0, false, false, Status::IOError("x"));
  board.Record(0, false, false, Status::IOError("y"));
  board.Record(0, true, false, Status::IOError("write"));  // writes do not change reads
  board.Record(0, false, false, Status::OK());
  board.Record(0, false, false, Status::OK());
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0], std::make_pair(0u, true));
  EXPECT_EQ(heard[1], std::make_pair(0u, false));
  board.SetListener(nullptr);
  board.Record(0, false, false, Status::IOError("z"));
  EXPECT_EQ(heard.size(), 2u);
}

TEST(DiskHealthBoardTest, TrackingDiskReportsResultsButNotMissingObjects) {
  DiskHealthBoard board;
  auto faulty = std::make_unique<stripe::FaultyDisk>(std::make_unique<MemDisk>("m"));
  stripe::FaultyDisk* faults = faulty.get();
  stripe::HealthTrackingDisk disk(std::move(faulty), 0, &board);
  EXPECT_EQ(disk.Stat(5).error(), ENOENT);  // no such object: an answer, not a disk error
  EXPECT_EQ(board.Get(0).errors, 0u);
  faults->FailAlways(stripe::FaultyDisk::kWrites, ENOSPC);
  EXPECT_EQ(disk.Truncate(5, 100).error(), ENOSPC);
  EXPECT_EQ(board.Get(0).state, DiskState::kFull);
  faults->Heal();
  EXPECT_TRUE(disk.Truncate(5, 10).ok());  // cutting an object shorter proves no free space
  EXPECT_EQ(board.Get(0).state, DiskState::kFull);
  char byte = 'b';
  stripe::DiskRequest write;
  write.kind = stripe::DiskRequest::Kind::kWrite;
  write.object = 5;
  write.length = 1;
  write.buffer = &byte;
  write.done = [](Result<uint64_t> r) { EXPECT_TRUE(r.ok()); };
  disk.Submit(std::move(write));  // a write that lands does
  EXPECT_EQ(board.Get(0).state, DiskState::kHealthy);
  faults->Disappear(ENOENT);
  std::vector<stripe::ObjectId> ids;
  EXPECT_FALSE(disk.ListObjects(&ids).ok());
  EXPECT_EQ(board.Get(0).state, DiskState::kFailed);
  const std::string text = stripe::FormatDiskHealth(board, {"/d0"});
  EXPECT_NE(text.find("disk 0 (/d0): failed (reads and writes), 2 errors"), std::string::npos)
      << text;
}

// A FileCache over 4 disks, each MemDisk -> FaultyDisk -> HealthTrackingDisk, the board's
// listener wired to the cache as the daemon wires it.
class FailingDiskCacheTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kDisks = 4;
  static constexpr uint32_t kUnit = 64 * 1024;
  static constexpr uint64_t kIno = 7;
  static constexpr uint64_t kFileSize = 32 * kUnit;  // 8 units on each disk

  FailingDiskCacheTest() {
    stripe::Label label;
    label.volume_uuid = "health";
    label.count = kDisks;
    label.stripe_unit = kUnit;
    std::vector<std::unique_ptr<stripe::Disk>> disks;
    for (uint32_t i = 0; i < kDisks; ++i) {
      label.disk_names.push_back("/d" + std::to_string(i));
      auto faulty = std::make_unique<stripe::FaultyDisk>(std::make_unique<MemDisk>());
      faults_.push_back(faulty.get());
      disks.push_back(std::make_unique<stripe::HealthTrackingDisk>(std::move(faulty), i, &board_));
    }
    volume_ = std::make_unique<stripe::Volume>(label, std::move(disks));
    io_ = std::make_unique<stripe::StripedIo>(volume_.get());
    cache::CacheOptions options;
    options.capacity_bytes = 64 * kUnit;
    options.readahead = false;
    options.manager_thread = false;  // decisions inline: deterministic on the FakeClock
    cache_ = std::make_unique<cache::FileCache>(io_.get(), &clock_, options);
    board_.SetListener(
        [this](uint32_t d, bool failing) { cache_->SetDiskReadsFailing(d, failing); });
    std::string data(kFileSize, 'x');
    EXPECT_TRUE(io_->Write(kIno, 0, data.data(), data.size()).ok());
  }
  ~FailingDiskCacheTest() override { board_.SetListener(nullptr); }

  uint32_t DiskOfUnit(uint64_t unit) const { return volume_->layout().DiskOfUnit(kIno, unit); }
  Status ReadUnit(uint64_t unit) {
    std::string out(kUnit, '\0');
    cache::ReadContext context;
    context.stream = context.pid = 1;
    return cache_->Read(context, kIno, unit * kUnit, kUnit, kFileSize, out.data()).status();
  }
  Status HintWholeFile(uint64_t stream, cache::HintSource source = cache::HintSource::kManual) {
    cache::HintBatch batch;
    batch.source = source;
    batch.stream = stream;
    batch.owner = static_cast<uint32_t>(stream);
    batch.extents.push_back(cache::HintExtent{kIno, 0, kFileSize, kFileSize});
    return cache_->Hint(batch);
  }
  size_t CachedUnitsOn(uint32_t disk) const {
    size_t n = 0;
    for (uint64_t u = 0; u < kFileSize / kUnit; ++u) {
      n += DiskOfUnit(u) == disk && cache_->Contains(kIno, u);
    }
    return n;
  }

  DiskHealthBoard board_;
  FakeClock clock_;
  std::vector<stripe::FaultyDisk*> faults_;
  std::unique_ptr<stripe::Volume> volume_;
  std::unique_ptr<stripe::StripedIo> io_;
  std::unique_ptr<cache::FileCache> cache_;
};

TEST_F(FailingDiskCacheTest, NoPrefetchGoesToADiskWhoseReadsFailUntilItWorksAgain) {
  const uint32_t bad = DiskOfUnit(1);
  faults_[bad]->FailAlways(stripe::FaultyDisk::kReads, EIO);
  EXPECT_EQ(ReadUnit(1).error(), EIO);  // a demand read still goes there and gets the error
  EXPECT_TRUE(board_.reads_failing(bad));
  const uint64_t failed_before = faults_[bad]->injected();

  ASSERT_TRUE(HintWholeFile(100).ok());
  for (uint32_t d = 0; d < kDisks; ++d) {
    if (d == bad) {
      EXPECT_EQ(CachedUnitsOn(d), 0u);
    } else {
      EXPECT_GT(CachedUnitsOn(d), 0u) << "disk " << d << " got no prefetch";
    }
  }
  EXPECT_EQ(faults_[bad]->injected(), failed_before) << "a prefetch reached the failing disk";
  EXPECT_EQ(ReadUnit(5).error(), DiskOfUnit(5) == bad ? EIO : 0);

  // Healed: the next demand read there succeeds, and prefetching to it resumes.
  faults_[bad]->Heal();
  ASSERT_TRUE(ReadUnit(1).ok());
  EXPECT_FALSE(board_.reads_failing(bad));
  ASSERT_TRUE(cache_->Cancel(100).ok());
  // A warm-up (prefetch everything, in order) rather than TIP's horizon-bound choice: every
  // block of the file now comes in, the healed disk's too.
  ASSERT_TRUE(HintWholeFile(200, cache::HintSource::kWarmup).ok());
  EXPECT_EQ(CachedUnitsOn(bad), kFileSize / kUnit / kDisks);
}

}  // namespace
}  // namespace tipfs::testing
