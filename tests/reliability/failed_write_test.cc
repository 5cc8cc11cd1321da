// A write that fails on one disk may already have landed on the others. When it reached past the
// end of the file, those bytes sit past the recorded size; a later write further out leaves a
// hole over them, and a hole must read as zeros, never as bytes of a write that failed.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "stripe/faulty_disk.h"
#include "tests/support/volume_rig.h"

namespace tipfs::testing {
namespace {

constexpr uint64_t kUnit = 64 * 1024;

TEST(FailedWriteTest, BytesOfAFailedExtendingWriteNeverReappearInAHole) {
  VolumeRig rig(4, kUnit);
  std::vector<stripe::FaultyDisk*> faults;
  ASSERT_TRUE(rig.Open([&](MemDisk* mem, uint32_t) {
                   auto faulty =
                       std::make_unique<stripe::FaultyDisk>(std::make_unique<DiskRef>(mem));
                   faults.push_back(faulty.get());
                   return faulty;
                 })
                  .ok());
  fusefs::FileSystem* fs = rig.fs();
  auto file = fs->Create(fusefs::Caller{}, meta::kRootIno, "f", 0644, O_RDWR);
  ASSERT_TRUE(file.ok());
  const uint64_t ino = file->inode.ino;
  const std::string head(kUnit, 'h');
  ASSERT_TRUE(fs->Write(ino, 0, head.data(), head.size()).ok());

  // Units 1..4 go to all four disks; the disk of unit 2 is full.
  const uint32_t full = rig.volume()->layout().DiskOfUnit(ino, 2);
  faults[full]->FailAlways(stripe::FaultyDisk::kWrites, ENOSPC);
  const std::string failed(4 * kUnit, 'X');
  EXPECT_EQ(fs->Write(ino, kUnit, failed.data(), failed.size()).error(), ENOSPC);
  EXPECT_EQ(fs->GetAttr(ino)->size, kUnit);
  faults[full]->Heal();

  // Far past the end: units 1..8 are a hole.
  const std::string tail(100, 't');
  ASSERT_TRUE(fs->Write(ino, 9 * kUnit, tail.data(), tail.size()).ok());
  std::string out(9 * kUnit + 100, '?');
  auto n = fs->Read(cache::ReadContext{}, ino, 0, out.size(), out.data());
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(*n, out.size());
  EXPECT_TRUE(out.substr(0, kUnit) == head);
  const size_t hole_bytes = std::count(out.begin() + kUnit, out.begin() + 9 * kUnit, '\0');
  EXPECT_EQ(hole_bytes, 8 * kUnit) << "bytes of the failed write reappeared in the hole";
  EXPECT_TRUE(out.substr(9 * kUnit) == tail);
}

}  // namespace
}  // namespace tipfs::testing
