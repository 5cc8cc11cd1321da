// Layout arithmetic: unit -> disk, object offsets, merging, object sizes for truncation, and the
// error merge rule. Checked against hand-computed cases and against a byte-by-byte model.
#include "stripe/layout.h"

#include <gtest/gtest.h>

#include <random>

namespace tipfs::stripe {
namespace {

constexpr uint32_t kUnit = 4096;

// Where one byte lives, straight from the rule in DESIGN.md, one byte at a time.
struct Place {
  uint32_t disk;
  uint64_t object_offset;
};
Place ModelPlace(uint32_t n, uint32_t unit, ObjectId ino, uint64_t file_offset) {
  const uint64_t k = file_offset / unit;
  return Place{static_cast<uint32_t>((ino % n + k) % n), (k / n) * unit + file_offset % unit};
}

TEST(LayoutTest, StartDiskRotatesByInode) {
  Layout layout(4, kUnit);
  EXPECT_EQ(layout.StartDisk(0), 0u);
  EXPECT_EQ(layout.StartDisk(5), 1u);
  EXPECT_EQ(layout.StartDisk(7), 3u);
  EXPECT_EQ(layout.DiskOfUnit(7, 0), 3u);
  EXPECT_EQ(layout.DiskOfUnit(7, 1), 0u);
  EXPECT_EQ(layout.DiskOfUnit(7, 6), 1u);
  EXPECT_EQ(layout.DiskOfOffset(7, 4095), 3u);
  EXPECT_EQ(layout.DiskOfOffset(7, 4096), 0u);
  // Huge unit indexes and inodes do not overflow.
  EXPECT_EQ(layout.DiskOfUnit(~uint64_t{0}, ~uint64_t{0}), ((~uint64_t{0} % 4) * 2) % 4);
}

TEST(LayoutTest, MapHandComputedThreeDisks) {
  Layout layout(3, kUnit);
  std::vector<Extent> e;
  // ino 4 starts on disk 1. Bytes [100, 100 + 3 units) touch units 0..3.
  layout.Map(4, 100, 3 * kUnit, &e);
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].disk, 1u);
  EXPECT_EQ(e[0].object_offset, 100u);
  EXPECT_EQ(e[0].file_offset, 100u);
  EXPECT_EQ(e[0].length, kUnit - 100);
  EXPECT_EQ(e[1].disk, 2u);
  EXPECT_EQ(e[1].object_offset, 0u);
  EXPECT_EQ(e[1].length, kUnit);
  EXPECT_EQ(e[2].disk, 0u);
  EXPECT_EQ(e[2].object_offset, 0u);
  EXPECT_EQ(e[3].disk, 1u);  // unit 3 is the second unit on disk 1
  EXPECT_EQ(e[3].object_offset, kUnit);
  EXPECT_EQ(e[3].file_offset, 3 * kUnit);
  EXPECT_EQ(e[3].length, 100u);
}

TEST(LayoutTest, OneDiskMergesIntoOnePiece) {
  Layout layout(1, kUnit);
  std::vector<Extent> e;
  layout.Map(9, 123, 10 * kUnit + 7, &e);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].disk, 0u);
  EXPECT_EQ(e[0].object_offset, 123u);
  EXPECT_EQ(e[0].length, 10 * kUnit + 7);
}

TEST(LayoutTest, MapAppendsAndZeroLengthMapsNothing) {
  Layout layout(4, kUnit);
  std::vector<Extent> e;
  layout.Map(1, 0, 0, &e);
  EXPECT_TRUE(e.empty());
  layout.Map(1, 0, 10, &e);
  layout.Map(1, 10, 10, &e);  // contiguous with the previous call, but calls are not merged
  EXPECT_EQ(e.size(), 2u);
}

TEST(LayoutTest, MapMatchesByteModel) {
  std::mt19937_64 rng(42);
  for (uint32_t n : {1u, 3u, 4u, 64u}) {
    for (uint32_t unit : {4096u, 65536u}) {
      Layout layout(n, unit);
      for (int trial = 0; trial < 200; ++trial) {
        const ObjectId ino = rng() % 1000;
        const uint64_t offset = rng() % (uint64_t{unit} * n * 3);
        const uint64_t length = 1 + rng() % (uint64_t{unit} * 5 + 13);
        std::vector<Extent> e;
        layout.Map(ino, offset, length, &e);
        uint64_t covered = offset;
        for (size_t i = 0; i < e.size(); ++i) {
          ASSERT_EQ(e[i].file_offset, covered) << "pieces must tile the range in file order";
          ASSERT_GT(e[i].length, 0u);
          if (n > 1) {
            ASSERT_LE(e[i].length, unit);
          }
          if (i > 0 && e[i].disk == e[i - 1].disk) {
            // Same disk twice in a row only when the pieces are not contiguous on it.
            ASSERT_NE(e[i - 1].object_offset + e[i - 1].length, e[i].object_offset);
          }
          // Check the first, last and a middle byte of every piece against the model.
          for (uint64_t b : {uint64_t{0}, e[i].length / 2, e[i].length - 1}) {
            const Place p = ModelPlace(n, unit, ino, e[i].file_offset + b);
            ASSERT_EQ(e[i].disk, p.disk);
            ASSERT_EQ(e[i].object_offset + b, p.object_offset);
          }
          covered += e[i].length;
        }
        ASSERT_EQ(covered, offset + length);
      }
    }
  }
}

