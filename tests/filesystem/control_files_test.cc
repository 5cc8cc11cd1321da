#include "fusefs/control_files.h"

#include <gtest/gtest.h>

namespace tipfs::fusefs {
namespace {

TEST(ControlFilesTest, FilesAreFoundByNameRenderedAndOnlyWritableOnesAcceptWrites) {
  ControlFiles control;
  int renders = 0;
  std::string written;
  control.Add("stats", [&] { return "rendered " + std::to_string(++renders); });
  control.Add(
      "knob", [] { return std::string("knob"); },
      [&](std::string_view text) {
        if (text == "bad") return Status::InvalidArgument("bad knob");
        written = text;
        return Status::OK();
      });
  uint64_t stats = control.Lookup("stats");
  uint64_t knob = control.Lookup("knob");
  EXPECT_TRUE(ControlFiles::IsControl(stats));
  EXPECT_FALSE(ControlFiles::IsControl(12345));
  EXPECT_EQ(control.Lookup("nothing"), 0u);
  EXPECT_EQ(*control.Render(stats), "rendered 1");
  EXPECT_EQ(*control.Render(stats), "rendered 2");
  EXPECT_EQ(control.Write(stats, "x").error(), EACCES);
  EXPECT_FALSE(control.IsWritable(stats));
  EXPECT_TRUE(control.IsWritable(knob));
  EXPECT_TRUE(control.Write(knob, "L=1ms").ok());
  EXPECT_EQ(written, "L=1ms");
  EXPECT_EQ(control.Write(knob, "bad").error(), EINVAL);
  EXPECT_EQ(control.Render(ControlFiles::kDirIno + 99).error(), ENOENT);
  ASSERT_EQ(control.List().size(), 2u);
  EXPECT_EQ(control.List()[0].first, "stats");
}

}  // namespace
}  // namespace tipfs::fusefs
