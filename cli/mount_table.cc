#include "cli/mount_table.h"

#include "util/mount_table.h"

namespace tipfs::cli {

std::optional<TipfsMount> FindTipfsMount(const std::string& path) {
  std::string canonical = CanonicalPath(path);
  for (const MountEntry& entry : ReadMountTable()) {
    if (entry.fstype == "fuse.tipfs" && entry.mountpoint == canonical) {
      return TipfsMount{entry.mountpoint, entry.source};
    }
  }
  return std::nullopt;
}

std::vector<TipfsMount> AllTipfsMounts() {
  std::vector<TipfsMount> mounts;
  for (const MountEntry& entry : ReadMountTable()) {
    if (entry.fstype == "fuse.tipfs") mounts.push_back(TipfsMount{entry.mountpoint, entry.source});
  }
  return mounts;
}

}  // namespace tipfs::cli
