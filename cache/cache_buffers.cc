// CacheBuffers: the buffer operations the data path and the TIP manager share (cache_buffers.h).
#include "cache/cache_buffers.h"

#include <algorithm>

namespace tipfs::cache {

CacheBuffers::CacheBuffers(const stripe::Layout& layout, uint32_t block_size,
                           uint64_t capacity_blocks, uint32_t max_prefetches_per_disk)
    : layout_(layout),
      block_size_(block_size),
      disk_count_(layout.disk_count()),
      capacity_blocks_(capacity_blocks),
      max_prefetches_per_disk_(max_prefetches_per_disk),
      table_(TailWindowFor(capacity_blocks)),
      disk_prefetches_(disk_count_, 0) {}

// An eighth of the cache, at most 64 buffers.
uint32_t CacheBuffers::TailWindowFor(uint64_t capacity_blocks) {
  return static_cast<uint32_t>(std::clamp<uint64_t>(capacity_blocks / 8, 1, 64));
}

bool CacheBuffers::MakeRoomFromUnheld() {
  while (table_.size() >= capacity_blocks_) {
    Block* victim = table_.EvictFirstColdest();
    if (victim == nullptr) victim = table_.LruColdest();
    if (victim == nullptr) return false;
    EvictBlock(victim);
  }
  return true;
}

void CacheBuffers::PlaceUnheld(Block* b) {
  if (b->evict_first) {
    table_.PushEvictFirst(b);
  } else {
    table_.PushLru(b);
  }
}

void CacheBuffers::EvictBlock(Block* b) {
  if (b->queue == BlockQueue::kLru) table_.AddGhost(b->key);
  if (!b->used) {
    if (b->origin == BlockOrigin::kHinted) ++counters_.hinted_evicted_unused;
    if (b->origin == BlockOrigin::kReadahead) ++counters_.readahead_evicted_unused;
  }
  ++counters_.evictions;
  table_.Erase(b);
}

}  // namespace tipfs::cache
