// Internals of MetaStore shared by its implementation files (not part of the contract).
//
// Locking: `mu` serializes every mutation from its first read to its WriteBatch, so the checks a
// mutation makes (entry absent, directory empty, not an ancestor) still hold when it commits.
// Readers take no lock: each RocksDB Get sees a committed state, and a WriteBatch is applied
// atomically, so a reader sees every mutation entirely or not at all. `mu` is the only lock of
// the store and is never held while calling out of the store.
#pragma once

#include <rocksdb/cache.h>
#include <rocksdb/db.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "meta/inode_cache.h"
#include "meta/meta_encoding.h"
#include "meta/meta_store.h"
#include "util/mutex.h"

namespace tipfs::meta {

// Names a Lookup found absent, so that the create which follows (the kernel looks every name up
// before it creates it) does not read RocksDB for the same answer again. A note is good while the
// generation of the parent's inode-cache shard has not moved since before the Lookup read
// RocksDB: every commit that could add the name loads the parent, and so bumps that generation
// after its batch is written (InodeCache::AfterCommit); a repair bumps every generation. A note
// is used once. Thread-safe; `mu_` is a leaf.
class AbsentNames {
 public:
  void Note(Ino parent, std::string_view name, uint64_t generation) EXCLUDES(mu_);
  // True when (parent, name) was noted absent at `generation`; the note is gone either way.
  bool Take(Ino parent, std::string_view name, uint64_t generation) EXCLUDES(mu_);

 private:
  struct Slot {
    Ino parent = 0;  // 0: empty (no directory has inode number 0)
    std::string name;
    uint64_t generation = 0;
  };
  static constexpr size_t kSlots = 64;  // lookups and creates in flight at once, with room
  static size_t SlotOf(Ino parent, std::string_view name);

  Mutex mu_;
  Slot slots_[kSlots] GUARDED_BY(mu_);
};

// The store's state and read helpers. MetaStore::Impl is this; it is a separate name so that
// Mutation (not a member of MetaStore) may use it.
struct StoreCore {
  // Constant after Open/Create.
  std::string path;
  std::shared_ptr<rocksdb::Cache> block_cache;
  std::unique_ptr<rocksdb::DB> db;
  rocksdb::WriteOptions write_options;  // WAL on, no sync per write (Sync() syncs it)
  std::function<void()> after_sync;     // MetaStoreOptions::after_sync

  // Serializes mutations (see the file comment). Lock order (docs/DESIGN.md, "Locks"): taken
  // under a file's InodeState::io_mutex, never with FileCache::mu_ held; only RocksDB's own locks
  // are taken inside it.
  Mutex mu;
  // The superblock as last committed.
  encoding::Superblock superblock GUARDED_BY(mu);
  // Mirrors superblock.inode_count for lock-free GetCounts; written under mu.
  std::atomic<uint64_t> inode_count{0};
  // The inodes in use, and the attributes writes changed (written back by every batch).
  std::unique_ptr<InodeCache> inodes;
  AbsentNames absent_names;
  // What the store asked of RocksDB (MetaStore::Activity): point reads, batches, prefix scans.
  std::atomic<uint64_t> point_reads{0};
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> scans{0};

  // The write-back timer: a thread that commits dirty attributes every `write_back_interval`.
  std::thread write_back_thread;
  Mutex write_back_mu;
  CondVar write_back_cv;
  bool stopping GUARDED_BY(write_back_mu) = false;

  ~StoreCore();

  // Starts the write-back timer (0 ms: none).
  void StartWriteBack(int64_t interval_ms);
  // Commits every dirty attribute now.
  Status WriteBack() EXCLUDES(mu);

  // "metadata store <path>: <what>: <rocksdb message>" with an errno for the RocksDB status.
  Status FromRocks(const rocksdb::Status& s, std::string_view what) const;

