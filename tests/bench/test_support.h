// Helpers for the bench workload tests: a temporary directory removed at the end of the test,
// running a built program with its stdout and stderr captured, and small file utilities.
// Not thread-safe; each test uses its own TempDir.
#pragma once

#include <string>
#include <vector>

namespace tipfs::bench::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct ProgramResult {
  int exit_code = -1;  // -1 when the program did not exit normally
  std::string out;
  std::string err;
};

// Runs argv[0] (a path) with the given arguments and waits for it.
ProgramResult RunProgram(const std::vector<std::string>& argv);

std::string ReadFileOrDie(const std::string& path);
void WriteFileOrDie(const std::string& path, const std::string& contents);
std::vector<std::string> SplitLines(const std::string& text);
// Every regular file below `root` (relative path -> contents), for comparing two trees.
std::vector<std::pair<std::string, std::string>> ReadTree(const std::string& root);
// Counts occurrences of `needle` in `text`.
size_t CountOccurrences(const std::string& text, const std::string& needle);
// The value of "key=value" in a whitespace-separated line ("" when absent).
std::string FieldOf(const std::string& line, const std::string& key);

}  // namespace tipfs::bench::testing
