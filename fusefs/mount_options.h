// MountOptions: everything `tipfs mount` can set, as a plain struct (RocksDB style). Each field
// says its default and whether it can change while mounted.
#pragma once

#include <cstdint>
#include <string>

#include "cache/file_cache.h"

namespace tipfs::fusefs {

// How file data is cached above the daemon.
enum class DataCacheMode {
  // The kernel page cache sits on top of the daemon's cache: shared mmap works and repeated reads
  // never leave the kernel; the daemon sees page-cache misses (which is when hinted blocks are
  // consumed). The default, because it keeps every POSIX program working.
  kKernel,
  // FOPEN_DIRECT_IO: every read reaches the daemon, so hint consumption is exact; shared writable
  // mmap is refused by this libfuse (3.14).
  kDirect,
};

struct MountOptions {
  std::string disk;        // any disk of the volume
  std::string mountpoint;  // an existing directory that is not a mount point yet
  bool foreground = false;
  bool allow_other = false;  // let other users in (needs root or user_allow_other)
  DataCacheMode data_cache = DataCacheMode::kKernel;  // fixed at mount
  // Kernel attribute and entry cache lifetime. tipfs is the only writer of its volume, so a long
  // timeout is safe and saves a round trip per stat. Fixed at mount.
  double attr_timeout_seconds = 10.0;
  // `PROFILE[,key=value...]` for the emulated disk array; "none" = real timing. Changeable.
  std::string disk_model = "none";
  cache::CacheOptions cache;   // see the field comments there
  uint32_t fuse_threads = 16;  // most FUSE worker threads; fixed at mount
  // RADOS disks: how long one operation waits for the cluster before it fails with EIO (unless
  // the conf file sets rados_osd_op_timeout). Fixed at mount.
  int64_t rados_timeout_ns = int64_t{30} * 1000 * 1000 * 1000;
};

}  // namespace tipfs::fusefs
