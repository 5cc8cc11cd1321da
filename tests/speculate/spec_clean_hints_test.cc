// What a program's speculation leaves when a child ends by itself (no mount: hints go to a log
// file). A child that ends on a call it may not make (here the unlink a linker makes of its
// temporary file) or at the program's exit has made its reads on real data up to its first read
// of data it did not get: those clean hints stay for the program to read, and only its tainted
// ones are cancelled ("cancel E tainted"). A child that went off track leaves none ("cancel E").
#include <gtest/gtest.h>

#include <filesystem>
#include <iterator>
#include <regex>

#include "tests/speculate/spec_test_support.h"

namespace tipfs::spec::testing {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> MakeRecords(const SpecScratch& scratch, int count) {
  fs::create_directories(scratch.watched() + "/records");
  std::string make = std::string(PARSE_RECORDS) + " --make " + std::to_string(count) + " " +
                     scratch.watched() + "/records";
  EXPECT_EQ(system(make.c_str()), 0);
  std::vector<std::string> files;
  for (int i = 0; i < count; ++i) {
    char name[64];
    snprintf(name, sizeof(name), "/records/rec%03d.bin", i);
    files.push_back(scratch.watched() + name);
  }
  return files;
}

size_t Count(const std::string& text, const std::string& pattern) {
  std::regex re(pattern);
  return static_cast<size_t>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

TEST(SpecCleanHintsTest, AChildThatEndsByItselfLeavesItsCleanHints) {
  SpecScratch scratch;
  std::vector<std::string> argv = {PARSE_RECORDS, "--unlink-after", scratch.root() + "/tmpfile"};
  for (const std::string& file : MakeRecords(scratch, 6)) argv.push_back(file);
  RunResult plain = scratch.Run(argv, false);
  ASSERT_EQ(plain.exit_status, 0) << plain.out;
  RunResult speculated = scratch.Run(argv, true);
  EXPECT_EQ(speculated.exit_status, 0);
  EXPECT_EQ(speculated.out, plain.out);
  std::map<std::string, uint64_t> stats = scratch.Stats();
  EXPECT_GE(stats["child_ended_forbidden"], 1u) << "no child ended at the unlink";
  const std::string log = scratch.HintLog();
  EXPECT_GE(Count(log, "cancel [0-9]+ tainted\n"), 1u) << log;
  // Only the last child, stopped when the program exits, has all its hints cancelled.
  const std::string last = std::to_string(stats["forks"]);
  EXPECT_EQ(Count(log, "cancel [0-9]+\n"), Count(log, "cancel " + last + "\n")) << log;
}

}  // namespace
}  // namespace tipfs::spec::testing
