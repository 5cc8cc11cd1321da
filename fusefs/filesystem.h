// FileSystem: the POSIX operations of tipfs, independent of libfuse. Each operation returns a
// Status or Result; the FUSE bridge (fuse_bridge.cc) turns them into exactly one reply. Tests call
// this class directly over MemDisks and a temporary metadata store, without a mount.
//
// Metadata goes to MetaStore (one atomic batch per operation; the size and times a write(2)
// changes stay in its in-memory inode until the next batch, fsync, the last close or its
// write-back timer, never written after a later operation), file data through the FileCache
// (which owns coherency with the disks). Lifetime of file data: an inode whose link count reaches
// 0 is an orphan (recorded in the same batch); its data is reclaimed at the last close, or at
// the next mount after a crash (Recover).
//
// Thread-safe: FUSE calls every method from many threads at once.
#pragma once

#include <sys/statvfs.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/file_cache.h"
#include "fusefs/inode_table.h"
#include "fusefs/mount_options.h"
#include "meta/meta_store.h"
#include "stripe/volume.h"
#include "util/clock.h"
#include "util/status.h"

namespace tipfs::fusefs {

using meta::Ino;

// Who is asking (from the FUSE request context).
struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
  // Thread id. 0: no process (the daemon itself, or the kernel writing back pages): such a writer
  // keeps set-id bits, as the kernel's own writeback does.
  uint32_t pid = 0;
};

struct OpenedFile {
  meta::Inode inode;
  uint64_t handle = 0;
};

class FileSystem {
 public:
  // REQUIRES: all three outlive the FileSystem.
  FileSystem(stripe::Volume* volume, meta::MetaStore* meta, cache::FileCache* cache);

  // Reclaims the data of orphans left by a crash. Call once before serving requests.
  Status Recover();

  // Entry-returning operations take one kernel lookup reference on success.
  Result<meta::Inode> Lookup(Ino parent, std::string_view name);
  void Forget(Ino ino, uint64_t count);
  Result<meta::Inode> GetAttr(Ino ino);
  Result<meta::Inode> SetAttr(Ino ino, meta::AttrChange change);
  // The same on behalf of `caller`, taking set-id bits away as the kernel does: a truncate by a
  // caller without CAP_FSETID clears S_ISUID (and S_ISGID when group-executable); a change of
  // owner or group clears S_ISUID whoever asks, and S_ISGID as setattr_should_drop_sgid does.
  Result<meta::Inode> SetAttr(const Caller& caller, Ino ino, meta::AttrChange change);

  Result<meta::Inode> MakeNode(const Caller& caller, Ino parent, std::string_view name,
                               uint32_t mode, uint64_t rdev, std::string_view symlink_target = {});
  Result<meta::Inode> Link(Ino ino, Ino new_parent, std::string_view new_name);
  Status Unlink(Ino parent, std::string_view name);
  Status Rmdir(Ino parent, std::string_view name);
  Status Rename(Ino parent, std::string_view name, Ino new_parent, std::string_view new_name,
                unsigned flags);
  Result<std::string> ReadLink(Ino ino);

  // open(2) of an existing inode; O_TRUNC truncates (as `caller`: see SetAttr for set-id bits).
  Result<OpenedFile> Open(Ino ino, int flags) { return Open(Caller{}, ino, flags); }
  Result<OpenedFile> Open(const Caller& caller, Ino ino, int flags);
  // Creates and opens a regular file (EEXIST if it exists: the kernel handles O_EXCL).
  Result<OpenedFile> Create(const Caller& caller, Ino parent, std::string_view name, uint32_t mode,
                            int flags);
  Result<size_t> Read(const cache::ReadContext& context, Ino ino, uint64_t offset, size_t length,
                      char* out);
  // The same without blocking and without copying: `done` runs exactly once with references to
  // the cache's buffers, inline on a hit, else from the disk completion (FUSE replies from it).
  void ReadAsync(const cache::ReadContext& context, Ino ino, uint64_t offset, size_t length,
                 std::function<void(Result<cache::ReadData>)> done);
  // A write by `caller`: before the data lands, a writer without CAP_FSETID takes S_ISUID away,
  // and S_ISGID when the file is group-executable (the kernel's should_remove_suid), so no one
  // can run a set-id program whose bytes another user changed. The 4-argument form writes as the
  // daemon (Caller{}), which keeps them.
  Result<size_t> Write(Ino ino, uint64_t offset, const char* data, size_t length) {
    return Write(Caller{}, ino, offset, data, length);
  }
  Result<size_t> Write(const Caller& caller, Ino ino, uint64_t offset, const char* data,
                       size_t length);
  Status Fsync(Ino ino, bool data_only);
  // The last close of an unlinked file reclaims its data.
  Status Release(Ino ino);

