// MetaStore: the namespace and attributes of a tipfs volume, in RocksDB.
//
// Keys (all integers big-endian so RocksDB's order is numeric):
//   S                       superblock: format version, volume UUID, next inode number
//   I <ino>                 inode record (Inode below, encoded)
//   D <parent> <name>       directory entry -> child inode number and file type
//   L <ino>                 symlink target
//   X <ino> <name>          extended attribute value
//   O <ino>                 orphan: nlink reached 0; data objects still to be reclaimed
//
// Every mutating operation is one atomic WriteBatch, so a crash leaves the store either before
// or after each operation. Inode numbers come from a persistent counter and are never reused.
// An inode whose link count reaches 0 is marked orphan in the same batch; the file system
// reclaims its data at the last close (or at the next mount after a crash) and then calls
// DeleteInode. Thread-safe: reads run concurrently and are served from an in-memory inode cache
// (meta/inode_cache.h); mutations serialize on one mutex; RecordWrite takes only a cache shard.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"

namespace tipfs::meta {

using Ino = uint64_t;
constexpr Ino kRootIno = 1;
constexpr size_t kMaxNameLength = 255;

struct Time {
  int64_t sec = 0;
  int64_t nsec = 0;
  static Time Now();  // CLOCK_REALTIME
};

struct Inode {
  Ino ino = 0;
  uint32_t mode = 0;  // type and permission bits, as st_mode
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t nlink = 0;
  uint64_t size = 0;
  uint64_t rdev = 0;
  Ino parent = 0;  // directories only: the containing directory (root: itself)
  Time atime, mtime, ctime;
};

struct DirEntry {
  std::string name;
  Ino ino = 0;
  uint32_t type = 0;  // S_IFMT bits of the child's mode
};

// What a new node is made of. Directories get nlink 2 and bump the parent's nlink.
struct NewNode {
  uint32_t mode = 0;  // including the S_IFMT type
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t rdev = 0;
  std::string symlink_target;  // S_IFLNK only; becomes the size
  Time now;
};

// A setattr: only the fields whose flag is set change; ctime is set to `now` when anything does.
struct AttrChange {
  std::optional<uint32_t> mode;  // permission bits only; the type is kept
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::optional<uint64_t> size;  // also sets mtime = now
  std::optional<Time> atime;
  std::optional<Time> mtime;
  // Set-id bits a write, truncate or chown takes away (regular files only, after `mode`, in the
  // same batch): `clear_setid` clears S_ISUID, and S_ISGID when group-execute is set (a file
  // that is not group-executable keeps S_ISGID: it marks mandatory locking, not privilege);
  // `clear_setgid` clears S_ISGID whatever the group bits.
  bool clear_setid = false;
  bool clear_setgid = false;
  Time now;
};

struct Counts {
  uint64_t inodes = 0;  // live inodes, orphans included
};

// What the store has asked of RocksDB since it was opened (for tests and accounts of what an
// operation costs): point reads (Get), write batches, prefix scans (an iterator each).
struct Activity {
  uint64_t point_reads = 0;
  uint64_t batches = 0;
  uint64_t scans = 0;
};

// ---- Whole-store scans and repairs (fsck, crash recovery) -------------------------------------

// A record that does not decode, or a key of no known form.
struct DamagedRecord {
  std::string key;  // the raw key
  Status problem;   // Corruption naming the key and what is wrong
};

struct EntryRecord {
  Ino parent = 0;
  DirEntry entry;
};

// Everything in the store, read from one consistent view.
struct StoreScan {
  std::string volume_uuid;
  Ino next_ino = 0;                  // the superblock's counter
  uint64_t inode_count = 0;          // the superblock's count
  std::vector<Inode> inodes;         // by inode number
  std::vector<EntryRecord> entries;  // by parent, then name
  std::vector<Ino> orphans;          // orphan marks (the inode may be missing: fsck checks)
  std::vector<Ino> symlink_targets;  // inodes that have a symlink target record
  std::vector<Ino> xattr_owners;     // inodes that have at least one xattr, each once
  std::vector<DamagedRecord> damaged;
};

// A repair written by fsck as one atomic, synced batch. Nothing is checked: the caller (fsck)
// decides what is consistent. Deletions are applied before puts.
struct RepairBatch {
  std::vector<Inode> put_inodes;  // written whole
  // Deletes the inode record and everything keyed by the inode number: symlink target, xattrs,
  // orphan mark (also used for such records whose inode is missing). Directory entries *in* it
  // are not touched.
  std::vector<Ino> delete_inodes;
  std::vector<EntryRecord> put_entries;
  std::vector<std::pair<Ino, std::string>> delete_entries;  // (parent, name)
  std::vector<Ino> set_orphans;
  std::vector<Ino> clear_orphans;
  std::vector<std::string> delete_raw_keys;  // damaged records (DamagedRecord::key)
  std::optional<Ino> next_ino;               // superblock counter
  std::optional<uint64_t> inode_count;       // superblock count
  bool empty() const {
    return put_inodes.empty() && delete_inodes.empty() && put_entries.empty() &&
           delete_entries.empty() && set_orphans.empty() && clear_orphans.empty() &&
           delete_raw_keys.empty() && !next_ino && !inode_count;
  }
};

// RocksDB tuning for a store of small records. Read at Create/Open; fixed while the store is open.
struct MetaStoreOptions {
  // Uncompressed-block cache shared by all reads; holds the hot inodes and directories.
  size_t block_cache_bytes = 32 << 20;
  // Memtable size; a flush writes one L0 file of about this size.
  size_t write_buffer_bytes = 16 << 20;
  // Table files kept open (each holds its index and bloom filter in memory).
  int max_open_files = 512;
  // Flush + compaction threads; metadata is small, and the daemon's CPU belongs to the I/O path.
  int background_jobs = 2;
  // Inodes kept in memory (clean ones; those with attributes to write back come on top).
  size_t inode_cache_entries = 1 << 16;
  // How often attributes changed by writes are written back when nothing else wrote them
  // (fsync, a file's last close, any namespace change); 0: only then.
  int64_t write_back_interval_ms = 1000;
  // Called after each successful Sync(), on the thread that called it: crash tests observe the
  // points where metadata became durable. Empty by default.
  std::function<void()> after_sync;
  // The store was not closed cleanly (killed, or the power failed): the write-ahead log's last
  // record may be torn and recovery stops before it. When false (the default), any damaged log
  // record is corruption and Open refuses the store (EUCLEAN) rather than silently dropping the
  // records after it. Read at Open.
  bool after_unclean_shutdown = false;
};

class MetaStore {
 public:
  // Creates a new store for a volume at `path` with an empty root directory owned by uid/gid.
  // Fails (EEXIST) if a store is already there.
  static Result<std::unique_ptr<MetaStore>> Create(const std::string& path,
                                                   const std::string& volume_uuid, uint32_t uid,
                                                   uint32_t gid,
                                                   const MetaStoreOptions& options = {});
  // Opens an existing store. A store locked by a running mount fails with EBUSY and the message
  // "metadata store <path> is locked by a running mount"; a store of another volume (UUID
  // mismatch) with EINVAL; a damaged one with EUCLEAN naming what is damaged.
  static Result<std::unique_ptr<MetaStore>> Open(const std::string& path,
                                                 const std::string& volume_uuid,
                                                 const MetaStoreOptions& options = {});
  ~MetaStore();

