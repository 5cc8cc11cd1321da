#include "util/mount_table.h"

#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tipfs {
namespace {

bool IsOctalDigit(char c) { return c >= '0' && c <= '7'; }

// mountinfo escapes space, tab, newline and backslash as \ooo (octal). A backslash not followed
// by three octal digits is kept as it is.
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && IsOctalDigit(field[i + 1]) &&
        IsOctalDigit(field[i + 2]) && IsOctalDigit(field[i + 3])) {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

}  // namespace

std::vector<MountEntry> ReadMountTable() {
  std::ifstream in("/proc/self/mountinfo");
  return ParseMountInfo(in);
}

std::vector<MountEntry> ParseMountInfo(std::istream& in) {
  std::vector<MountEntry> table;
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
