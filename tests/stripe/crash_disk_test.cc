// CrashDisk: unsynced writes are held, reads see them, a sync makes them durable, and Crash()
// drops, keeps, prefixes or tears what was not synced, deterministically from a seed.
#include "stripe/crash_disk.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "stripe/posix_disk.h"
#include "stripe/striped_io.h"
#include "tests/stripe/disk_requests.h"
#include "tests/stripe/file_snapshot.h"
#include "tests/support/mem_disk.h"

namespace tipfs::stripe {
namespace {

using testing::MemDisk;
using Mode = CrashDisk::CrashMode;

class CrashDiskTest : public ::testing::Test {
 protected:
  void SetUp() override { Reset(); }
  void Reset() {
    auto mem = std::make_unique<MemDisk>("disk 0");
    mem_ = mem.get();
    disk_ = std::make_unique<CrashDisk>(std::move(mem));
  }
  Result<uint64_t> Io(DiskRequest::Kind kind, ObjectId o, uint64_t off, uint64_t len, char* buf) {
    return testing::SubmitAndWait(disk_.get(), kind, o, off, len, buf);
  }
  void Write(ObjectId o, uint64_t off, const std::string& data) {
    ASSERT_EQ(*Io(DiskRequest::Kind::kWrite, o, off, data.size(), const_cast<char*>(data.data())),
              data.size());
  }
  std::string Read(ObjectId o, uint64_t off, uint64_t len) {
    std::string buf(len, '\x77');
    Result<uint64_t> r = Io(DiskRequest::Kind::kRead, o, off, len, buf.data());
    EXPECT_TRUE(r.ok());
    buf.resize(r.ok() ? *r : 0);
    return buf;
  }
  void Sync(ObjectId o) { ASSERT_TRUE(Io(DiskRequest::Kind::kSync, o, 0, 0, nullptr).ok()); }

