// The kernel's table of mounts, from /proc/self/mountinfo.
#pragma once

#include <istream>
#include <string>
#include <vector>

namespace tipfs {

struct MountEntry {
  std::string mountpoint;  // unescaped, canonical
  std::string fstype;      // "ext4", "fuse.tipfs", ...
  std::string source;      // device or fsname
};

std::vector<MountEntry> ReadMountTable();
// The table in mountinfo's format; lines it cannot read are skipped.
std::vector<MountEntry> ParseMountInfo(std::istream& in);

// realpath(path), or `path` itself when it cannot be resolved (a dead FUSE mount answers
// ENOTCONN, and the caller still wants to find it in the table).
std::string CanonicalPath(const std::string& path);

}  // namespace tipfs