  Result<Inode> Get(Ino ino);
  // ENOENT when absent; ENOTDIR when parent is not a directory; ENAMETOOLONG over 255 bytes.
  // "." and ".." resolve to the directory and its parent.
  Result<Inode> Lookup(Ino parent, std::string_view name);

  // Files, directories, symlinks, fifos, sockets, devices. EEXIST when the name is taken.
  Result<Inode> MakeNode(Ino parent, std::string_view name, const NewNode& node);
  // New name for an existing non-directory inode (EPERM for directories); nlink + 1.
  Result<Inode> Link(Ino ino, Ino new_parent, std::string_view new_name, Time now);
  // Removes a non-directory entry (EISDIR for a directory); returns the inode after nlink - 1.
  Result<Inode> Unlink(Ino parent, std::string_view name, Time now);
  // Removes an empty directory: ENOTEMPTY, ENOTDIR as rmdir(2). Returns the removed inode, which
  // (like any inode at nlink 0) is now an orphan: call DeleteInode when it is no longer open.
  Result<Inode> Rmdir(Ino parent, std::string_view name, Time now);
  // rename(2) / renameat2(2) with flags 0, RENAME_NOREPLACE or RENAME_EXCHANGE, and the errnos a
  // local file system gives (EINVAL for a directory moved into its own subtree, ENOTEMPTY,
  // EISDIR, ENOTDIR, EEXIST). When an existing target is replaced, returns it after nlink - 1
  // (a replaced directory: nlink 0).
  Result<std::optional<Inode>> Rename(Ino parent, std::string_view name, Ino new_parent,
                                      std::string_view new_name, unsigned flags, Time now);

