// The kernel's table of mounts, from /proc/self/mountinfo.
#pragma once

#include <cerrno>
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

// True for the errors of a FUSE mount whose daemon is gone: ENOTCONN for a request made after the
// kernel aborted the connection, ECONNABORTED for one it had queued before (a call racing the
// daemon's death, e.g. while its other threads are still exiting).
inline bool DaemonGoneError(int err) { return err == ENOTCONN || err == ECONNABORTED; }

// realpath(path), or `path` itself when it cannot be resolved (a dead FUSE mount answers
// ENOTCONN, and the caller still wants to find it in the table).
std::string CanonicalPath(const std::string& path);

}  // namespace tipfs
