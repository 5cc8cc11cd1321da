// HintIoctls: the daemon side of include/tipfs/hint.h. It validates each ioctl completely
// (version, sizes, ranges, paths, permissions, caps) before anything changes, resolves files to
// inodes and clips ranges to end of file, and hands the cache resolved hints. It also keeps the
// registry of speculating processes (TIPFS_IOC_SPEC_ATTACH) that decides how their reads behave.
//
// Streams: TIPFS_STREAM_SELF is the caller's process. An explicit stream id below 2^32 names a
// process and is accepted only for the caller itself or its parent (libtipspec's child hints
// for its parent); ids from 2^32 up are the caller's own named streams, kept apart per process.
// A process may share one of its streams with its descendants (TIPFS_IOC_SHARE): the reads of a
// process consume a shared stream when the process runs as the sharer's uid and descends from it
// (the nearest sharing ancestor counts); see docs/DESIGN.md "Which reads consume which hints".
//
// Thread-safety: all methods may be called from any FUSE thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "cache/file_cache.h"
#include "fusefs/filesystem.h"
#include "fusefs/permissions.h"
#include "util/mutex.h"

namespace tipfs::fusefs {

struct IoctlCaller {
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t pid = 0;  // thread id
};

class HintIoctls {
 public:
  // REQUIRES: fs and cache outlive this object. `mountpoint` is canonical (absolute path hints
  // must lie under it).
  HintIoctls(FileSystem* fs, cache::FileCache* cache, std::string mountpoint);
  ~HintIoctls();

  // Handles one ioctl on inode `ino` opened with `open_flags`. On success *out holds the reply
  // (empty for commands that return nothing). Errors (see tipfs_hint(3)): ENOTTY unknown command,
  // EPROTO unknown version, EINVAL bad size/source/count/range/record, EBADF file not open for
  // reading, ENOENT/ENOTDIR/EACCES/EISDIR/ELOOP for paths, EPERM for another process's stream,
  // EDQUOT/ENOBUFS over a cap.
  Status Handle(const IoctlCaller& caller, uint64_t ino, int open_flags, unsigned int command,
                const void* in, size_t in_size, size_t out_size, std::string* out);

  // How a read from thread `tid` of user `uid` through a descriptor with `file_flags` (the
  // kernel's f_flags) is to be served: speculative when its process attached; with the process
  // whose shared streams it may consume (kNoUid: none).
  static constexpr uint32_t kNoUid = UINT32_MAX;
  cache::ReadContext ReadContextFor(uint32_t tid, uint32_t uid = kNoUid, int file_flags = 0);

  // Speculating processes currently attached (for stats).
  size_t attached() const;

 private:
  struct Attachment {
    int pidfd = -1;  // tells whether that process is still the one that attached
    uint64_t stream = 0;
    uint32_t epoch = 0;
    bool wait_for_data = false;
    cache::HintSource source = cache::HintSource::kSpeculative;  // or kSpeculativeTainted
  };

  Result<uint64_t> StreamFor(const IoctlCaller& caller, uint64_t requested) const;
  Status HintFd(const IoctlCaller& caller, uint64_t ino, int open_flags, const void* in);
  Status HintPaths(const IoctlCaller& caller, const void* in);
  Status Cancel(const IoctlCaller& caller, const void* in);
  Status Query(const IoctlCaller& caller, const void* in, std::string* out);
  Status Attach(const IoctlCaller& caller, const void* in);
  Status Detach(const IoctlCaller& caller);
  Status Share(const IoctlCaller& caller, const void* in);
  // The nearest ancestor of `process` that shares a stream, if it runs as `uid` (else 0).
  uint32_t SharingAncestor(uint32_t process, uint32_t uid);
  // The inode at `path` (absolute under the mount, or relative to its root), with search
  // permission on every directory on the way; symlinks inside the mount are followed.
  Result<meta::Inode> ResolvePath(std::string_view path, const Credentials& who);

  FileSystem* const fs_;
  cache::FileCache* const cache_;
  const std::string mountpoint_;

  mutable Mutex mu_;
  std::unordered_map<uint32_t, Attachment> attached_ GUARDED_BY(mu_);  // by process id
  // attached_.size(), readable without mu_: the read path skips the lock when nobody speculates.
  std::atomic<size_t> attached_count_{0};

  struct Sharer {
    int pidfd = -1;  // tells whether that process is still the one that shared
    uint32_t uid = 0;
  };
  // A reader's nearest sharing ancestor, found by walking /proc's parent links; walked again
  // when the sharers change or after kLineageTtl (a reused process id may be someone else).
  struct Lineage {
    uint32_t sharer = 0;  // 0: none
    uint64_t generation = 0;
    int64_t found_ns = 0;
  };
  std::unordered_map<uint32_t, Sharer> sharers_ GUARDED_BY(mu_);   // by process id
  std::unordered_map<uint32_t, Lineage> lineage_ GUARDED_BY(mu_);  // by reading process
  uint64_t sharers_generation_ GUARDED_BY(mu_) = 0;
  std::atomic<size_t> sharer_count_{0};  // sharers_.size(), as attached_count_
};

// ReadContextFor for a bridge that may have no hint handler.
cache::ReadContext ReadContextFor(uint32_t tid, uint32_t uid, HintIoctls* hints,
                                  int file_flags = 0);

}  // namespace tipfs::fusefs
