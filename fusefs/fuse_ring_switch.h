// Whether the running kernel serves FUSE over io_uring (fusefs/fuse_ring.h): fuse's module
// parameter enable_uring, Y or N, present from Linux 6.14. Header-only, for the daemon and for
// the tests that mount with the ring.
#pragma once

#include <cerrno>
#include <fstream>
#include <string>

#include "util/status.h"

namespace tipfs::fusefs {

inline constexpr const char* kFuseRingSwitch = "/sys/module/fuse/parameters/enable_uring";

// OK when the kernel offers the ring; otherwise an error that says how to turn it on.
inline Status CheckKernelOffersFuseRing(const std::string& switch_path = kFuseRingSwitch) {
  std::string value;
  std::ifstream(switch_path) >> value;
  if (value == "Y") return Status::OK();
  if (value.empty()) {
    return Status::FromErrno(EOPNOTSUPP, "this kernel has no FUSE over io_uring (" + switch_path +
                                             " is missing; it needs Linux 6.14 or later)");
  }
  return Status::FromErrno(
      EOPNOTSUPP, "FUSE over io_uring is off in this kernel: as root, echo Y > " + switch_path);
}

}  // namespace tipfs::fusefs
