// InodeCache: the metadata store's inodes in memory, so that reads, writes and getattr of a file
// in use touch no RocksDB record and no store-wide lock; and the attributes that writes change
// (size, mtime, ctime), kept dirty here until the store writes them back.
//
// Coherence: the store is the only writer of its records, and every mutation commits through
// MetaStore's Mutation, which updates this cache after its batch is written. A reader that
// missed fills the cache only if nothing in the inode's shard changed while it read RocksDB (a
// per-shard generation), so a stale record never enters.
//
// Write-back and crash order: RecordWrite and RecordAccess change only the cached inode (dirty,
// with a version).
// Every batch the store writes carries every dirty inode first, so what reaches the write-ahead
// log is always a prefix of the operations in their order: after a crash a file may be shorter
// than its last writes made it, but never older than an operation that followed them. Dirty
// inodes are never evicted.
//
// Thread-safety: all methods may be called concurrently; each takes one shard's mutex, a leaf.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "meta/meta_store.h"
#include "util/mutex.h"

namespace tipfs::meta {

class InodeCache {
 public:
  // Keeps at most about `capacity` clean inodes (dirty ones come on top).
  explicit InodeCache(size_t capacity);

  // An inode with the write version it has now (for a mutation that loads it).
  struct Versioned {
    Inode inode;
    uint64_t version = 0;
    // The inode has no extended attributes, known because the store made it and has added none
    // since (false: unknown, e.g. read from RocksDB). Lets DeleteInode skip its xattr scan.
    bool no_xattrs = false;
  };
  std::optional<Versioned> Find(Ino ino) const;
  // For a reader that misses: the shard's generation before it reads RocksDB, then the inode it
  // read, inserted only if the generation did not move.
  uint64_t Generation(Ino ino) const;
  void InsertIfUnchanged(const Inode& inode, uint64_t generation);
  // Inserts unless cached. REQUIRES: no mutation can commit meanwhile (the store's mutex held).
  void Insert(const Inode& inode);

  // After a write of [.., end): size = max(size, end), mtime = ctime = now, dirty. NotFound when
  // the inode is not cached (the caller loads it and retries); EISDIR for a directory.
  Result<Inode> RecordWrite(Ino ino, uint64_t end, Time now);
  // After a read that moves the access time: atime = now, dirty. NotFound as above.
  Result<Inode> RecordAccess(Ino ino, Time now);
  // The size and times of a dirty inode replace those of `inode` (a record read from RocksDB
  // through a snapshot).
  void OverlayDirty(Inode* inode) const;

  // Every dirty inode with its write version, for a batch.
  std::vector<Versioned> CollectDirty() const;
  size_t dirty_count() const { return dirty_count_.load(std::memory_order_relaxed); }

  // After a committed batch: the written dirty inodes become clean unless written again since;
  // `committed` (with the write version each had when the mutation loaded it, and what the
  // mutation knows of its xattrs) replace the cached ones, keeping size and times of writes that
  // came meanwhile; `deleted` go.
  void AfterCommit(const std::vector<Versioned>& flushed, const std::vector<Versioned>& committed,
                   const std::vector<Ino>& deleted);
  // Forgets every clean inode (after a repair rewrote records behind the cache's back).
  void DropClean();

 private:
  struct Entry {
    Inode inode;
    // From the shard's counter, so an entry dropped and read again from RocksDB never has the
    // version a mutation saw on the old one (a mutation's loaded version means "this entry, with
    // no write since"). Set at insertion and by every RecordWrite and RecordAccess.
    uint64_t version = 0;
    uint64_t inserted_version = 0;  // the version it was inserted with: equal means no write since
    uint64_t written_version = 0;   // the version of its last RecordWrite
    uint64_t accessed_version = 0;  // the version of its last RecordAccess
    bool dirty = false;
    bool no_xattrs = false;  // Versioned::no_xattrs; set and cleared only by committed mutations
  };
  struct Shard {
    mutable Mutex mu;
    std::unordered_map<Ino, Entry> entries GUARDED_BY(mu);
    uint64_t generation GUARDED_BY(mu) = 0;  // bumped by every change RocksDB saw
    size_t clean GUARDED_BY(mu) = 0;
    uint64_t last_version GUARDED_BY(mu) = 0;  // 0 is a version no entry has: "not cached"
  };
  static constexpr size_t kShards = 64;

  Shard& ShardOf(Ino ino) const { return shards_[ino % kShards]; }
  // Drops clean entries while the shard holds more than its share.
  void TrimLocked(Shard& shard) REQUIRES(shard.mu);
  void SetDirtyLocked(Shard& shard, Entry& entry, bool dirty) REQUIRES(shard.mu);
  // Applies `change` (a Status(Inode&): an error leaves the inode as it was) to the cached inode
  // in memory, marks it dirty and stamps `stamp` with its new version; NotFound when the inode is
  // not cached.
  template <typename Change>
  Result<Inode> ChangeInMemory(Ino ino, uint64_t Entry::*stamp, Change change);
  // Fills a new entry with `inode` (clean, a fresh version).
  static void FillLocked(Shard& shard, Entry& entry, const Inode& inode) REQUIRES(shard.mu);

  const size_t shard_capacity_;
  mutable Shard shards_[kShards];
  std::atomic<size_t> dirty_count_{0};
};

}  // namespace tipfs::meta
