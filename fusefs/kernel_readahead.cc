#include "fusefs/kernel_readahead.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

namespace tipfs::fusefs {
namespace {

// mountinfo escapes space, tab, newline and backslash in paths as \ooo (octal).
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    const auto octal = [&](size_t j) { return field[j] >= '0' && field[j] <= '7'; };
    if (field[i] == '\\' && i + 3 < field.size() && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                               (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

}  // namespace

std::string MountDeviceOf(std::istream& mountinfo, const std::string& mountpoint) {
  std::string found;
  std::string line;
  while (std::getline(mountinfo, line)) {
    // mount-id parent-id MAJOR:MINOR root mountpoint options ... - fstype source super-options
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    if (!(fields >> id >> parent >> device >> root >> point)) continue;
    if (Unescape(point) == mountpoint) found = device;
  }
  return found;
}

Status RaiseKernelReadahead(const std::string& mountpoint, uint32_t kib) {
  std::ifstream table("/proc/self/mountinfo");
  const std::string device = MountDeviceOf(table, mountpoint);
  if (device.empty()) {
    return Status::FromErrno(ENOENT, mountpoint + " is not in /proc/self/mountinfo");
  }
  const std::string path = "/sys/class/bdi/" + device + "/read_ahead_kb";
  uint32_t current = 0;
  if (std::ifstream in(path); !(in >> current)) return ErrnoStatus("read " + path);
  if (current >= kib) return Status::OK();
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + path);
  const std::string value = std::to_string(kib) + "\n";
  const bool written = write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
  const int err = errno;
  close(fd);
  if (!written) return ErrnoStatus("write " + path, err);
  return Status::OK();
}

}  // namespace tipfs::fusefs
