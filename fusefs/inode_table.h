// InodeTable: what the daemon must remember about inodes between FUSE requests: how many
// references the kernel holds (lookup counts, dropped by forget), how many handles are open, and
// a per-inode lock that orders data writes against truncation. The metadata itself lives in
// RocksDB (MetaStore); this table holds only in-memory state and forgets an inode when the kernel
// does and no handle is open.
//
// Thread-safe, and sharded by inode number so that requests on different files never contend.
// Lock order: a shard's mutex before nothing (a leaf: never call out while holding it);
// InodeState::io_mutex is taken by callers without a shard's mutex held.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "util/mutex.h"

namespace tipfs::fusefs {

struct InodeState {
  // Shared by writes of the file's data; exclusive for truncation and reclamation, so a write
  // never lands in an object that a concurrent truncate is shrinking. The outermost lock of the
  // tree: held across one operation's FileCache and MetaStore calls.
  SharedMutex io_mutex;
  // The file may have S_ISUID or S_ISGID set (seen at open, create or chmod): its writes take the
  // bits away first, as the kernel does (FileSystem::Write). False means no write needs a look.
  std::atomic<bool> may_have_setid{false};
  // The file's data objects were removed (FileSystem::Reclaim, with io_mutex held exclusively)
  // and nothing opened it since (Open clears it, holding io_mutex shared): the reclaim at the
  // kernel's forget need not remove them again (a call on every disk).
  std::atomic<bool> data_removed{false};
};

class InodeTable {
 public:
  // Takes `count` kernel references (a lookup reply, a create reply, a readdirplus entry).
  void AddLookups(uint64_t ino, uint64_t count = 1);
  // Drops kernel references (forget). Returns true when the inode has neither lookups nor open
  // handles any more, and was dropped from the table.
  bool Forget(uint64_t ino, uint64_t count);

  void Open(uint64_t ino);
  // Returns the number of handles still open after this close.
  uint32_t Close(uint64_t ino);
  uint32_t OpenCount(uint64_t ino) const;

  struct Use {
    uint64_t lookups = 0;
    uint32_t opens = 0;
  };
  Use UseOf(uint64_t ino) const;

  // The inode's lock state. An inode the kernel refers to or that is open keeps one state for
  // as long as it does; for any other inode the state is fresh, which is enough because no
  // other operation can reach it concurrently.
  std::shared_ptr<InodeState> State(uint64_t ino);

  size_t size() const;

 private:
  struct Entry {
    uint64_t lookups = 0;
    uint32_t opens = 0;
    std::shared_ptr<InodeState> state = std::make_shared<InodeState>();
  };
  struct Shard {
    mutable Mutex mu;
    std::unordered_map<uint64_t, Entry> entries GUARDED_BY(mu);
  };
  static constexpr size_t kShards = 64;
  Shard& ShardOf(uint64_t ino) const { return shards_[ino % kShards]; }
  static void DropIfUnused(Shard& shard, std::unordered_map<uint64_t, Entry>::iterator it)
      REQUIRES(shard.mu);

  mutable Shard shards_[kShards];
};

}  // namespace tipfs::fusefs
