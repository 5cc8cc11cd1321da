// CacheBuffers: the cache's buffers as the TIP manager sees them, and everything the manager may
// do to them (docs/DESIGN.md "The cache's two halves"). The data path (FileCache) implements it:
// it owns the block table, its queues, the capacity, the per-disk prefetch counts and the data
// path's counters, all under one lock, mu(). The manager (TipManager) holds only a CacheBuffers*,
// so it can be read, and tested, against this class alone: it looks blocks up, holds them for
// hints, gives buffers up, puts unheld blocks back on their queues, issues prefetches and reads
// the capacity, the occupancy, each disk's room and read-ahead's counters. Fetches, reads,
// writes and granules stay the data path's own (FileCache's private half).
//
// A Block* from FindBlock or a queue is valid while mu() stays held. The manager reads its fields
// and changes only its hint state: hint_refs (through AddHintRef, and down when it gives a hold
// back), evict_first and hint_source.
//
// Thread-safety: every call but DiskOf, disk_count, AnyDiskHasRoom (wait-free) and
// DrainIssues (which takes mu() itself) REQUIRES mu(). Lock order:
// TipManager::mu_, then mu(), then the Clock's mutex; the data path never takes TipManager::mu_
// while holding mu(), and mu() is never held across a disk submission (DrainIssues) or a wait.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "cache/block_table.h"
#include "cache/cache_types.h"
#include "stripe/layout.h"
#include "util/mutex.h"

namespace tipfs::cache {

class CacheBuffers {
 public:
  CacheBuffers(const CacheBuffers&) = delete;
  CacheBuffers& operator=(const CacheBuffers&) = delete;

  // The lock of everything below (FileCache::mu_ in the data path's code).
  Mutex* mu() const RETURN_CAPABILITY(mu_) { return &mu_; }

  // ---- Constant ----
  uint32_t disk_count() const { return disk_count_; }
  // The disk that holds block `index` of `ino` (TIP's per-disk T_disk, prefetch bounds).
  uint32_t DiskOf(uint64_t ino, uint64_t index) const {
    return layout_.DiskOfOffset(ino, index * block_size_);
  }

  // ---- Blocks and occupancy ----
  Block* FindBlock(uint64_t ino, uint64_t index) const REQUIRES(mu_) {
    return table_.Find(ino, index);
  }
  uint64_t capacity_blocks() const REQUIRES(mu_) { return capacity_blocks_; }
  // Blocks cached or in flight; it may exceed the capacity after a demand miss found every
  // buffer held or in flight (the manager's next round gives buffers back).
  uint64_t cached_blocks() const REQUIRES(mu_) { return table_.size(); }
  uint64_t lru_blocks() const REQUIRES(mu_) { return table_.lru_size(); }
  uint64_t evict_first_blocks() const REQUIRES(mu_) { return table_.evict_first_size(); }
  // The LRU queue's tail window (BlockTable): k, and how many buffers are in it now.
  uint32_t lru_tail_window() const REQUIRES(mu_) { return table_.tail_window(); }
  uint64_t lru_tail_count() const REQUIRES(mu_) { return table_.tail_count(); }
  // The next block each queue would give up (null when it is empty), once the hits served
  // without mu() have moved their blocks (ApplyDeferredHits): the order is the queues' as if
  // every hit had taken mu().
  Block* EvictFirstColdest() REQUIRES(mu_) {
    ApplyDeferredHits();
    return table_.EvictFirstColdest();
  }
  Block* LruColdest() REQUIRES(mu_) {
    ApplyDeferredHits();
    return table_.LruColdest();
  }

  // ---- Buffer operations ----
  // One more hint holds b: it leaves its queue (no queue gives a held block up, only the
  // manager's exchange does) and loses its evict-first mark.
  void AddHintRef(Block* b) REQUIRES(mu_) {
    if (b->hint_refs++ == 0) table_.Unqueue(b);
    b->evict_first = false;
  }
  // A valid block no hint holds any longer goes to its queue: evict-first when marked, else the
  // LRU's warm end. REQUIRES: b->hint_refs == 0 and b->valid(). (This and EvictBlock are inline,
  // as they were inside file_cache.cc: the data path calls them on every completion and miss.)
  void PlaceUnheld(Block* b) REQUIRES(mu_) {
    if (b->evict_first) {
      table_.PushEvictFirst(b);
    } else {
      table_.PushLru(b);
    }
  }
  // Gives b's buffer up: b leaves the table (a ghost when it was on the LRU queue), counted in
  // the data path's eviction counters. REQUIRES: b is not in flight (BlockTable::Erase aborts).
  void EvictBlock(Block* b) REQUIRES(mu_) {
    if (b->queue == BlockQueue::kLru) table_.AddGhost(b->key);
    if (!b->used) {
      if (b->origin == BlockOrigin::kHinted) ++counters_.hinted_evicted_unused;
      if (b->origin == BlockOrigin::kReadahead) ++counters_.readahead_evicted_unused;
    }
    ++counters_.evictions;
    table_.Erase(b);
  }
  // Frees buffers while the table is full: the coldest evict-first block, else the LRU tail.
  // False when every buffer is held or in flight.
  bool MakeRoomFromUnheld() REQUIRES(mu_);