  // Whether unlinking `name` in `parent`, or releasing `ino`, would make the calling thread wait
  // for the metadata store's fdatasync: it frees the data of a regular file that has some, whose
  // last link goes and that nothing has open, and makes the unlink durable first (Reclaim). A
  // guess taken before the request runs, for the FUSE ring, which serves such requests on a
  // worker (fusefs/ring_workers.h); a concurrent change can make it wrong, at a cost in latency.
  bool UnlinkWouldSync(Ino parent, std::string_view name);
  bool ReleaseWouldSync(Ino ino);

  Result<std::vector<meta::DirEntry>> ListDir(Ino ino);

  Result<std::string> GetXattr(Ino ino, std::string_view name);
  Status SetXattr(Ino ino, std::string_view name, std::string_view value, int flags);
  Result<std::vector<std::string>> ListXattrs(Ino ino);
  Status RemoveXattr(Ino ino, std::string_view name);

  // Space (fusefs/space.cc): statfs counts each backing store once however many disks share
  // it; AllocatedBlocks is st_blocks (512-byte units) from what the objects really hold, asking
  // every disk of every given inode at once (one round trip for a READDIRPLUS reply on RADOS
  // disks, not one per entry and disk); Seek is lseek(2) SEEK_DATA / SEEK_HOLE over the objects'
  // data and holes (ENXIO at or past the end).
  Result<struct statvfs> StatFs();
  uint64_t AllocatedBlocks(const meta::Inode& inode);
  std::vector<uint64_t> AllocatedBlocks(const std::vector<const meta::Inode*>& inodes);
  Result<uint64_t> Seek(Ino ino, uint64_t offset, int whence);
  // Makes everything durable (unmount).
  Status SyncAll();

  // True when a read now would move the inode's atime (relatime by default; the mount's atime
  // option). Set the mode before serving requests.
  bool AtimeDue(const meta::Inode& inode) const;
  void set_atime_mode(AtimeMode mode) { atime_mode_ = mode; }

  meta::MetaStore* meta() const { return meta_; }
  cache::FileCache* cache() const { return cache_; }
  stripe::Volume* volume() const { return volume_; }
  InodeTable* inodes() { return &inodes_; }

  // Called with an inode whose attributes the daemon changed on its own (a write took set-id bits
  // away), so that a cached copy elsewhere (the kernel's) is dropped. Set before serving requests.
  void SetAttributeListener(std::function<void(Ino)> listener) {
    attribute_listener_ = std::move(listener);
  }

 private:
  // Frees the data and the record of an inode with no links left, unless it is still open.
  Status ReclaimIfUnused(const meta::Inode& inode);
  // The same after the namespace operation that dropped its last link has succeeded: a failure
  // leaves the inode an orphan for the next mount instead of failing that operation.
  void ReclaimAfterNamespaceChange(const meta::Inode& inode);
  // Whether freeing the data of `inode` (no links left) waits for its unlink to be durable: a
  // regular file with bytes to lose. Symlinks keep their target in the store, directories nothing.
  static bool SyncsBeforeFreeing(const meta::Inode& inode);
  // With sync_unlink_first, makes the metadata durable before a non-empty file's data goes.
  // `state`: the inode's InodeState when the caller took it before the table let go of the
  // inode (Forget); null: the table's.
  Status Reclaim(Ino ino, bool sync_unlink_first = true,
                 std::shared_ptr<InodeState> state = nullptr);
  void UpdateAtime(const meta::Inode& inode);
  static Status DataError(const Status& status);
  // Changes the file's length in the objects and in the metadata, in the crash-safe order.
  // `clear_setid`: take set-id bits away in the same batch (a truncate by an unprivileged caller).
  Result<meta::Inode> Resize(const meta::Inode& inode, uint64_t new_size, meta::Time now,
                             bool clear_setid = false);
  Result<meta::Inode> ApplyAttrChange(Ino ino, meta::AttrChange change);
  // Remembers whether the inode may have set-id bits (InodeState::may_have_setid).
  void NoteSetIdBits(const meta::Inode& inode);
  // Before a write by `caller`: takes the set-id bits away if the writer may not keep them.
  Status DropSetIdBeforeWrite(const Caller& caller, Ino ino, InodeState* state);

  stripe::Volume* const volume_;
  meta::MetaStore* const meta_;
  cache::FileCache* const cache_;
  InodeTable inodes_;
  std::atomic<uint64_t> next_handle_{1};
  AtimeMode atime_mode_ = AtimeMode::kRelatime;  // constant once requests are served
  std::function<void(Ino)> attribute_listener_;  // set before requests are served
};

}  // namespace tipfs::fusefs
