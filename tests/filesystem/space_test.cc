// What FileSystem reports about space, over MemDisks that allocate 4 KiB pages as ext4 does:
// SEEK_DATA / SEEK_HOLE against a page model of random sparse writes, st_blocks from what the
// objects hold, statfs counting a shared backing store once.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "tests/filesystem/fs_rig.h"

namespace tipfs::testing {
namespace {

using fusefs::Caller;
using meta::kRootIno;
constexpr uint64_t kPage = 4096;

class SpaceTest : public ::testing::Test {
 protected:
  uint64_t Create(const std::string& name) {
    auto opened = rig_.fs()->Create(Caller{}, kRootIno, name, 0644, O_RDWR);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return opened.ok() ? opened->inode.ino : 0;
  }
  void Write(uint64_t ino, uint64_t offset, uint64_t length) {
    std::string data(length, 'x');
    auto n = rig_.fs()->Write(ino, offset, data.data(), data.size());
    ASSERT_TRUE(n.ok()) << n.status().ToString();
  }
  void Truncate(uint64_t ino, uint64_t size) {
    meta::AttrChange change;
    change.size = size;
    change.now = meta::Time::Now();
    ASSERT_TRUE(rig_.fs()->SetAttr(ino, change).ok());
  }
  // lseek's answer, or -errno.
  int64_t Seek(uint64_t ino, uint64_t offset, int whence) {
    Result<uint64_t> at = rig_.fs()->Seek(ino, offset, whence);
    return at.ok() ? static_cast<int64_t>(*at) : -at.error();
  }
  uint64_t Blocks(uint64_t ino) {
    auto inode = rig_.fs()->GetAttr(ino);
    EXPECT_TRUE(inode.ok());
    return rig_.fs()->AllocatedBlocks(*inode);
  }

  FsRig rig_{4, 64 * 1024};
};

TEST_F(SpaceTest, SeekDataAndHoleFindTheWrittenRangesAcrossDisks) {
  const uint64_t ino = Create("sparse");
  Write(ino, 0, 4096);                 // unit 0
  Write(ino, 200 * 1024, 4096);        // unit 3
  Write(ino, (1 << 20) + 8192, 4096);  // unit 16: the same disk as unit 0
  Truncate(ino, uint64_t{10} << 20);   // a hole to the end
  EXPECT_EQ(Seek(ino, 0, SEEK_DATA), 0);
  EXPECT_EQ(Seek(ino, 0, SEEK_HOLE), 4096);
  EXPECT_EQ(Seek(ino, 4096, SEEK_DATA), 200 * 1024);
  EXPECT_EQ(Seek(ino, 200 * 1024 + 1, SEEK_HOLE), 204 * 1024);
  EXPECT_EQ(Seek(ino, 204 * 1024, SEEK_DATA), (1 << 20) + 8192);
  EXPECT_EQ(Seek(ino, (1 << 20) + 8192, SEEK_HOLE), (1 << 20) + 12288);
  EXPECT_EQ(Seek(ino, (1 << 20) + 12288, SEEK_DATA), -ENXIO);
  EXPECT_EQ(Seek(ino, (10 << 20) - 1, SEEK_HOLE), (10 << 20) - 1);
  EXPECT_EQ(Seek(ino, 10 << 20, SEEK_HOLE), -ENXIO);  // at the end: as lseek(2)
  EXPECT_EQ(Seek(ino, 10 << 20, SEEK_DATA), -ENXIO);
}

TEST_F(SpaceTest, SeekMatchesAPageModelOfRandomSparseWritesAndTruncates) {
  std::mt19937_64 random(13);
  for (int file = 0; file < 6; ++file) {
    const uint64_t ino = Create("f" + std::to_string(file));
    std::set<uint64_t> pages;  // the model: pages that hold data
    uint64_t size = 0;
    for (int step = 0; step < 40; ++step) {
      if (random() % 8 == 0) {
        const uint64_t new_size = random() % (4 << 20);
        Truncate(ino, new_size);
        pages.erase(pages.lower_bound((new_size + kPage - 1) / kPage), pages.end());
        // Cutting inside a page keeps it; it holds data up to the new end.
        size = new_size;
        continue;
      }
      const uint64_t offset = random() % (4 << 20);
      const uint64_t length = 1 + random() % (300 * 1024);
      Write(ino, offset, length);
      for (uint64_t p = offset / kPage; p <= (offset + length - 1) / kPage; ++p) pages.insert(p);
      size = std::max(size, offset + length);
    }
    for (uint64_t at = 0; at < size + 3 * kPage; at += 1 + random() % (3 * kPage)) {
      SCOPED_TRACE("file " + std::to_string(file) + " offset " + std::to_string(at));
      int64_t data = -ENXIO, hole = -ENXIO;
      if (at < size) {
        auto next = pages.lower_bound(at / kPage);
        if (next != pages.end() && *next * kPage < size) data = std::max(at, *next * kPage);
        uint64_t p = at / kPage;
        while (pages.count(p) != 0) ++p;
        hole = std::min(size, std::max(at, p * kPage));
      }
      ASSERT_EQ(Seek(ino, at, SEEK_DATA), data);
      ASSERT_EQ(Seek(ino, at, SEEK_HOLE), hole);
    }
    EXPECT_EQ(Blocks(ino), pages.size() * kPage / 512);
  }
}

TEST_F(SpaceTest, StBlocksCountsWhatTheObjectsHoldNotTheSize) {
  const uint64_t sparse = Create("sparse");
  // (MemDisk keeps objects as strings: a size the test's memory can hold.)
  Truncate(sparse, uint64_t{64} << 20);
  Write(sparse, (uint64_t{64} << 20) - 1, 1);
  EXPECT_EQ(Blocks(sparse), 8u);  // one 4 KiB page, not 64 MiB
  const uint64_t dense = Create("dense");
  Write(dense, 0, 1 << 20);
  EXPECT_EQ(Blocks(dense), (1u << 20) / 512);
  EXPECT_EQ(Blocks(Create("empty")), 0u);
}

TEST_F(SpaceTest, StatFsCountsEachSharedBackingStoreOnce) {
  auto alone = rig_.fs()->StatFs();
  ASSERT_TRUE(alone.ok());
  const uint64_t per_disk = alone->f_blocks / 4;
  // Disks 0-2 are directories of one file system, disk 3 has its own.
  for (size_t d = 0; d < 3; ++d) rig_.disk(d)->set_store_id(7);
  rig_.disk(3)->set_store_id(9);
  auto shared = rig_.fs()->StatFs();
  ASSERT_TRUE(shared.ok());
  EXPECT_EQ(shared->f_blocks, 2 * per_disk);
  EXPECT_LE(shared->f_bavail, shared->f_blocks);
  EXPECT_LE(shared->f_bavail, shared->f_bfree);
}

}  // namespace
}  // namespace tipfs::testing
