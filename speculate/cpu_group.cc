#include "speculate/cpu_group.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

namespace tipfs::spec {

namespace {

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, separator)) out.push_back(item);
  return out;
}

bool HasToken(const std::string& list, const std::string& token) {
  for (const std::string& item : Split(list, ',')) {
    if (item == token) return true;
  }
  return false;
}

bool ReadText(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

// Writes the whole of `text` to an existing file (a cgroup's control file).
Status WriteControl(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + path);
  const ssize_t n = write(fd, text.data(), text.size());
  const int saved = errno;
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    errno = n < 0 ? saved : EIO;
    return ErrnoStatus("write '" + text + "' to " + path);
  }
  return Status::OK();
}

// The mount of a hierarchy in /proc/self/mountinfo: where it is and which part of the
// hierarchy it shows (its root; "/" unless a container was given a subtree).
struct HierarchyMount {
  std::string root;
  std::string mountpoint;
};

// The first mount whose type is `fstype` (and, for v1, whose options name the cpu controller).
bool FindMount(const std::string& mountinfo, const std::string& fstype, HierarchyMount* out) {
  for (const std::string& line : Split(mountinfo, '\n')) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    const std::vector<std::string> before = Split(line.substr(0, dash), ' ');
    const std::vector<std::string> after = Split(line.substr(dash + 3), ' ');
    if (before.size() < 5 || after.size() < 3 || after[0] != fstype) continue;
    if (fstype == "cgroup" && !HasToken(after[2], "cpu")) continue;
    *out = {before[3], before[4]};
    return true;
  }
  return false;
}

// The calling process's path in a hierarchy, from /proc/self/cgroup: the v1 line whose
// controllers include cpu, or the v2 line ("0::PATH").
bool FindPath(const std::string& cgroups, bool v2, std::string* out) {
  for (const std::string& line : Split(cgroups, '\n')) {
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const bool match =
        v2 ? line.compare(0, first, "0") == 0 && controllers.empty() : HasToken(controllers, "cpu");
    if (!match) continue;
    *out = line.substr(second + 1);
    return true;
  }
  return false;
}

std::string Join(const HierarchyMount& mount, std::string path) {
  if (mount.root != "/" && path.compare(0, mount.root.size(), mount.root) == 0) {
    path = path.substr(mount.root.size());
  }
  if (path.empty() || path == "/") return mount.mountpoint;
  return mount.mountpoint + (path[0] == '/' ? "" : "/") + path;
}

}  // namespace

Result<std::string> CpuCgroupDirectory(const std::string& mountinfo, const std::string& cgroups,
                                       bool* v2) {
  HierarchyMount mount;
  std::string path;
  if (FindMount(mountinfo, "cgroup", &mount) && FindPath(cgroups, false, &path)) {
    *v2 = false;
    return Join(mount, path);
  }
  if (FindMount(mountinfo, "cgroup2", &mount) && FindPath(cgroups, true, &path)) {
    *v2 = true;
    return Join(mount, path);
  }
  return Status::NotFound("no cgroup hierarchy with the cpu controller is mounted");
}

Result<std::unique_ptr<CpuGroup>> CpuGroup::Enter() {
  std::string mountinfo, cgroups;
  if (!ReadText("/proc/self/mountinfo", &mountinfo) || !ReadText("/proc/self/cgroup", &cgroups)) {
    return Status::NotFound("cannot read /proc/self/mountinfo or /proc/self/cgroup");
  }
  bool v2 = false;
  Result<std::string> parent = CpuCgroupDirectory(mountinfo, cgroups, &v2);
  if (!parent.ok()) return parent.status();
  const std::string path = *parent + "/tipfs-run-" + std::to_string(getpid());
  // A group left by an earlier run of the same pid that was killed: empty, so it goes.
  if (mkdir(path.c_str(), 0755) != 0 &&
      !(errno == EEXIST && rmdir(path.c_str()) == 0 && mkdir(path.c_str(), 0755) == 0)) {
    return ErrnoStatus("mkdir " + path);
  }
  std::unique_ptr<CpuGroup> group(new CpuGroup(*parent, path));
  group->caller_inside_ = false;  // until the move below succeeds
  if (v2) {
    // cgroup.controllers lists what the parent enabled for its children: "cpu io memory".
    std::string controllers;
    bool has_cpu = false;
    if (ReadText(path + "/cgroup.controllers", &controllers)) {
      for (char& c : controllers) c = c == '\n' ? ' ' : c;
      for (const std::string& name : Split(controllers, ' ')) has_cpu |= name == "cpu";
    }
    if (!has_cpu) {
      return Status::FromErrno(EOPNOTSUPP,
                               "cgroup v2: the cpu controller is not enabled below " + *parent);
    }
  }
  Status moved = WriteControl(path + "/cgroup.procs", std::to_string(getpid()));
  if (!moved.ok()) return moved;
  group->caller_inside_ = true;
  return group;
}

void CpuGroup::LeaveCaller() {
  if (!caller_inside_) return;
  (void)WriteControl(parent_ + "/cgroup.procs", std::to_string(getpid()));
  caller_inside_ = false;
}

CpuGroup::~CpuGroup() {
  LeaveCaller();
  rmdir(path_.c_str());  // EBUSY only if a process escaped the launcher's wait: it stays listed
}

}  // namespace tipfs::spec