  MemDisk* mem_ = nullptr;
  std::unique_ptr<CrashDisk> disk_;
};

TEST_F(CrashDiskTest, ReadsSeeHeldWritesAndSyncMakesThemDurable) {
  Write(1, 0, "hello world");
  Write(1, 6, "WORLD!");
  EXPECT_EQ(mem_->Contents(1), "");  // nothing reached the inner disk
  EXPECT_EQ(Read(1, 0, 100), "hello WORLD!");
  EXPECT_EQ(Read(1, 20, 10), "");
  EXPECT_EQ(disk_->Stat(1)->size, 12u);
  EXPECT_EQ(disk_->held_ops(), 2u);
  EXPECT_EQ(disk_->held_bytes(), 17u);
  std::vector<ObjectId> objects;
  ASSERT_TRUE(disk_->ListObjects(&objects).ok());
  EXPECT_EQ(objects, std::vector<ObjectId>{1});
  Sync(1);
  EXPECT_EQ(mem_->Contents(1), "hello WORLD!");
  EXPECT_EQ(disk_->held_ops(), 0u);
  ASSERT_TRUE(disk_->Crash({Mode::kDropAll, 1, 512}).ok());
  EXPECT_EQ(Read(1, 0, 100), "hello WORLD!");  // synced data survives a crash
}

TEST_F(CrashDiskTest, HeldTruncateAndHoles) {
  Write(2, 0, std::string(100, 'a'));
  Sync(2);
  ASSERT_TRUE(disk_->Truncate(2, 10).ok());
  EXPECT_EQ(Read(2, 0, 100), std::string(10, 'a'));
  Write(2, 50, "zz");  // extends past the truncation: bytes 10..49 are zeros, not old 'a's
  EXPECT_EQ(Read(2, 0, 100), std::string(10, 'a') + std::string(40, '\0') + "zz");
  EXPECT_EQ(Read(2, 40, 5), std::string(5, '\0'));
  EXPECT_EQ(disk_->Stat(2)->size, 52u);
  EXPECT_EQ(mem_->Contents(2), std::string(100, 'a'));
  ASSERT_TRUE(disk_->Crash({Mode::kDropAll, 1, 512}).ok());
  EXPECT_EQ(Read(2, 0, 200), std::string(100, 'a'));
  // A truncate(0) of a missing object creates nothing.
  ASSERT_TRUE(disk_->Truncate(3, 0).ok());
  EXPECT_EQ(disk_->Stat(3).error(), ENOENT);
}

TEST_F(CrashDiskTest, DropAllAndKeepAll) {
  Write(4, 0, "synced");
  Sync(4);
  Write(4, 0, "SYN");
  Write(5, 0, "never synced");
  ASSERT_TRUE(disk_->Crash({Mode::kDropAll, 1, 512}).ok());
  EXPECT_EQ(Read(4, 0, 100), "synced");
  EXPECT_EQ(disk_->Stat(5).error(), ENOENT);
  EXPECT_EQ(disk_->held_ops(), 0u);
  Write(4, 0, "SYN");
  Write(5, 0, "kept");
  ASSERT_TRUE(disk_->Crash({Mode::kKeepAll, 1, 512}).ok());
  EXPECT_EQ(mem_->Contents(4), "SYNced");
  EXPECT_EQ(mem_->Contents(5), "kept");
}

// The expected object after applying the first k of these writes to "base".
std::string AfterPrefix(const std::vector<std::pair<uint64_t, std::string>>& writes, size_t k) {
  std::string s = "base";
  for (size_t i = 0; i < k; ++i) {
    const auto& [off, data] = writes[i];
    if (s.size() < off + data.size()) s.resize(off + data.size(), '\0');
    s.replace(off, data.size(), data);
  }
  return s;
}

TEST_F(CrashDiskTest, RandomPrefixIsAPrefixAndDeterministic) {
  const std::vector<std::pair<uint64_t, std::string>> writes = {
      {0, "AAAA"}, {2, "BBBBBB"}, {10, "CC"}, {1, "D"}, {20, "EEE"}};
  std::set<size_t> prefixes_seen;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::string results[2];
    for (int run = 0; run < 2; ++run) {
      Reset();
      Write(6, 0, "base");
      Sync(6);
      for (const auto& [off, data] : writes) Write(6, off, data);
      ASSERT_TRUE(disk_->Crash({Mode::kRandomPrefix, seed, 512}).ok());
      results[run] = mem_->Contents(6);
    }
    EXPECT_EQ(results[0], results[1]) << "same seed, same crash";
    bool matched = false;
    for (size_t k = 0; k <= writes.size(); ++k) {
      if (results[0] == AfterPrefix(writes, k)) {
        matched = true;
        prefixes_seen.insert(k);
        break;
      }
    }
    EXPECT_TRUE(matched) << "seed " << seed << " left a state no prefix explains";
  }
  EXPECT_GE(prefixes_seen.size(), 3u) << "the seed should pick different prefixes";
}

TEST_F(CrashDiskTest, TearKeepsOrLosesWholeSectors) {
  const uint32_t kSector = 512;
  std::set<std::string> outcomes;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    std::string results[2];
    for (int run = 0; run < 2; ++run) {
      Reset();
      Write(7, 0, std::string(16 * kSector, 'o'));
      Sync(7);
      // An unaligned write: its first and last sectors are partial.
      Write(7, 100, std::string(8 * kSector, 'n'));
      ASSERT_TRUE(disk_->Crash({Mode::kTear, seed, kSector}).ok());
      results[run] = mem_->Contents(7);
    }
    EXPECT_EQ(results[0], results[1]);
    const std::string& s = results[0];
    ASSERT_EQ(s.size(), 16u * kSector);
    // Within each sector the new bytes are all there or none of them is.
    for (uint64_t sec = 0; sec < 16; ++sec) {
      const uint64_t from = std::max<uint64_t>(sec * kSector, 100);
      const uint64_t to = std::min<uint64_t>((sec + 1) * kSector, 100 + 8 * kSector);
      if (from >= to) {
        EXPECT_EQ(s.substr(sec * kSector, kSector), std::string(kSector, 'o'));
        continue;
      }
      const std::string part = s.substr(from, to - from);
      EXPECT_TRUE(part == std::string(to - from, 'o') || part == std::string(to - from, 'n'))
          << "sector " << sec << " torn inside";
    }
    outcomes.insert(s);
  }
  EXPECT_GE(outcomes.size(), 4u) << "different seeds should tear differently";
}

TEST_F(CrashDiskTest, RepeatedSyncsApplyInOrder) {
  // Sync while another sync of the same object is pending must not reorder writes.
  for (int i = 0; i < 50; ++i) {
    Write(8, 0, std::to_string(i) + "-");
    if (i % 3 == 0) Sync(8);
  }
  Sync(8);
  EXPECT_EQ(mem_->Contents(8).substr(0, 3), "49-");
  ASSERT_TRUE(disk_->SyncAll().ok());
}

