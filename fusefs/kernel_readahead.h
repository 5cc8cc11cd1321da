// The kernel's read-ahead window for the mount (kernel data-cache mode).
//
// FUSE takes the smaller of the daemon's max_readahead (1 MiB, fuse_bridge.cc OnInit) and its
// backing device's read_ahead_kb, which every new FUSE superblock starts at 128 KiB. So a
// sequential reader of the page cache sent the daemon one 128 KiB request per 128 KiB: eight
// FUSE round trips per MiB where direct mode sends one (bench/fast cpu-per-gib). The device's
// value lives in /sys/class/bdi/MAJOR:MINOR/read_ahead_kb, one per mount, gone with it.
//
// Called once, by the daemon's main thread, after the mount and before the session loop.
#pragma once

#include <cstdint>
#include <istream>
#include <string>

#include "util/status.h"

namespace tipfs::fusefs {

// "MAJOR:MINOR" of the file system mounted at `mountpoint` (canonical, unescaped) in a table in
// /proc/self/mountinfo's format; the last such line wins (it is the visible mount). "" if none.
std::string MountDeviceOf(std::istream& mountinfo, const std::string& mountpoint);

// Raises the read-ahead window of the file system mounted at `mountpoint` to `kib` (never
// lowers it). Without touching the mount itself: a stat of it would wait for the session loop.
// Errors: ENOENT when the mount is not in /proc/self/mountinfo; the errno of the sysfs write
// (EACCES for a daemon that is not root).
Status RaiseKernelReadahead(const std::string& mountpoint, uint32_t kib);

}  // namespace tipfs::fusefs
