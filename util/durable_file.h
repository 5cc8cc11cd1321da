// Small files that must survive a power loss once written (a disk's label, the daemon's pid
// file): written whole to `<path>.tmp`, fsync'ed, renamed over `path`, and the directory
// fsync'ed, so a reader finds the old contents or the new, never a torn mix or an empty file.
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace tipfs {

// Errors name the step and the path ("write /d/tipfs-label.tmp: No space left on device"); a
// short write is retried for the rest, and a write that makes no progress is EIO, never a
// stale errno.
Status WriteFileDurably(const std::string& path, std::string_view contents);

}  // namespace tipfs
