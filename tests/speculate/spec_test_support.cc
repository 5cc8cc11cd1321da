#include "tests/speculate/spec_test_support.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tipfs::spec::testing {

namespace fs = std::filesystem;

SpecScratch::SpecScratch() {
  const char* tmp = getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr ? tmp : "/tmp") + "/tipspec-test-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) abort();
  root_ = buffer.data();
  fs::create_directories(watched());
}

SpecScratch::~SpecScratch() {
  std::error_code ignored;
  fs::remove_all(root_, ignored);
}

RunResult SpecScratch::Run(
    const std::vector<std::string>& argv, bool preload, const std::string& cwd,
    const std::vector<std::pair<std::string, std::string>>& environment) const {
  std::string out_path = root_ + "/run.out";
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    close(out);
    if (chdir(cwd.empty() ? root_.c_str() : cwd.c_str()) != 0) _exit(126);
    unsetenv("LD_PRELOAD");
    if (preload) {
      setenv("LD_PRELOAD", TIPSPEC_LIBRARY_PATH, 1);
      setenv("TIPSPEC_AUTOSTART", "1", 1);
      setenv("TIPSPEC_MOUNT", watched().c_str(), 1);
      setenv("TIPSPEC_HINT_LOG", hint_log().c_str(), 1);
      setenv("TIPSPEC_STATS_FILE", stats_file().c_str(), 1);
      setenv("TIPSPEC_LOCKSTEP", "1", 1);
      setenv("TIPSPEC_STALL_USEC", "0", 1);
      // Recordings of these runs (log mode: nothing is replayed) stay in the scratch directory.
      setenv("TIPSPEC_STATE_DIR", (root_ + "/state").c_str(), 1);
    }
    for (const auto& [name, value] : environment) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  RunResult result;
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadFile(out_path);
  return result;
}

std::map<std::string, uint64_t> SpecScratch::Stats() const {
  std::map<std::string, uint64_t> stats;
  std::istringstream lines(ReadFile(stats_file()));
  std::string key;
  uint64_t value;
  while (lines >> key >> value) {
    if (key.rfind("tipspec.", 0) == 0) key = key.substr(8);
    if (key == "pid" || key == "last_forbidden_syscall" || key == "epoch") continue;
    stats[key] += value;
  }
  return stats;
}

std::string SpecScratch::HintLog() const { return ReadFile(hint_log()); }

void SpecScratch::ClearLogs() const {
  unlink(hint_log().c_str());
  unlink(stats_file().c_str());
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string MakeText(uint64_t seed, size_t bytes) {
  std::string text;
  uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  static const char* const kWords[] = {"alpha", "bravo", "charlie", "delta",  "echo", "foxtrot",
                                       "golf",  "hotel", "india",   "juliet", "kilo", "lima"};
  while (text.size() < bytes) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    text += kWords[(x >> 33) % 12];
    text += ((x >> 20) % 9 == 0) ? "\n" : " ";
    if ((x >> 40) % 97 == 0) text += std::to_string(x % 100000) + "\n";
  }
  return text + "\n";
}

std::map<std::string, std::string> SnapshotTree(const std::string& dir) {
  std::map<std::string, std::string> tree;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    std::string relative = fs::relative(entry.path(), dir).string();
    struct stat st;
    lstat(entry.path().c_str(), &st);
    std::string description = "mode=" + std::to_string(st.st_mode) + " ";
    if (S_ISREG(st.st_mode)) {
      description += "file:" + ReadFile(entry.path());
    } else if (S_ISLNK(st.st_mode)) {
      description += "link:" + fs::read_symlink(entry.path()).string();
    } else if (S_ISDIR(st.st_mode)) {
      description += "dir";
    } else {
      description += "other";
    }
    tree[relative] = description;
  }
  return tree;
}

}  // namespace tipfs::spec::testing
