#include "util/durable_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/temp_dir.h"

namespace tipfs {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(DurableFileTest, ReplacesTheFileWholeAndLeavesNoTemporary) {
  testing::TempDir dir;
  const std::string path = dir.Sub("label");
  ASSERT_TRUE(WriteFileDurably(path, "first\n").ok());
  ASSERT_TRUE(WriteFileDurably(path, "second, longer\n").ok());
  EXPECT_EQ(Read(path), "second, longer\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(DurableFileTest, AnErrorNamesTheStepAndThePathAndKeepsTheOldContents) {
  testing::TempDir dir;
  Status missing = WriteFileDurably(dir.Sub("no/such/dir/file"), "x");
  EXPECT_EQ(missing.error(), ENOENT);
  EXPECT_NE(missing.message().find("create " + dir.Sub("no/such/dir/file.tmp")), std::string::npos)
      << missing.ToString();

  // A write cut short by the file size limit (the first write() returns fewer bytes, the next
  // one EFBIG): the error is that one, not whatever errno held before, and the old file stays.
  const std::string path = dir.Sub("pid");
  ASSERT_TRUE(WriteFileDurably(path, "old\n").ok());
  pid_t child = fork();
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {10, 10};
    setrlimit(RLIMIT_FSIZE, &limit);
    errno = ENOENT;  // a stale value that must not leak into the status
    Status st = WriteFileDurably(path, std::string(100, 'x'));
    _exit(st.error() == EFBIG && st.message().find("write " + path + ".tmp") == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(Read(path), "old\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

}  // namespace
}  // namespace tipfs