  Result<Inode> SetAttr(Ino ino, const AttrChange& change);
  // After a write of [.., end): size = max(size, end); mtime = ctime = now. In memory: the
  // record is written back with the next mutation, WriteBack, Sync or the write-back timer,
  // always before any later operation's batch (so a crash keeps the operations' order).
  Result<Inode> RecordWrite(Ino ino, uint64_t end, Time now);
  // A read moved the access time: atime = now, in memory and written back as RecordWrite's
  // changes are (a crash may lose it, as with the lazytime mount option), so that a read never
  // waits for a metadata write.
  Result<Inode> RecordAccess(Ino ino, Time now);
  // Writes the attributes of RecordWrite and RecordAccess calls back now (a file's last close).
  Status WriteBack();
  Result<std::string> ReadLink(Ino ino);

  // All entries of a directory, sorted by name ("." and ".." are not stored).
  Result<std::vector<DirEntry>> ListDir(Ino dir);

  Result<std::string> GetXattr(Ino ino, std::string_view name);  // ENODATA when absent
  // flags: 0, XATTR_CREATE (EEXIST) or XATTR_REPLACE (ENODATA).
  Status SetXattr(Ino ino, std::string_view name, std::string_view value, int flags, Time now);
  Result<std::vector<std::string>> ListXattrs(Ino ino);
  Status RemoveXattr(Ino ino, std::string_view name, Time now);  // ENODATA when absent

  // Inodes whose link count reached 0 and whose data is not yet reclaimed.
  Result<std::vector<Ino>> ListOrphans();
  // Deletes an orphan's inode record, symlink target, xattrs and orphan mark, in one batch.
  // EBUSY (nothing deleted) if the inode still has links; ENOENT if it does not exist.
  Status DeleteInode(Ino ino);

  Result<Counts> GetCounts();
  Activity GetActivity() const;
  // Makes every completed operation durable (writes back, then syncs the write-ahead log).
  Status Sync();

  // Reads every record (fsck, crash recovery). Records that do not decode are listed in
  // `damaged` and otherwise skipped; only an unreadable store is an error. Memory grows with the
  // store; meant for a store nobody else is changing (fsck holds the lock; at mount, before
  // serving).
  Result<StoreScan> Scan();
  // Applies a repair (see RepairBatch) atomically and durably, and updates the in-memory
  // superblock. For fsck only: it bypasses every namespace rule.
  Status ApplyRepair(const RepairBatch& batch);

 private:
  struct Impl;
  explicit MetaStore(std::unique_ptr<Impl> impl);
  // `record(InodeCache*)`: a change of the cached inode in memory (RecordWrite, RecordAccess),
  // after loading the inode into the cache when it is not there.
  template <typename Record>
  Result<Inode> RecordInMemory(Ino ino, Record record);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tipfs::meta