TEST_F(CrashDiskTest, RemoveDiscardsHeldWrites) {
  Write(9, 0, "gone");
  ASSERT_TRUE(disk_->Remove(9).ok());
  EXPECT_EQ(disk_->Stat(9).error(), ENOENT);
  EXPECT_EQ(disk_->held_ops(), 0u);
  ASSERT_TRUE(disk_->Crash({Mode::kKeepAll, 1, 512}).ok());
  EXPECT_EQ(mem_->Contents(9), "");
}

// Over a real asynchronous disk, many syncs of one object are in flight at once: they must apply
// the held writes in order, so the last write wins on the inner disk.
TEST(CrashDiskAsyncTest, OverlappingSyncsInFlightKeepWriteOrder) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() + "/objects");
  auto ring = IoRing::Create(8);
  if (!ring.ok()) GTEST_SKIP() << "io_uring unavailable: " << ring.status().ToString();
  auto posix = PosixDisk::Open(dir.path(), 0, ring->get());
  ASSERT_TRUE(posix.ok());
  PosixDisk* inner = posix->get();
  {
    CrashDisk disk(std::move(*posix));
    std::vector<std::string> values;
    for (int i = 0; i < 200; ++i) {
      values.push_back(std::string(3000, static_cast<char>('a' + i % 26)));
    }
    testing::Completions completions;
    std::vector<Result<uint64_t>> writes(200, Status::IOError("pending"));
    std::vector<Result<uint64_t>> syncs(200, Status::IOError("pending"));
    for (int i = 0; i < 200; ++i) {
      // Overlapping ranges, each followed by a sync that is not waited for.
      testing::SubmitTo(&disk, DiskRequest::Kind::kWrite, 3, (i % 7) * 1000, values[i].size(),
                        values[i].data(), &completions, &writes[i]);
      testing::SubmitTo(&disk, DiskRequest::Kind::kSync, 3, 0, 0, nullptr, &completions, &syncs[i]);
    }
    completions.Wait();
    for (int i = 0; i < 200; ++i) {
      EXPECT_TRUE(writes[i].ok() && syncs[i].ok()) << i;
    }
    EXPECT_EQ(disk.held_ops(), 0u);
    // The model: replay the writes in order.
    std::string model;
    for (int i = 0; i < 200; ++i) {
      const size_t off = (i % 7) * 1000;
      if (model.size() < off + 3000) model.resize(off + 3000, '\0');
      model.replace(off, 3000, values[i]);
    }
    std::string back(model.size() + 10, '\0');
    // The inner disk itself, not the overlay.
    Result<uint64_t> got =
        testing::SubmitAndWait(inner, DiskRequest::Kind::kRead, 3, 0, back.size(), back.data());
    ASSERT_TRUE(got.ok());
    back.resize(*got);
    EXPECT_EQ(back, model);
  }
}

// Over a striped volume: a synced file survives a crash byte for byte, an unsynced one does not.
TEST(CrashDiskVolumeTest, SyncedFilesSurviveOnEveryDisk) {
  std::vector<MemDisk*> mems;
  std::vector<CrashDisk*> crash;
  std::vector<std::unique_ptr<Disk>> disks;
  for (int i = 0; i < 3; ++i) {
    auto mem = std::make_unique<MemDisk>("disk " + std::to_string(i));
    mems.push_back(mem.get());
    auto c = std::make_unique<CrashDisk>(std::move(mem));
    crash.push_back(c.get());
    disks.push_back(std::move(c));
  }
  Label label;
  label.count = 3;
  label.stripe_unit = 4096;
  Volume volume(label, std::move(disks));
  StripedIo io(&volume);
  const std::string a(50000, 'a');
  const std::string b(50000, 'b');
  ASSERT_TRUE(io.Write(1, 0, a.data(), a.size()).ok());
  ASSERT_TRUE(io.Sync(1).ok());
  ASSERT_TRUE(io.Write(2, 0, b.data(), b.size()).ok());
  std::string back(50000, '\0');
  ASSERT_TRUE(io.Read(2, 0, back.size(), back.data()).ok());
  EXPECT_EQ(back, b);  // visible before the crash
  for (CrashDisk* c : crash) ASSERT_TRUE(c->Crash({Mode::kDropAll, 7, 512}).ok());
  ASSERT_TRUE(io.Read(1, 0, back.size(), back.data()).ok());
  EXPECT_EQ(back, a);
  ASSERT_TRUE(io.Read(2, 0, back.size(), back.data()).ok());
  EXPECT_EQ(back, std::string(50000, '\0'));
}

}  // namespace
}  // namespace tipfs::stripe
