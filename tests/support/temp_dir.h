// TempDir: a fresh directory under $TMPDIR (or /tmp), removed with everything in it at scope end.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tipfs::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "tipfs") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    char* made = ::mkdtemp(pattern.data());
    if (made == nullptr) std::abort();
    path_ = made;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // <path>/<name>; nothing is created.
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }
  // <path>/<name>, made (with its parents) if missing.
  std::string MakeDir(const std::string& name) const {
    const std::string p = Sub(name);
    std::filesystem::create_directories(p);
    return p;
  }

 private:
  std::string path_;
};

}  // namespace tipfs::testing
