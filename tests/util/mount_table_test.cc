#include "util/mount_table.h"

#include <gtest/gtest.h>

#include <sstream>

namespace tipfs {
namespace {

TEST(MountTableTest, UnescapesOctalAndKeepsOtherBackslashes) {
  std::istringstream in(
      "36 25 0:32 / /mnt/with\\040space rw,relatime shared:1 - fuse.tipfs tipfs rw\n"
      "37 25 0:33 / /mnt/odd\\x\\12 rw - ext4 /dev/vd\\0 rw\n"
      "short line\n");
  std::vector<MountEntry> table = ParseMountInfo(in);
  ASSERT_EQ(table.size(), 2u);
  EXPECT_EQ(table[0].mountpoint, "/mnt/with space");
  EXPECT_EQ(table[0].fstype, "fuse.tipfs");
  // Not three octal digits: kept as written (this used to throw out of std::stoi).
  EXPECT_EQ(table[1].mountpoint, "/mnt/odd\\x\\12");
  EXPECT_EQ(table[1].source, "/dev/vd\\0");
}

}  // namespace
}  // namespace tipfs