  // The raw value at `key`, std::nullopt when absent. `snapshot` may be null (latest state).
  Result<std::optional<std::string>> GetRaw(const std::string& key,
                                            const rocksdb::Snapshot* snapshot = nullptr);
  // ENOENT when the inode does not exist. Served from the inode cache (and fills it) unless read
  // through a snapshot; a snapshot's record gets the dirty attributes of the cached inode.
  Result<Inode> ReadInode(Ino ino, const rocksdb::Snapshot* snapshot = nullptr);
  // The record in RocksDB, as stored (no cache).
  Result<Inode> ReadStoredInode(Ino ino, const rocksdb::Snapshot* snapshot = nullptr);
  // A directory's inode: ENOENT when absent, ENOTDIR when it is not a directory.
  Result<Inode> ReadDirectory(Ino ino, const rocksdb::Snapshot* snapshot = nullptr);
  // The entry `name` of `parent`, std::nullopt when absent (the parent is not checked).
  Result<std::optional<DirEntry>> ReadEntry(Ino parent, std::string_view name,
                                            const rocksdb::Snapshot* snapshot = nullptr);
  // Calls `visit` for each key starting with `prefix`, in key order, on one consistent view of
  // the store; stops at the first error, or when the visitor clears its `keep_going` flag.
  using PrefixVisitor =
      std::function<Status(std::string_view key, std::string_view value, bool* keep_going)>;
  Status ScanPrefix(const std::string& prefix, const PrefixVisitor& visit);
  // True when `key` is present.
  Result<bool> HasKey(const std::string& key);
  // True when some key starts with `prefix` (a directory has entries, an inode has xattrs).
  Result<bool> HasKeyWithPrefix(const std::string& prefix);
};

struct MetaStore::Impl : StoreCore {};

// One mutation, built under StoreCore::mu, which it holds for its whole life (a scoped lock).
// Inodes are loaded once (from the inode cache, with their dirty attributes) and changed in
// place; Commit() writes, in one WriteBatch, every dirty inode of the cache first (see
// inode_cache.h: what reaches the log is a prefix of the operations), then the extra puts and
// deletes, the changed inodes and (when it changed) the superblock, and then updates the cache.
class SCOPED_CAPABILITY Mutation {
 public:
  explicit Mutation(StoreCore* impl) ACQUIRE(impl->mu) : impl_(impl) {
    impl_->mu.Lock();
    superblock_ = impl_->superblock;
  }
  ~Mutation() RELEASE() { impl_->mu.Unlock(); }
  Mutation(const Mutation&) = delete;
  Mutation& operator=(const Mutation&) = delete;

  // The inode, loaded from the store on first use; ENOENT when absent. The pointer stays valid
  // for the life of the Mutation.
  Result<Inode*> Load(Ino ino);
  // A directory's inode: ENOENT / ENOTDIR as StoreCore::ReadDirectory.
  Result<Inode*> LoadDirectory(Ino ino);
  // The inode a directory entry names. Absent, or of another type than the entry says, is
  // Corruption (inode numbers are never reused, so no race explains it).
  Result<Inode*> LoadChild(Ino parent, const DirEntry& entry);
  // The directory `parent` and the inode its entry `name` names (loaded as LoadDirectory and
  // LoadChild); ENOENT when there is no such entry.
  struct NamedChild {
    Inode* dir;
    Inode* child;
  };
  Result<NamedChild> LoadNamedChild(Ino parent, std::string_view name);
  // A new inode with the next inode number (the counter advances in the same batch).
  Inode* Allocate();
  // An xattr of the loaded inode `ino` is written in this batch.
  void XattrAdded(Ino ino);
  // True when the loaded inode `ino` certainly has no xattrs (made by this store, none added).
  bool KnownWithoutXattrs(Ino ino) const;

  void PutEntry(Ino parent, std::string_view name, const Inode& child);
  void DeleteEntry(Ino parent, std::string_view name);
  void Put(const std::string& key, const std::string& value) { ops_.emplace_back(key, value); }
  void Delete(const std::string& key) { ops_.emplace_back(key, std::nullopt); }
  // Drops one link; at 0 the inode becomes an orphan. Directories lose all links at once.
  void DropLink(Inode* inode, Time now);
  // Forgets a loaded inode and deletes its record (DeleteInode); pointers to it become invalid.
  void DeleteInodeRecord(Ino ino);

  // True when `ancestor` is `dir` or one of its ancestors (walks parent pointers to the root).
  Result<bool> IsAncestorOrSelf(Ino ancestor, Ino dir);

  Status Commit();

 private:
  struct Loaded {
    Inode inode;
    std::string original;    // encoding as read; empty for a new inode
    uint64_t version = 0;    // the cache's write version when loaded (0: not cached)
    bool no_xattrs = false;  // InodeCache::Versioned::no_xattrs
  };

  StoreCore* const impl_;
  encoding::Superblock superblock_;
  std::map<Ino, Loaded> inodes_;  // node-based: pointers into it stay valid
  std::vector<std::pair<std::string, std::optional<std::string>>> ops_;  // puts and deletes
  std::vector<Ino> deleted_;
};

// ENOENT for a name that is not in a directory.
inline Status NoEntry(Ino parent, std::string_view name) {
  return Status::NotFound("no entry \"" + std::string(name) + "\" in directory " +
                          std::to_string(parent));
}

// Sets the times a change of directory content sets (mtime and ctime).
inline void TouchDirectory(Inode* dir, Time now) {
  dir->mtime = now;
  dir->ctime = now;
}

}  // namespace tipfs::meta
