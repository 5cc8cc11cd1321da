// Mkfs: makes a new volume over directories and RADOS pools (stripe/disk_name.h), after checking
// every disk, and changes nothing when a check fails. Errors are one line naming the disk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stripe/label.h"
#include "stripe/rados_cluster.h"

namespace tipfs::stripe {

struct MkfsOptions {
  std::vector<std::string> disks;  // 1..64 existing directories or rados: names, in disk order
  uint32_t stripe_unit = kDefaultStripeUnit;
  // A local directory for the metadata store; empty: the first directory disk. A volume whose
  // disks are all RADOS pools needs one.
  std::string meta_dir;
  uint32_t rados_object_size = kDefaultRadosObjectSize;
  RadosClientOptions rados;
  // Without force, a disk that already holds a volume, or anything else, is refused.
  bool force = false;
};

// Writes a fresh label (and an empty objects/ directory on directory disks) on every disk, and the
// home copy of the label in a metadata directory that is not a disk; the caller then creates the
// metadata store at MetaPath(label). With force, an existing tipfs volume on those disks (labels,
// objects, meta/) is erased first; anything else is left. tipfs objects without a tipfs label are
// refused even with force; lost+found is allowed.
// Errors: EINVAL (options, the same disk twice, no metadata directory for a RADOS-only volume),
// ENOENT/ENOTDIR (missing directory or pool), EACCES, EEXIST (already a volume), ENOTEMPTY
// (other files or objects), EBUSY (a RADOS disk mounted by someone), EIO (cluster unreachable).
// Returns the label written to disk 0.
Result<Label> Mkfs(const MkfsOptions& options);

}  // namespace tipfs::stripe
