// The tipfs daemon: opens a volume, mounts it, serves FUSE requests until it is unmounted or
// signalled, then makes everything durable and exits. Used by `tipfs mount` (in the background
// child, or in the foreground).
#pragma once

#include <functional>
#include <string>

#include "fusefs/mount_options.h"
#include "stripe/volume.h"
#include "util/status.h"

namespace tipfs::fusefs {

// Checks that `mountpoint` is an existing directory and not already a mount point; the error
// names the path and the problem.
Status CheckMountpoint(const std::string& mountpoint);

// Makes what a volume stores private to its owner: every disk's objects/ and its fan-out
// directories 0700, disk 0's meta/ 0700 and each file in it 0600 (file names and contents are in
// there). mkfs calls it, and every mount, which so repairs volumes made with looser modes; the
// daemon's umask (077) keeps the files it creates later private. The error names the path.
Status MakeVolumePrivate(const stripe::Label& label);

// Where a running daemon of the volume whose disk 0 is `disk0` records its process id.
std::string PidFilePath(const std::string& disk0);

// Serves the mount until it ends. `ready` runs exactly once: with OK as soon as the mount is
// usable, or with the error that stopped it from starting (nothing on disk changed then).
// Returns the status of the whole run.
Status ServeMount(const MountOptions& options, const std::function<void(const Status&)>& ready);

}  // namespace tipfs::fusefs
