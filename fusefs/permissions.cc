#include "fusefs/permissions.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

namespace tipfs::fusefs {

Credentials CredentialsOf(uint32_t uid, uint32_t gid, uint32_t tid) {
  Credentials who{uid, gid, {}};
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%u/status", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return who;
  std::string text(4096, '\0');
  ssize_t n = read(fd, text.data(), text.size());
  close(fd);
  if (n <= 0) return who;
  text.resize(static_cast<size_t>(n));
  size_t pos = text.find("\nGroups:");
  if (pos != std::string::npos) {
    std::istringstream groups(text.substr(pos + 8, text.find('\n', pos + 1) - pos - 8));
    gid_t group;
    while (groups >> group) who.groups.push_back(group);
  }
  // "CapEff:\t000001ffffffffff": the effective capabilities, a hex bit mask.
  pos = text.find("\nCapEff:");
  if (pos != std::string::npos) {
    uint64_t effective = std::strtoull(text.c_str() + pos + 8, nullptr, 16);
    who.fsetid = (effective >> CAP_FSETID) & 1;
  }
  return who;
}

bool InGroup(const Credentials& who, uint32_t gid) {
  return who.gid == gid || std::find(who.groups.begin(), who.groups.end(), gid) != who.groups.end();
}

bool MayAccess(const meta::Inode& inode, const Credentials& who, int mask) {
  if (who.uid == 0) {
    // Root bypasses read/write checks; execute/search needs some x bit on non-directories.
    if ((mask & X_OK) && !S_ISDIR(inode.mode) && !(inode.mode & 0111)) return false;
    return true;
  }
  uint32_t bits;
  if (who.uid == inode.uid) {
    bits = (inode.mode >> 6) & 7;
  } else if (InGroup(who, inode.gid)) {
    bits = (inode.mode >> 3) & 7;
  } else {
    bits = inode.mode & 7;
  }
  return (static_cast<uint32_t>(mask) & ~bits & 7) == 0;
}

}  // namespace tipfs::fusefs
