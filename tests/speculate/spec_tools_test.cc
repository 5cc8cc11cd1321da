// Real programs, byte for byte the same with and without libtipspec, with speculation running
// (lockstep, re-forking at every chance): GNU grep -r (read), sha256sum over many files (stdio
// fread), tar cf of a tree (read, getdents), GNU ld linking many objects (BFD: stdio).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/speculate/spec_test_support.h"

namespace tipfs::spec::testing {
namespace {

namespace fs = std::filesystem;

bool HaveProgram(const std::string& name) {
  return system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

class SpecToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int d = 0; d < 6; ++d) {
      std::string dir = scratch_.watched() + "/tree/dir" + std::to_string(d);
      fs::create_directories(dir);
      for (int f = 0; f < 25; ++f) {
        WriteFile(dir + "/file" + std::to_string(f) + ".txt",
                  MakeText(d * 100 + f, 2000 + 3000 * ((d * 7 + f) % 13)));
      }
    }
  }

  // Compares stdout, or the file `output` when given.
  void ExpectSameOutput(const std::vector<std::string>& argv, const std::string& cwd = "",
                        const std::string& output = "") {
    RunResult plain = scratch_.Run(argv, false, cwd);
    ASSERT_EQ(plain.exit_status, 0) << argv[0];
    if (!output.empty()) plain.out = ReadFile(output);
    ASSERT_FALSE(plain.out.empty());
    scratch_.ClearLogs();
    if (!output.empty()) unlink(output.c_str());
    RunResult speculated = scratch_.Run(argv, true, cwd);
    if (!output.empty()) speculated.out = ReadFile(output);
    EXPECT_EQ(speculated.exit_status, 0);
    EXPECT_TRUE(speculated.out == plain.out) << argv[0] << ": outputs differ";
    auto stats = scratch_.Stats();
    EXPECT_GE(stats["forks"], 1u);
    EXPECT_GE(stats["hints_consumed"], 10u) << argv[0] << " was not speculated on";
  }

  SpecScratch scratch_;
};

TEST_F(SpecToolsTest, GrepRecursive) {
  ExpectSameOutput({"grep", "-r", "-n", "kilo lima", scratch_.watched() + "/tree"});
}

TEST_F(SpecToolsTest, Sha256sumOverManyFiles) {
  std::vector<std::string> argv = {"sha256sum"};
  for (const auto& entry : fs::recursive_directory_iterator(scratch_.watched() + "/tree")) {
    if (entry.is_regular_file()) argv.push_back(entry.path().string());
  }
  std::sort(argv.begin() + 1, argv.end());
  ExpectSameOutput(argv);
}

TEST_F(SpecToolsTest, TarOfATree) {
  ExpectSameOutput({"tar", "cf", "-", "--sort=name", "tree"}, scratch_.watched());
}

TEST_F(SpecToolsTest, LdLinkingManyObjects) {
  if (!HaveProgram("cc") || !HaveProgram("ld")) GTEST_SKIP() << "cc or ld not installed";
  std::string objects = scratch_.watched() + "/objects";
  fs::create_directories(objects);
  std::string sources = scratch_.root() + "/sources";
  fs::create_directories(sources);
  std::string compile = "cd " + sources + " && cc -c -O1";
  std::string linked = scratch_.root() + "/linked.o";
  std::vector<std::string> argv = {"ld", "-r", "-o", linked};
  for (int i = 0; i < 40; ++i) {
    std::string name = "unit" + std::to_string(i);
    std::string body = "int " + name + "_value = " + std::to_string(i) + ";\n";
    for (int k = 0; k < 20; ++k) {
      body += "int " + name + "_f" + std::to_string(k) + "(int x) { return x * " +
              std::to_string(k + i) + " + " + name + "_value; }\n";
    }
    WriteFile(sources + "/" + name + ".c", body);
    compile += " " + name + ".c";
    argv.push_back(objects + "/" + name + ".o");
  }
  ASSERT_EQ(system((compile + " && mv *.o " + objects).c_str()), 0);
  ExpectSameOutput(argv, "", linked);
}

}  // namespace
}  // namespace tipfs::spec::testing
