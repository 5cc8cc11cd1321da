#include "fusefs/inode_table.h"

#include <cstdio>
#include <cstdlib>

namespace tipfs::fusefs {

void InodeTable::AddLookups(uint64_t ino, uint64_t count) {
  Shard& shard = ShardOf(ino);
  MutexLock lock(&shard.mu);
  shard.entries[ino].lookups += count;
}

bool InodeTable::Forget(uint64_t ino, uint64_t count) {
  Shard& shard = ShardOf(ino);
  MutexLock lock(&shard.mu);
  auto it = shard.entries.find(ino);
  if (it == shard.entries.end()) return true;
  if (it->second.lookups < count) {
    // The kernel never forgets more than it looked up; tolerate it rather than underflow.
    std::fprintf(stderr, "tipfs: INTERNAL ERROR: forget %llu of inode %llu with %llu lookups\n",
                 static_cast<unsigned long long>(count), static_cast<unsigned long long>(ino),
                 static_cast<unsigned long long>(it->second.lookups));
    it->second.lookups = 0;
  } else {
    it->second.lookups -= count;
  }
  bool unused = it->second.lookups == 0 && it->second.opens == 0;
  DropIfUnused(shard, it);
  return unused;
}

void InodeTable::Open(uint64_t ino) {
  Shard& shard = ShardOf(ino);
  MutexLock lock(&shard.mu);
  ++shard.entries[ino].opens;
}

uint32_t InodeTable::Close(uint64_t ino) {
  Shard& shard = ShardOf(ino);
  MutexLock lock(&shard.mu);
  auto it = shard.entries.find(ino);
  if (it == shard.entries.end() || it->second.opens == 0) {
    std::fprintf(stderr, "tipfs: INTERNAL ERROR: close of inode %llu that is not open\n",
                 static_cast<unsigned long long>(ino));
    std::abort();
  }
  uint32_t remaining = --it->second.opens;
  DropIfUnused(shard, it);
  return remaining;
}

uint32_t InodeTable::OpenCount(uint64_t ino) const {
  Shard& shard = ShardOf(ino);
  MutexLock lock(&shard.mu);
  auto it = shard.entries.find(ino);
  return it == shard.entries.end() ? 0 : it->second.opens;
}

InodeTable::Use InodeTable::UseOf(uint64_t ino) const {
  Shard& shard = ShardOf(ino);
  MutexLock lock(&shard.mu);
  auto it = shard.entries.find(ino);
  if (it == shard.entries.end()) return Use{};
  return Use{it->second.lookups, it->second.opens};
}

std::shared_ptr<InodeState> InodeTable::State(uint64_t ino) {
  Shard& shard = ShardOf(ino);
  MutexLock lock(&shard.mu);
  auto it = shard.entries.find(ino);
  if (it == shard.entries.end()) return std::make_shared<InodeState>();
  return it->second.state;
}

size_t InodeTable::size() const {
  size_t total = 0;
  for (const Shard& shard : shards_) {
    MutexLock lock(&shard.mu);
    total += shard.entries.size();
  }
  return total;
}

void InodeTable::DropIfUnused(Shard& shard, std::unordered_map<uint64_t, Entry>::iterator it) {
  if (it->second.lookups == 0 && it->second.opens == 0) shard.entries.erase(it);
}

}  // namespace tipfs::fusefs
