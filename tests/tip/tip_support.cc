#include "tests/tip/tip_support.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/support/fs_inspect.h"

namespace tipfs::testing::tip {
namespace {

// "key":number pairs of a flat JSON object text (strings and nested values are skipped).
std::map<std::string, double> NumbersOf(const std::string& text) {
  static const std::regex kPair("\"([^\"]+)\":(-?[0-9][0-9.eE+-]*)");
  std::map<std::string, double> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kPair);
       it != std::sregex_iterator(); ++it) {
    out[(*it)[1].str()] = std::strtod((*it)[2].str().c_str(), nullptr);
  }
  return out;
}

}  // namespace

double StatsSnapshot::Get(const std::string& key) const {
  auto it = values.find(key);
  if (it == values.end()) {
    ADD_FAILURE() << "stats.json has no key " << key << ": " << raw;
    return 0;
  }
  return it->second;
}

uint64_t StatsSnapshot::DiskSum(const std::string& key) const {
  uint64_t sum = 0;
  for (uint64_t v : DiskValues(key)) sum += v;
  return sum;
}

std::vector<uint64_t> StatsSnapshot::DiskValues(const std::string& key) const {
  std::vector<uint64_t> out;
  for (const auto& disk : disks) {
    auto it = disk.find(key);
    if (it == disk.end()) {
      ADD_FAILURE() << "stats.json disk entry has no key " << key << ": " << raw;
      out.push_back(0);
    } else {
      out.push_back(static_cast<uint64_t>(it->second));
    }
  }
  return out;
}

StatsSnapshot ReadStats(const std::string& mountpoint) {
  StatsSnapshot s;
  std::ifstream in(mountpoint + "/.tipfs/stats.json");
  if (!in) {
    ADD_FAILURE() << "cannot open " << mountpoint << "/.tipfs/stats.json";
    return s;
  }
  std::stringstream text;
  text << in.rdbuf();
  s.raw = text.str();
  const size_t disks_at = s.raw.find("\"disks\":[");
  s.values = NumbersOf(s.raw.substr(0, disks_at));
  if (disks_at != std::string::npos) {
    // Only the "disks" array (other arrays, such as disk_health, may follow it).
    const size_t disks_end = s.raw.find(']', disks_at);
    size_t pos = disks_at;
    while (true) {
      const size_t open = s.raw.find('{', pos);
      if (open == std::string::npos || open > disks_end) break;
      const size_t close = s.raw.find('}', open);
      if (close == std::string::npos) break;
      s.disks.push_back(NumbersOf(s.raw.substr(open, close - open)));
      pos = close;
    }
  }
  return s;
}

StatsSnapshot WaitForQuietDisks(const std::string& mountpoint, double timeout_seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  StatsSnapshot last = ReadStats(mountpoint);
  int stable = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    StatsSnapshot now = ReadStats(mountpoint);
    const bool idle = now.DiskSum("queue_depth") == 0 && now.Count("cache.buffers.fetching") == 0;
    const bool same = now.Count("disk.read.ops") == last.Count("disk.read.ops") &&
                      now.Count("hints.prefetched") == last.Count("hints.prefetched");
    stable = idle && same ? stable + 1 : 0;
    last = std::move(now);
    if (stable >= 4) return last;
  }
  ADD_FAILURE() << "the disks did not settle within " << timeout_seconds << " s: " << last.raw;
  return last;
}

std::vector<TestFile> SmallFileSet(int count, uint64_t seed) {
  std::vector<TestFile> files;
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int i = 0; i < count; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;  // Knuth's MMIX LCG
    size_t size = 1024 + (state >> 33) % (40 * 1024);
    if (i % 10 == 9) size = 100000;
    TestFile f;
    f.name = "dir" + std::to_string(i % 8) + "/file" + std::to_string(i);
    f.bytes = PatternBytes(size, seed * 100003 + static_cast<uint64_t>(i));
    files.push_back(std::move(f));
  }
  return files;
}

bool WriteFileSet(const std::string& root, const std::vector<TestFile>& files) {
  for (const TestFile& f : files) {
    const std::string path = root + "/" + f.name;
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignored);
    if (!WriteFileBytes(path, f.bytes)) {
      ADD_FAILURE() << "cannot write " << path << ": " << strerror(errno);
      return false;
    }
  }
  return true;
}

uint64_t BlocksOf(const std::vector<TestFile>& files, uint64_t block_size) {
  uint64_t blocks = 0;
  for (const TestFile& f : files)
    blocks += std::max<uint64_t>(1, (f.bytes.size() + block_size - 1) / block_size);
  return blocks;
}

int ReadAndVerify(const std::string& root, const std::vector<TestFile>& files) {
  int matched = 0;
  std::string buffer(64 * 1024, '\0');
  for (const TestFile& f : files) {
    const std::string path = root + "/" + f.name;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      ADD_FAILURE() << "open " << path << ": " << strerror(errno);
      continue;
    }
    std::string got;
    while (true) {
      const ssize_t n = read(fd, buffer.data(), buffer.size());
      if (n < 0) {
        ADD_FAILURE() << "read " << path << ": " << strerror(errno);
        break;
      }
      if (n == 0) break;
      got.append(buffer.data(), static_cast<size_t>(n));
    }
    close(fd);
    if (got == f.bytes) {
      ++matched;
    } else {
      ADD_FAILURE() << path << ": read " << got.size() << " bytes that differ from the "
                    << f.bytes.size() << " written";
    }
  }
  return matched;
}

uint64_t ResidentKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

TipVolume::TipVolume() : mount_(std::make_unique<TipfsMount>(VolumeSpec{})) {}

std::string TipVolume::Create(const std::vector<TestFile>& files, const std::string& mount_args) {
  std::string error = mount_->Create();
  if (!error.empty()) return error;
  error = mount_->Mount("--disk-model none " + mount_args);
  if (!error.empty()) return error;
  if (!WriteFileSet(mount_->mountpoint(), files)) return "writing the file set failed";
  return mount_->Unmount();
}

std::string TipVolume::Remount(const std::string& args) {
  if (mount_->mounted()) {
    std::string error = mount_->Unmount();
    if (!error.empty()) return error;
  }
  return mount_->Mount(args);
}

pid_t TipVolume::DaemonPid() const { return ReadDaemonPid(mount_->disks()[0]); }

}  // namespace tipfs::testing::tip
