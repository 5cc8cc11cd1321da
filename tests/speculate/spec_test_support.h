// Helpers for the libtipspec tests: a scratch directory with a "watched" tree standing in for
// the mount (hints go to a log file), running a command with or without the preloaded library,
// and reading the counters and hints it left.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tipfs::spec::testing {

struct RunResult {
  int exit_status = -1;  // exit code, or 128 + signal
  std::string out;       // stdout
};

class SpecScratch {
 public:
  SpecScratch();
  ~SpecScratch();

  const std::string& root() const { return root_; }
  std::string watched() const { return root_ + "/watched"; }
  std::string hint_log() const { return root_ + "/hints.log"; }
  std::string stats_file() const { return root_ + "/stats.txt"; }

  // Runs argv with cwd = `cwd` (default root). With `preload`, under libtipspec in lockstep
  // (deterministic) mode, re-forking at every opportunity, hints to hint_log(); `environment`
  // (NAME, VALUE) pairs are set last, so they can change those knobs.
  RunResult Run(const std::vector<std::string>& argv, bool preload, const std::string& cwd = "",
                const std::vector<std::pair<std::string, std::string>>& environment = {}) const;

  // Counters printed by every process of the last preloaded runs (summed over processes).
  std::map<std::string, uint64_t> Stats() const;
  std::string HintLog() const;
  void ClearLogs() const;

 private:
  std::string root_;
};

void WriteFile(const std::string& path, const std::string& content);
std::string ReadFile(const std::string& path);
// Deterministic text of about `bytes` bytes.
std::string MakeText(uint64_t seed, size_t bytes);
// Every entry under `dir`: relative path -> type, mode and content (or link target).
std::map<std::string, std::string> SnapshotTree(const std::string& dir);

}  // namespace tipfs::spec::testing
