// Reading /proc/self/mountinfo: which tipfs mounts exist and where their volumes live.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tipfs::cli {

struct TipfsMount {
  std::string mountpoint;  // canonical
  std::string disk0;       // the volume's first disk (the mount's source / fsname)
};

// The tipfs mount at `path` (after realpath), or nullopt when nothing of tipfs is mounted there.
std::optional<TipfsMount> FindTipfsMount(const std::string& path);
// Every tipfs mount this process can see.
std::vector<TipfsMount> AllTipfsMounts();

}  // namespace tipfs::cli
