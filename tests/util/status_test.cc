#include "util/status.h"

#include <gtest/gtest.h>

namespace tipfs {
namespace {

TEST(StatusTest, CarriesErrnoAndMessage) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.error(), 0);
  Status st = Status::NotFound("no such thing");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.error(), ENOENT);
  EXPECT_EQ(st.WithContext("mount /x").message(), "mount /x: no such thing");
  EXPECT_EQ(ErrnoStatus("open /y", EACCES).ToString(), "open /y: Permission denied");
}

TEST(ResultTest, HoldsValueOrStatus) {
  Result<int> r = 5;
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 5);
  Result<int> e = Status::IOError("bad");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.error(), EIO);
  EXPECT_EQ(e.status().message(), "bad");
}

TEST(ResultTest, AnOkStatusWithoutAValueIsAnError) {
  Result<int> r = Status::OK();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error(), EIO);  // never 0: a FUSE reply of 0 would claim success with no data
}

TEST(ResultDeathTest, ReadingTheValueOfAnErrorAbortsNamingIt) {
  Result<int> e = Status::NotFound("no inode 42");
  EXPECT_DEATH((void)*e, "INTERNAL ERROR: the value of a failed Result was read: no inode 42");
}

}  // namespace
}  // namespace tipfs