  // ---- Disks and prefetches ----
  enum class Purpose { kHinted, kReadahead, kWarmup };
  // Prefetches in flight on `disk` (a disk whose reads fail counts as full: far above any
  // max_prefetches_per_disk).
  uint32_t PrefetchesInFlight(uint32_t disk) const REQUIRES(mu_) { return disk_prefetches_[disk]; }
  // Fewer than max_prefetches_per_disk prefetches in flight on `disk`.
  bool DiskHasRoom(uint32_t disk) const REQUIRES(mu_) {
    return disk_prefetches_[disk] < max_prefetches_per_disk_;
  }
  // Some disk has room for a prefetch. Wait-free, with or without mu(): the manager's wake-up
  // after a read or a completion reads it without the lock (a hit takes no mu()). Read without mu()
  // it may miss a completion racing with it, but that completion reads its own update when it wakes
  // the manager in turn, so no round is lost.
  bool AnyDiskHasRoom() const { return disks_with_room_.load(std::memory_order_acquire) != 0; }
  // The one way a new block leaves the manager: in flight for `purpose`, queued for submission
  // (DrainIssues), or nullptr when the block's disk has its share of prefetches in flight or the
  // table is full (the caller makes room first). It reads bytes [lo, hi) of the block (from its
  // start; rounded out to granules and min_read): a hint names the bytes it will read, and on a
  // disk whose transfer costs as much as its positioning (hp-c2247: 64 KiB take 18.7 ms, a seek
  // and half a turn 15.6 ms) the rest of the block is paid for and rarely read. Read-ahead and
  // warm-up ask for [0, block size). REQUIRES: the block is absent.
  virtual Block* IssuePrefetch(uint64_t ino, uint64_t block_index, Purpose purpose,
                               uint64_t file_size, int64_t now, uint32_t lo, uint32_t hi)
      REQUIRES(mu_) = 0;
  enum class Fill { kNotNeeded, kIssued, kLater };
  // A hint's bytes [lo, hi) of cached block b that b lacks (a demand read brought other granules
  // of it, or an earlier hint fewer): fetched now as a prefetch into the block (kIssued), or not
  // needed (b holds them, or b's fetch in flight brings them), or later (b's disk has its share
  // of prefetches in flight, or b's fetch in flight lacks some: one fetch fills a block at a
  // time). Without it those granules were read on demand, unhinted.
  virtual Fill PrefetchMissing(Block* b, uint32_t lo, uint32_t hi, uint64_t file_size, int64_t now)
      REQUIRES(mu_) = 0;
  // Submits the fetches queued under mu() (demand first). Takes mu() itself.
  virtual void DrainIssues() EXCLUDES(mu_) = 0;
  // Applies the hits the data path served under a shard's mutex alone (BlockShards) to the
  // queues and counters, in the order they happened. Cheap when there are none.
  virtual void ApplyDeferredHits() REQUIRES(mu_) = 0;

  // ---- Counters the manager reads ----
  // Read-ahead blocks issued, and read on demand before they were evicted (its accuracy).
  uint64_t readahead_issued() const REQUIRES(mu_) { return counters_.readahead_issued; }
  uint64_t readahead_hits() const REQUIRES(mu_) { return counters_.readahead_hits; }

 protected:
  // REQUIRES: layout outlives the buffers; block_size and capacity_blocks >= 1.
  CacheBuffers(const stripe::Layout& layout, uint32_t block_size, uint64_t capacity_blocks,
               uint32_t max_prefetches_per_disk);
  virtual ~CacheBuffers() = default;

  // The LRU tail window (and ghost list) k for a cache of this many blocks.
  static uint32_t TailWindowFor(uint64_t capacity_blocks);
  // The only writers of the per-disk prefetch counts and their bound, so that the count of disks
  // with room (AnyDiskHasRoom) follows them: a fetch issued (+1) or done (-1), a disk failing
  // (+FileCache::kFailedDiskPrefetches) or working again.
  void AdjustDiskPrefetches(uint32_t disk, int32_t delta) REQUIRES(mu_);
  void SetMaxPrefetchesPerDisk(uint32_t max_prefetches_per_disk) REQUIRES(mu_);

  // Constant after construction.
  const stripe::Layout& layout_;
  const uint32_t block_size_;
  const uint32_t disk_count_;

  // Protected by mu_. Lock order: TipManager::mu_, then mu_, then the Clock's own mutex
  // (NowNanos under mu_); a PendingRead's mu is never taken with mu_ held; mu_ is never held
  // across StripedIo calls, waits, or callers' callbacks.
  mutable Mutex mu_;
  uint64_t capacity_blocks_ GUARDED_BY(mu_);
  // The table's index, which the hit path also searches under a shard's own mutex (not mu_).
  BlockShards shards_;
  BlockTable table_ GUARDED_BY(mu_);
  // The data path's counter fields (the manager counts its own); gauges are filled in by
  // FileCache::Stats().
  CacheStats counters_ GUARDED_BY(mu_);

 private:
  uint32_t max_prefetches_per_disk_ GUARDED_BY(mu_);  // CacheOptions::max_prefetches_per_disk
  // Prefetches in flight per disk, plus FileCache::kFailedDiskPrefetches while the disk's reads
  // fail: every prefetch decision compares this with max_prefetches_per_disk, so a failing disk
  // looks full.
  std::vector<uint32_t> disk_prefetches_ GUARDED_BY(mu_);
  // Disks with DiskHasRoom: written under mu_ with the counts above, read without it too.
  std::atomic<uint32_t> disks_with_room_;
};

}  // namespace tipfs::cache
