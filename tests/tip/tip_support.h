// Helpers for the informed-prefetching integration tests (tests/tip/): a volume whose files are
// written untimed and then remounted with an emulated disk array, snapshots of the mount's
// .tipfs/stats.json (cache, hint and per-disk counters), waiting until the daemon's prefetches
// have settled, reading files the way a program does, and the daemon's resident memory.
//
// Plain functions and one fixture class; each test owns its mount. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/mount_fixture.h"

namespace tipfs::testing::tip {

// One parse of <mount>/.tipfs/stats.json: the top-level numbers and each disk's numbers.
struct StatsSnapshot {
  std::map<std::string, double> values;
  std::vector<std::map<std::string, double>> disks;
  std::string raw;

  // The value of a top-level key; ADD_FAILURE (and 0) when it is missing.
  double Get(const std::string& key) const;
  uint64_t Count(const std::string& key) const { return static_cast<uint64_t>(Get(key)); }
  // Sum of a per-disk key over all disks.
  uint64_t DiskSum(const std::string& key) const;
  std::vector<uint64_t> DiskValues(const std::string& key) const;
};

// Reads and parses the stats file; ADD_FAILURE and an empty snapshot on error.
StatsSnapshot ReadStats(const std::string& mountpoint);

// Polls the stats until no disk has a request queued or in service, nothing is being fetched and
// the disk read and prefetch counters stayed the same over several polls (the manager has done
// all it decided to do). Returns the last snapshot; ADD_FAILURE after `timeout_seconds`.
StatsSnapshot WaitForQuietDisks(const std::string& mountpoint, double timeout_seconds = 60);

// A file of the test set: name relative to the mount root, and its bytes.
struct TestFile {
  std::string name;
  std::string bytes;
};

// `count` files "dir<k>/file<i>" (8 directories), sizes from 1 KiB to 40 KiB with every tenth
// 100,000 bytes (two 64 KiB blocks), contents seeded by `seed`.
std::vector<TestFile> SmallFileSet(int count, uint64_t seed);
// Writes the set under `root` (directories created as needed); false on the first error.
bool WriteFileSet(const std::string& root, const std::vector<TestFile>& files);
// Cache blocks of `block_size` bytes the set occupies (each file at least one).
uint64_t BlocksOf(const std::vector<TestFile>& files, uint64_t block_size);
// Reads each file under `root` in order with 64 KiB read() calls, as a program does, and checks
// every byte (ADD_FAILURE naming the file). Returns the number of files that matched.
int ReadAndVerify(const std::string& root, const std::vector<TestFile>& files);

// VmRSS of a process in KiB (0 when unreadable).
uint64_t ResidentKiB(pid_t pid);

// A 4-disk volume for these tests: Create() writes the files with no disk model (fast), then
// Remount(args) mounts it cold with whatever model and modes the test needs.
class TipVolume {
 public:
  TipVolume();
  // "" on success, else the tool's output.
  std::string Create(const std::vector<TestFile>& files, const std::string& mount_args = "");
  std::string Remount(const std::string& args);
  TipfsMount& mount() { return *mount_; }
  const std::string& mountpoint() const { return mount_->mountpoint(); }
  pid_t DaemonPid() const;

 private:
  std::unique_ptr<TipfsMount> mount_;
};

}  // namespace tipfs::testing::tip
