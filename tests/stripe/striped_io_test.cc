// StripedIo over in-memory disks: round trips, holes, spreading, truncation, errors.
#include "stripe/striped_io.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>

#include "stripe/faulty_disk.h"
#include "tests/stripe/disk_requests.h"
#include "tests/support/mem_disk.h"

namespace tipfs::stripe {
namespace {

using testing::MemDisk;

constexpr uint32_t kUnit = 4096;

struct MemVolume {
  explicit MemVolume(uint32_t n, uint32_t unit = kUnit, bool faulty = false) {
    std::vector<std::unique_ptr<Disk>> disks;
    for (uint32_t i = 0; i < n; ++i) {
      auto mem = std::make_unique<MemDisk>("disk " + std::to_string(i));
      mems.push_back(mem.get());
      if (faulty) {
        auto f = std::make_unique<FaultyDisk>(std::move(mem));
        faults.push_back(f.get());
        disks.push_back(std::move(f));
      } else {
        disks.push_back(std::move(mem));
      }
    }
    Label label;
    label.count = n;
    label.stripe_unit = unit;
    volume = std::make_unique<Volume>(label, std::move(disks));
    io = std::make_unique<StripedIo>(volume.get());
  }
  std::vector<MemDisk*> mems;
  std::vector<FaultyDisk*> faults;
  std::unique_ptr<Volume> volume;
  std::unique_ptr<StripedIo> io;
};

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::string ReadString(StripedIo& io, ObjectId ino, uint64_t off, uint64_t len) {
  std::string out(len, '\x5a');  // poison: every byte must be written by Read
  Status s = io.Read(ino, off, len, out.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(StripedIoTest, RoundTripOddRangesAgainstModel) {
  for (uint32_t n : {1u, 3u, 4u}) {
    MemVolume v(n);
    std::string model;
    std::mt19937_64 rng(n);
    for (int i = 0; i < 200; ++i) {
      const uint64_t off = rng() % (kUnit * 12);
      const uint64_t len = 1 + rng() % (kUnit * 3 + 17);
      const std::string data = RandomBytes(len, i);
      ASSERT_TRUE(v.io->Write(7, off, data.data(), len).ok());
      if (model.size() < off + len) model.resize(off + len, '\0');
      model.replace(off, len, data);
      const uint64_t roff = rng() % model.size();
      const uint64_t rlen = 1 + rng() % (model.size() - roff + kUnit);  // may run past the end
      std::string expect = model.substr(roff, rlen);
      expect.resize(rlen, '\0');
      ASSERT_EQ(ReadString(*v.io, 7, roff, rlen), expect) << "n=" << n << " i=" << i;
    }
  }
}

TEST(StripedIoTest, HolesReadAsZeros) {
  MemVolume v(4);
  const std::string tail = RandomBytes(100, 1);
  ASSERT_TRUE(v.io->Write(3, 10 * kUnit + 5, tail.data(), tail.size()).ok());
  // Units 0..9 were never written: several disks have short or no objects there.
  std::string expect(10 * kUnit + 5, '\0');
  expect += tail;
  EXPECT_EQ(ReadString(*v.io, 3, 0, expect.size()), expect);
  // A file never written at all reads as zeros too.
  EXPECT_EQ(ReadString(*v.io, 99, 0, 3 * kUnit), std::string(3 * kUnit, '\0'));
}

TEST(StripedIoTest, TenMiBOnFourDisksPutsAQuarterOnEach) {
  MemVolume v(4, 64 * 1024);
  const std::string data = RandomBytes(10 << 20, 2);
  ASSERT_TRUE(v.io->Write(12, 0, data.data(), data.size()).ok());
  for (MemDisk* d : v.mems) {
    EXPECT_NEAR(static_cast<double>(d->bytes_used()), data.size() / 4.0, data.size() * 0.01);
  }
  EXPECT_EQ(ReadString(*v.io, 12, 0, data.size()), data);
}

TEST(StripedIoTest, ReadAsyncSubmitsEveryPieceAndCallsDoneOnce) {
  MemVolume v(4);
  const std::string data = RandomBytes(8 * kUnit, 3);
  ASSERT_TRUE(v.io->Write(1, 0, data.data(), data.size()).ok());
  std::vector<uint64_t> before;
  for (MemDisk* d : v.mems) before.push_back(d->requests());
  std::string out(6 * kUnit, '\0');
  int calls = 0;
  v.io->ReadAsync(1, kUnit, out.size(), out.data(), DiskRequest::Priority::kPrefetch,
                  [&](Status s) {
                    EXPECT_TRUE(s.ok());
                    ++calls;
                  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(out, data.substr(kUnit, 6 * kUnit));
  uint64_t total = 0;
  for (size_t i = 0; i < v.mems.size(); ++i) total += v.mems[i]->requests() - before[i];
  EXPECT_EQ(total, 6u);  // one request per unit touched
  // Zero-length: done still runs once.
  v.io->ReadAsync(1, 0, 0, nullptr, DiskRequest::Priority::kDemand, [&](Status) { ++calls; });
  EXPECT_EQ(calls, 2);
}

TEST(StripedIoTest, TruncateShrinkLeavesNoStaleBytes) {
  MemVolume v(3);
  const std::string data = RandomBytes(10 * kUnit + 123, 4);
  ASSERT_TRUE(v.io->Write(5, 0, data.data(), data.size()).ok());
  const uint64_t small = 2 * kUnit + 7;
  ASSERT_TRUE(v.io->Truncate(5, data.size(), small).ok());
  const Layout& layout = v.volume->layout();
  for (uint32_t d = 0; d < 3; ++d) {
    EXPECT_EQ(v.mems[d]->Contents(5).size(), layout.ObjectSize(5, d, small)) << d;
  }
  // Extend again: everything past `small` must read as zeros.
  ASSERT_TRUE(v.io->Truncate(5, small, data.size()).ok());
  std::string expect = data.substr(0, small);
  expect.resize(data.size(), '\0');
  EXPECT_EQ(ReadString(*v.io, 5, 0, data.size()), expect);
  for (uint32_t d = 0; d < 3; ++d) {
    EXPECT_EQ(v.mems[d]->Contents(5).size(), layout.ObjectSize(5, d, data.size())) << d;
  }
  ASSERT_TRUE(v.io->Truncate(5, data.size(), 0).ok());
  for (MemDisk* d : v.mems) EXPECT_EQ(d->Contents(5).size(), 0u);
}

TEST(StripedIoTest, GrowthClearsBytesAFailedWriteLeftPastTheEnd) {
  MemVolume v(2);
  // Simulate a write that reached disk but whose size update never happened: the file is 100
  // bytes long by metadata, but the object on its start disk holds 4000 bytes.
  const std::string junk(4000, 'J');
  ASSERT_TRUE(v.io->Write(2, 0, junk.data(), junk.size()).ok());
  ASSERT_TRUE(v.io->Truncate(2, 4000, 100).ok());
  ASSERT_TRUE(v.io->Write(2, 100, junk.data(), 500).ok());  // failed write's leftovers
  ASSERT_TRUE(v.io->Truncate(2, 100, 3 * kUnit).ok());      // metadata still says 100 bytes
  std::string expect = junk.substr(0, 100);
  expect.resize(3 * kUnit, '\0');
  EXPECT_EQ(ReadString(*v.io, 2, 0, 3 * kUnit), expect);
}

TEST(StripedIoTest, RemoveDeletesEveryObject) {
  MemVolume v(4);
  const std::string data = RandomBytes(5 * kUnit, 5);
  ASSERT_TRUE(v.io->Write(8, 0, data.data(), data.size()).ok());
  ASSERT_TRUE(v.io->Sync(8).ok());
  ASSERT_TRUE(v.io->Remove(8).ok());
  for (MemDisk* d : v.mems) {
    std::vector<ObjectId> objects;
    ASSERT_TRUE(d->ListObjects(&objects).ok());
    EXPECT_TRUE(objects.empty());
  }
}

TEST(StripedIoTest, OneFailingDiskFailsTheReadWithEio) {
  MemVolume v(4, kUnit, /*faulty=*/true);
  const std::string data = RandomBytes(8 * kUnit, 6);
  ASSERT_TRUE(v.io->Write(4, 0, data.data(), data.size()).ok());
  v.faults[2]->FailAlways(FaultyDisk::kReads, EIO);
  std::string out(8 * kUnit, '\0');
  Status s = v.io->Read(4, 0, out.size(), out.data());
  EXPECT_EQ(s.error(), EIO);
  EXPECT_NE(s.message().find("disk 2"), std::string::npos) << s.message();
  // A range that does not touch disk 2 still works: ino 4 starts on disk 0, unit 0.
  EXPECT_TRUE(v.io->Read(4, 0, kUnit, out.data()).ok());
  // Writes are unaffected by a read fault.
  EXPECT_TRUE(v.io->Write(4, 0, data.data(), data.size()).ok());
  v.faults[2]->Heal();
  EXPECT_EQ(ReadString(*v.io, 4, 0, data.size()), data);
}

TEST(StripedIoTest, ErrorsMergeAcrossDisks) {
  MemVolume v(3, kUnit, /*faulty=*/true);
  const std::string data = RandomBytes(6 * kUnit, 7);
  v.faults[0]->FailAlways(FaultyDisk::kWrites, ENOSPC);
  v.faults[1]->FailAlways(FaultyDisk::kWrites, EROFS);
  EXPECT_EQ(v.io->Write(9, 0, data.data(), data.size()).error(), EROFS);
  v.faults[2]->FailAlways(FaultyDisk::kWrites, EIO);
  EXPECT_EQ(v.io->Write(9, 0, data.data(), data.size()).error(), EIO);
  EXPECT_EQ(v.io->Sync(9).error(), EIO);
  EXPECT_EQ(v.io->Remove(9).error(), EIO);
  EXPECT_EQ(v.io->Truncate(9, 0, 6 * kUnit).error(), EIO);
}

TEST(FaultyDiskTest, FailAfterObjectAndDisappear) {
  auto mem = std::make_unique<MemDisk>("disk 0");
  FaultyDisk disk(std::move(mem));
  auto submit = [&](DiskRequest::Kind kind, ObjectId object) {
    char buf[16] = {};
    return testing::SubmitAndWait(&disk, kind, object, 0, sizeof(buf), buf).error();
  };
  disk.FailAfter(2, FaultyDisk::kWrites, ENOSPC);
  EXPECT_EQ(submit(DiskRequest::Kind::kWrite, 1), 0);
  EXPECT_EQ(submit(DiskRequest::Kind::kRead, 1), 0);  // reads do not count
  EXPECT_EQ(submit(DiskRequest::Kind::kWrite, 1), 0);
  EXPECT_EQ(submit(DiskRequest::Kind::kWrite, 1), ENOSPC);
  EXPECT_EQ(disk.Truncate(1, 0).error(), ENOSPC);
  EXPECT_EQ(submit(DiskRequest::Kind::kRead, 1), 0);
  disk.Heal();
  disk.FailObject(5, FaultyDisk::kReadsAndWrites, EIO);
  EXPECT_EQ(submit(DiskRequest::Kind::kRead, 5), EIO);
  EXPECT_EQ(submit(DiskRequest::Kind::kWrite, 5), EIO);
  EXPECT_EQ(submit(DiskRequest::Kind::kRead, 6), 0);
  EXPECT_EQ(disk.Stat(5).error(), EIO);
  std::vector<ObjectId> objects;
  EXPECT_TRUE(disk.ListObjects(&objects).ok());
  disk.Disappear(ENOENT);
  EXPECT_EQ(submit(DiskRequest::Kind::kRead, 6), ENOENT);
  EXPECT_EQ(disk.ListObjects(&objects).error(), ENOENT);
  EXPECT_EQ(disk.Usage().error(), ENOENT);
  EXPECT_EQ(disk.injected(), 8u);
  disk.Heal();
  EXPECT_TRUE(disk.Usage().ok());
}

}  // namespace
}  // namespace tipfs::stripe
