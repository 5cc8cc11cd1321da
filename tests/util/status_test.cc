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

}  // namespace
}  // namespace tipfs
