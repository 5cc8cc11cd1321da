// InodeCache implementation; the coherence and write-back rules are in inode_cache.h.
#include "meta/inode_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <string>

namespace tipfs::meta {

namespace {

bool Before(const Time& a, const Time& b) {
  return a.sec < b.sec || (a.sec == b.sec && a.nsec < b.nsec);
}
const Time& Later(const Time& a, const Time& b) { return Before(a, b) ? b : a; }

}  // namespace

InodeCache::InodeCache(size_t capacity)
    : shard_capacity_(std::max<size_t>(1, capacity / kShards)) {}

std::optional<InodeCache::Versioned> InodeCache::Find(Ino ino) const {
  Shard& shard = ShardOf(ino);
  MutexLock lock(&shard.mu);
  auto it = shard.entries.find(ino);
  if (it == shard.entries.end()) return std::nullopt;
  return Versioned{it->second.inode, it->second.version, it->second.no_xattrs};
}

uint64_t InodeCache::Generation(Ino ino) const {
  Shard& shard = ShardOf(ino);
  MutexLock lock(&shard.mu);
  return shard.generation;
}

void InodeCache::InsertIfUnchanged(const Inode& inode, uint64_t generation) {
  Shard& shard = ShardOf(inode.ino);
  MutexLock lock(&shard.mu);
  if (shard.generation != generation) return;  // changed meanwhile: the record may be stale
  auto [it, inserted] = shard.entries.try_emplace(inode.ino);
  if (!inserted) return;
  FillLocked(shard, it->second, inode);
  TrimLocked(shard);
}

void InodeCache::Insert(const Inode& inode) {
  Shard& shard = ShardOf(inode.ino);
  MutexLock lock(&shard.mu);
  auto [it, inserted] = shard.entries.try_emplace(inode.ino);
  if (!inserted) return;
  FillLocked(shard, it->second, inode);
  TrimLocked(shard);
}

void InodeCache::FillLocked(Shard& shard, Entry& entry, const Inode& inode) {
  entry.inode = inode;
  entry.version = entry.inserted_version = ++shard.last_version;
  ++shard.clean;
}

void InodeCache::SetDirtyLocked(Shard& shard, Entry& entry, bool dirty) {
  if (entry.dirty == dirty) return;
  entry.dirty = dirty;
  if (dirty) {
    --shard.clean;
    dirty_count_.fetch_add(1, std::memory_order_relaxed);
  } else {
    ++shard.clean;
    dirty_count_.fetch_sub(1, std::memory_order_relaxed);
  }
}

template <typename Change>
Result<Inode> InodeCache::ChangeInMemory(Ino ino, uint64_t Entry::*stamp, Change change) {
  Shard& shard = ShardOf(ino);
  MutexLock lock(&shard.mu);
  auto it = shard.entries.find(ino);
  if (it == shard.entries.end()) return Status::NotFound("inode " + std::to_string(ino));
  Entry& e = it->second;
  TIPFS_RETURN_IF_ERROR(change(e.inode));
  e.version = ++shard.last_version;  // the shard's generation stays: RocksDB did not change
  e.*stamp = e.version;
  SetDirtyLocked(shard, e, true);
  return e.inode;
}

Result<Inode> InodeCache::RecordWrite(Ino ino, uint64_t end, Time now) {
  return ChangeInMemory(ino, &Entry::written_version, [&](Inode& inode) {
    if (S_ISDIR(inode.mode)) {
      return Status::FromErrno(EISDIR, "write: inode " + std::to_string(ino) + " is a directory");
    }
    inode.size = std::max(inode.size, end);
    inode.mtime = now;
    inode.ctime = now;
    return Status::OK();
  });
}

Result<Inode> InodeCache::RecordAccess(Ino ino, Time now) {
  return ChangeInMemory(ino, &Entry::accessed_version, [&](Inode& inode) {
    inode.atime = now;
    return Status::OK();
  });
}

void InodeCache::OverlayDirty(Inode* inode) const {
  Shard& shard = ShardOf(inode->ino);
  MutexLock lock(&shard.mu);
  auto it = shard.entries.find(inode->ino);
  if (it == shard.entries.end() || !it->second.dirty) return;
  inode->size = it->second.inode.size;
  inode->atime = it->second.inode.atime;
  inode->mtime = it->second.inode.mtime;
  inode->ctime = it->second.inode.ctime;
}

std::vector<InodeCache::Versioned> InodeCache::CollectDirty() const {
  std::vector<Versioned> out;
  if (dirty_count() == 0) return out;
  for (Shard& shard : shards_) {
    MutexLock lock(&shard.mu);
    if (shard.clean == shard.entries.size()) continue;
    for (const auto& [ino, e] : shard.entries) {
      if (e.dirty) out.push_back(Versioned{e.inode, e.version});
    }
  }
  return out;
}

void InodeCache::AfterCommit(const std::vector<Versioned>& flushed,
                             const std::vector<Versioned>& committed,
                             const std::vector<Ino>& deleted) {
  for (const Versioned& d : flushed) {
    Shard& shard = ShardOf(d.inode.ino);
    MutexLock lock(&shard.mu);
    auto it = shard.entries.find(d.inode.ino);
    if (it != shard.entries.end() && it->second.version == d.version) {
      SetDirtyLocked(shard, it->second, false);
    }
  }
  for (const Versioned& c : committed) {
    Shard& shard = ShardOf(c.inode.ino);
    MutexLock lock(&shard.mu);
    ++shard.generation;
    auto [it, inserted] = shard.entries.try_emplace(c.inode.ino);
    Entry& e = it->second;
    // The mutation held the store's mutex from its load to its commit, and every xattr change is
    // a mutation: what it knows of the inode's xattrs is current.
    e.no_xattrs = c.no_xattrs;
    if (inserted) {
      FillLocked(shard, e, c.inode);
    } else if (e.version == c.version || e.version == e.inserted_version) {
      // Nothing written since the mutation loaded it, or the entry is a record a reader read from
      // RocksDB while the mutation ran (the mutation's entry was dropped meanwhile; what the
      // reader read is at most as new as this commit): the committed record is all there is.
      // Keeping the larger size of such a re-read record would undo a truncation.
      e.inode = c.inode;
      SetDirtyLocked(shard, e, false);
    } else {
      // Writes or reads came while the mutation ran: they follow it, so what they changed stays
      // (a truncation never overlaps a write: the file system orders them). Only what they
      // changed: a utimes that set an older atime stays when only a write came meanwhile.
      Inode merged = c.inode;
      if (e.written_version > c.version) {
        merged.size = std::max(e.inode.size, c.inode.size);
        merged.mtime = Later(e.inode.mtime, c.inode.mtime);
        merged.ctime = Later(e.inode.ctime, c.inode.ctime);
      }
      if (e.accessed_version > c.version) merged.atime = e.inode.atime;
      e.inode = merged;
    }
    TrimLocked(shard);
  }
  for (Ino ino : deleted) {
    Shard& shard = ShardOf(ino);
    MutexLock lock(&shard.mu);
    ++shard.generation;
    auto it = shard.entries.find(ino);
    if (it == shard.entries.end()) continue;
    SetDirtyLocked(shard, it->second, false);
    --shard.clean;
    shard.entries.erase(it);
  }
}

void InodeCache::DropClean() {
  for (Shard& shard : shards_) {
    MutexLock lock(&shard.mu);
    ++shard.generation;
    for (auto it = shard.entries.begin(); it != shard.entries.end();) {
      it = it->second.dirty ? std::next(it) : shard.entries.erase(it);
    }
    shard.clean = 0;
  }
}

void InodeCache::TrimLocked(Shard& shard) {
  if (shard.clean <= shard_capacity_) return;
  // Drop an eighth beyond the share at once, so trimming is amortized over many inserts. Which
  // ones does not matter much: a dropped inode costs one RocksDB read (from its block cache).
  size_t drop = shard.clean - shard_capacity_ + shard_capacity_ / 8;
  for (auto it = shard.entries.begin(); it != shard.entries.end() && drop > 0;) {
    if (it->second.dirty) {
      ++it;
      continue;
    }
    it = shard.entries.erase(it);
    --shard.clean;
    --drop;
  }
}

}  // namespace tipfs::meta
