#include "util/mount_table.h"

#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tipfs {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo (octal).
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      out.push_back(static_cast<char>(std::stoi(field.substr(i + 1, 3), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

}  // namespace

std::vector<MountEntry> ReadMountTable() {
  std::vector<MountEntry> table;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // "id parent maj:min root mountpoint options [optional...] - fstype source superoptions"
    std::istringstream fields(line);
    std::vector<std::string> parts;
    std::string part;
    while (fields >> part) parts.push_back(part);
    size_t dash = 6;
    while (dash < parts.size() && parts[dash] != "-") ++dash;
    if (parts.size() < 5 || dash + 2 >= parts.size()) continue;
    table.push_back(MountEntry{Unescape(parts[4]), parts[dash + 1], Unescape(parts[dash + 2])});
  }
  return table;
}

std::string CanonicalPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
}

}  // namespace tipfs
