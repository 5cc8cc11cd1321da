// MountOptions: everything `tipfs mount` can set, as a plain struct (RocksDB style). Each field
// says its default and whether it can change while mounted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// When a read moves a file's atime (the kernel leaves it to a FUSE daemon).
enum class AtimeMode {
  kRelatime,   // when atime is not newer than mtime or ctime, or a day old (the default)
  kEveryRead,  // strictatime
  kNever,      // noatime, and every read-only mount
};

// How the daemon reads the backing objects (tipfs caches the data itself, so the backing file
// system's page cache holds it twice unless reads bypass it).
enum class BackingIo {
  // direct on real disks, buffered under --disk-model: an emulated disk is the model, and the
  // real device under the backing directories would otherwise time itself into every read.
  kAuto,
  kDirect,    // O_DIRECT for aligned reads where the backing file system supports it
  kBuffered,  // through the backing file system's page cache
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
  // Generic mount flags the kernel enforces (ro, nosuid, nodev, noexec, sync, dirsync and their
  // opposites), as libfuse's mount takes them. Fixed at mount.
  std::vector<std::string> kernel_flags;
  bool read_only = false;  // "ro" among kernel_flags: nothing changes on disk, atime included
  AtimeMode atime = AtimeMode::kRelatime;  // fixed at mount
  // "[ADDRESS:]PORT" to serve /metrics over HTTP (ADDRESS defaults to 127.0.0.1); empty: none.
  std::string metrics_listen;
  BackingIo backing_io = BackingIo::kAuto;  // fixed at mount
  cache::CacheOptions cache;                // see the field comments there
  uint32_t fuse_threads = 16;               // most FUSE worker threads; fixed at mount
  // Take requests over io_uring (fusefs/fuse_ring.h) instead of reading /dev/fuse; needs a kernel
  // that offers it. Fixed at mount.
  bool fuse_io_uring = false;
  // RADOS disks: how long one operation waits for the cluster before it fails with EIO (unless
  // the conf file sets rados_osd_op_timeout). Fixed at mount.
  int64_t rados_timeout_ns = int64_t{30} * 1000 * 1000 * 1000;
};

}  // namespace tipfs::fusefs
