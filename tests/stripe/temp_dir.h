// TempDir: a fresh directory under $TMPDIR (or /tmp), removed with everything in it at scope end.
// Snapshot: a recursive listing (path, type, size, content hash) to prove "nothing changed".
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

namespace tipfs::testing {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/tipfs-stripe-XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    if (made == nullptr) std::abort();
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Makes <path>/<name> and returns its path.
  std::string Sub(const std::string& name) const {
    const std::string p = path_ + "/" + name;
    std::filesystem::create_directories(p);
    return p;
  }

 private:
  std::string path_;
};

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