// ObjectSize against the model: the highest object byte any file byte maps to, plus one.
TEST(LayoutTest, ObjectSizeMatchesByteModel) {
  for (uint32_t n : {1u, 3u, 4u, 64u}) {
    Layout layout(n, kUnit);
    for (ObjectId ino : {ObjectId{0}, ObjectId{1}, ObjectId{2}, ObjectId{63}, ObjectId{100}}) {
      std::vector<uint64_t> sizes = {0, 1, 4095, 4096, 4097, 3 * 4096 + 5};
      for (uint64_t units : {uint64_t{n} - 1, uint64_t{n}, uint64_t{n} + 1, 2 * uint64_t{n} + 1}) {
        sizes.push_back(units * kUnit);
        sizes.push_back(units * kUnit + 1);
        if (units > 0) sizes.push_back(units * kUnit - 1);
      }
      for (uint64_t size : sizes) {
        std::vector<uint64_t> model(n, 0);
        // Only the last byte of each unit (and the file's last byte) can set a maximum.
        for (uint64_t u = 0; u * kUnit < size; ++u) {
          const uint64_t last = std::min(size, (u + 1) * kUnit) - 1;
          const Place p = ModelPlace(n, kUnit, ino, last);
          model[p.disk] = std::max(model[p.disk], p.object_offset + 1);
        }
        for (uint32_t d = 0; d < n; ++d) {
          ASSERT_EQ(layout.ObjectSize(ino, d, size), model[d])
              << "n=" << n << " ino=" << ino << " size=" << size << " disk=" << d;
        }
      }
    }
  }
}

TEST(LayoutTest, ObjectSizeHandComputed) {
  Layout layout(4, kUnit);
  // ino 1 starts on disk 1; a file of 5 units + 10 bytes: units 0..5 on disks 1,2,3,0,1,2.
  const uint64_t size = 5 * kUnit + 10;
  EXPECT_EQ(layout.ObjectSize(1, 0, size), kUnit);       // unit 3
  EXPECT_EQ(layout.ObjectSize(1, 1, size), 2 * kUnit);   // units 0, 4
  EXPECT_EQ(layout.ObjectSize(1, 2, size), kUnit + 10);  // units 1, 5 (partial)
  EXPECT_EQ(layout.ObjectSize(1, 3, size), kUnit);       // unit 2
  // A tiny file lives only on its start disk.
  EXPECT_EQ(layout.ObjectSize(1, 1, 7), 7u);
  EXPECT_EQ(layout.ObjectSize(1, 0, 7), 0u);
  EXPECT_EQ(layout.ObjectSize(1, 2, 7), 0u);
}

TEST(MergeDiskErrorsTest, FixedPrecedence) {
  const Status ok;
  const Status eio = Status::IOError("eio");
  const Status erofs = Status::FromErrno(EROFS, "erofs");
  const Status enospc = Status::NoSpace("enospc");
  const Status enoent = Status::NotFound("enoent");
  EXPECT_TRUE(MergeDiskErrors(ok, ok).ok());
  EXPECT_EQ(MergeDiskErrors(ok, enoent).error(), ENOENT);
  EXPECT_EQ(MergeDiskErrors(enoent, enospc).error(), ENOSPC);
  EXPECT_EQ(MergeDiskErrors(enospc, enoent).error(), ENOSPC);
  EXPECT_EQ(MergeDiskErrors(enospc, erofs).error(), EROFS);
  EXPECT_EQ(MergeDiskErrors(eio, erofs).error(), EIO);
  EXPECT_EQ(MergeDiskErrors(erofs, eio).error(), EIO);
  EXPECT_EQ(MergeDiskErrors(ok, eio).message(), "eio");
}

}  // namespace
}  // namespace tipfs::stripe
