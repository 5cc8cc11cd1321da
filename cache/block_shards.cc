#include "cache/block_shards.h"

namespace tipfs::cache {

void BlockShards::Insert(uint64_t ino, uint64_t index, Block* block) {
  Shard& shard = shards_[ShardOf(ino, index)];
  MutexLock lock(&shard.mu);
  shard.index.Insert(ino, index, block);
}

void BlockShards::Erase(uint64_t ino, uint64_t index) {
  Shard& shard = shards_[ShardOf(ino, index)];
  MutexLock lock(&shard.mu);
  shard.index.Erase(ino, index);
}

uint64_t BlockShards::DeferHits(uint64_t ino, uint64_t index, std::vector<DeferredHit>* hits) {
  Shard& shard = shards_[ShardOf(ino, index)];
  shard.mu.AssertHeld();
  const uint64_t added = hits->size();
  uint64_t seq = hit_seq_.fetch_add(added, std::memory_order_relaxed);
  for (DeferredHit& hit : *hits) {
    hit.seq = seq++;
    shard.hits.push_back(hit);
  }
  hits->clear();
  shard.hit_count.store(static_cast<uint32_t>(shard.hits.size()), std::memory_order_relaxed);
  return deferred_.fetch_add(added, std::memory_order_relaxed) + added;
}

void BlockShards::TakeDeferredHits(std::vector<DeferredHit>* out) {
  for (Shard& shard : shards_) {
    if (shard.hit_count.load(std::memory_order_relaxed) == 0) continue;
    MutexLock lock(&shard.mu);
    deferred_.fetch_sub(shard.hits.size(), std::memory_order_relaxed);
    out->insert(out->end(), shard.hits.begin(), shard.hits.end());
    shard.hits.clear();
    shard.hit_count.store(0, std::memory_order_relaxed);
  }
}

}  // namespace tipfs::cache
