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
      table_(&shards_, TailWindowFor(capacity_blocks)),
      max_prefetches_per_disk_(max_prefetches_per_disk),
      disk_prefetches_(disk_count_, 0),
      disks_with_room_(max_prefetches_per_disk > 0 ? disk_count_ : 0) {}

// An eighth of the cache, at most 64 buffers.
uint32_t CacheBuffers::TailWindowFor(uint64_t capacity_blocks) {
  return static_cast<uint32_t>(std::clamp<uint64_t>(capacity_blocks / 8, 1, 64));
}

void CacheBuffers::AdjustDiskPrefetches(uint32_t disk, int32_t delta) {
  const bool had_room = DiskHasRoom(disk);
  disk_prefetches_[disk] =
      static_cast<uint32_t>(static_cast<int64_t>(disk_prefetches_[disk]) + delta);
  const bool has_room = DiskHasRoom(disk);
  // Every writer holds mu_: a load and a store, no read-modify-write on the fetch path.
  if (has_room != had_room) {
    const uint32_t with_room = disks_with_room_.load(std::memory_order_relaxed);
    disks_with_room_.store(has_room ? with_room + 1 : with_room - 1, std::memory_order_release);
  }
}

void CacheBuffers::SetMaxPrefetchesPerDisk(uint32_t max_prefetches_per_disk) {
  max_prefetches_per_disk_ = max_prefetches_per_disk;
  uint32_t with_room = 0;
  for (uint32_t disk = 0; disk < disk_count_; ++disk) with_room += DiskHasRoom(disk) ? 1 : 0;
  disks_with_room_.store(with_room, std::memory_order_release);
}

bool CacheBuffers::MakeRoomFromUnheld() {
  while (table_.size() >= capacity_blocks_) {
    Block* victim = EvictFirstColdest();
    if (victim == nullptr) victim = LruColdest();
    if (victim == nullptr) return false;
    EvictBlock(victim);
  }
  return true;
}

}  // namespace tipfs::cache
