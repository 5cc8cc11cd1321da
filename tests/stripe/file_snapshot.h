// Whole-file helpers and Snapshot, a recursive listing (path, type, size, content hash) to prove
// "nothing changed", for the stripe tests; their TempDir is tests/support/temp_dir.h.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include "tests/support/temp_dir.h"

namespace tipfs::testing {

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteWholeFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

// Every entry under `root`, with its type and, for files, size and content hash.
inline std::map<std::string, std::string> Snapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const auto& p = it->path();
    std::string desc;
    if (it->is_symlink()) {
      desc = "link:" + std::filesystem::read_symlink(p).string();
    } else if (it->is_directory()) {
      desc = "dir";
    } else {
      const std::string data = ReadWholeFile(p.string());
      desc = "file:" + std::to_string(data.size()) + ":" +
             std::to_string(std::hash<std::string>()(data));
    }
    out[p.string()] = desc;
  }
  return out;
}

}  // namespace tipfs::testing
