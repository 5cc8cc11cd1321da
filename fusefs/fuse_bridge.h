// FuseBridge: the libfuse low-level operations table. Each handler is thin: it unpacks the
// request, calls one FileSystem (or ControlFiles / HintIoctls) operation, and sends exactly one
// reply. Nothing throws across this boundary.
#pragma once

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include "fusefs/control_files.h"
#include "fusefs/filesystem.h"
#include "fusefs/mount_options.h"
#include "util/statistics.h"

namespace tipfs::fusefs {

class FuseRing;
class HintIoctls;

// The most the kernel reads ahead for the page cache in one request (max_readahead at INIT; the
// daemon raises the mount's read_ahead_kb to match, fusefs/kernel_readahead.h).
inline constexpr uint32_t kKernelReadaheadBytes = 1024 * 1024;

class FuseBridge {
 public:
  // REQUIRES: everything passed outlives the bridge. `hints` may be null (ioctls then fail
  // with ENOTTY), `statistics` too (nothing is counted).
  FuseBridge(FileSystem* fs, ControlFiles* control, HintIoctls* hints, Statistics* statistics,
             const MountOptions& options);

  // The operations table; userdata for fuse_session_new must be this bridge.
  static const fuse_lowlevel_ops* Operations();

  FileSystem* fs() const { return fs_; }
  ControlFiles* control() const { return control_; }
  HintIoctls* hints() const { return hints_; }
  Statistics* statistics() const { return statistics_; }
  const MountOptions& options() const { return options_; }
  // The io_uring transport when the mount uses one (set before the session serves).
  FuseRing* ring() const { return ring_; }
  void set_ring(FuseRing* ring) { ring_ = ring; }

 private:
  FileSystem* fs_;
  ControlFiles* control_;
  HintIoctls* hints_;
  Statistics* statistics_;
  MountOptions options_;
  FuseRing* ring_ = nullptr;
};

}  // namespace tipfs::fusefs
