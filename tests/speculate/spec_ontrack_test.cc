// The on-track check when the child is not ahead yet (no lockstep, hints to a log file): a
// child that has not logged the program's read is left running, and the reads the program did
// before it are checked against what it logs later. Under the first design every such read
// replaced the child (a fresh child is always still starting when the program's next read
// comes), so a sequential reader forked again and again and its children never got ahead.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/speculate/spec_test_support.h"

namespace tipfs::spec::testing {
namespace {

TEST(SpecOnTrackTest, AChildNotAheadYetIsKeptAndCheckedWhenItCatchesUp) {
  SpecScratch scratch;
  std::string file = scratch.watched() + "/data.txt";
  WriteFile(file, MakeText(7, 400000));
  std::vector<std::string> argv = {SPEC_OVERHEAD_READER, "read", "4096", "1", file};
  RunResult plain = scratch.Run(argv, false);
  ASSERT_EQ(plain.exit_status, 0);
  // Fork at the first read; a child may lag by any number of reads; no fork budget.
  RunResult speculated = scratch.Run(
      argv, true, "",
      {{"TIPSPEC_LOCKSTEP", "0"}, {"TIPSPEC_MAX_BEHIND", "100000"}, {"TIPSPEC_MAX_OVERHEAD", "0"}});
  EXPECT_EQ(speculated.exit_status, 0);
  EXPECT_EQ(speculated.out, plain.out);
  auto stats = scratch.Stats();
  EXPECT_EQ(stats["forks"], 1u) << "the child was replaced although it never went wrong";
  EXPECT_EQ(stats["offtrack_behind"], 0u);
  EXPECT_EQ(stats["offtrack_mismatch"], 0u) << "the late entries were checked out of order";
  // Every read is one the child logged before the program came to it, or one the program noted
  // and the child logged afterwards (or had not reached when the program ended).
  const uint64_t reads = (std::filesystem::file_size(file) + 4095) / 4096 + 1;  // and EOF
  EXPECT_EQ(stats["reads_checked"], reads);
  EXPECT_EQ(stats["hints_consumed"] + stats["reads_behind"], reads - 1);  // all but the first
}

// A child that stays behind is replaced once it is max_behind_reads reads late. Lockstep off, a
// read of 4 KiB takes the program microseconds and the child's start alone much longer, so the
// first child lags at once; with a bound of 1 no child may lag twice.
TEST(SpecOnTrackTest, AChildTooFarBehindIsReplaced) {
  SpecScratch scratch;
  std::string file = scratch.watched() + "/data.txt";
  WriteFile(file, MakeText(8, 400000));
  std::vector<std::string> argv = {SPEC_OVERHEAD_READER, "read", "4096", "1", file};
  RunResult speculated = scratch.Run(
      argv, true, "",
      {{"TIPSPEC_LOCKSTEP", "0"}, {"TIPSPEC_MAX_BEHIND", "1"}, {"TIPSPEC_MAX_OVERHEAD", "0"}});
  EXPECT_EQ(speculated.exit_status, 0);
  auto stats = scratch.Stats();
  EXPECT_EQ(stats["offtrack_mismatch"], 0u);
  // Each child ends behind, or ran to the program's end, or is the last one; none lags by 2.
  EXPECT_LE(stats["reads_behind"], stats["forks"]);
}

}  // namespace
}  // namespace tipfs::spec::testing
