// BlockTable: the cached blocks of every file and the queues that order them for eviction.
//
// A block is one aligned block of a file (ino, index), either valid (the granules of `data` that
// valid_mask names hold its bytes) or in flight (a Fetch is filling some of its granules). A valid
// block that no hint holds sits on one of two queues:
//   LRU          demand and read-ahead blocks, most recently used first. Its last k buffers form
//                the "tail window" and the keys of its last k evictions are kept as ghosts; hits
//                on either estimate the LRU queue's marginal hit ratio (TIP's H(n) - H(n-1)).
//   evict-first  blocks fetched for hints that were cancelled or skipped unread: the first to go.
// Blocks held by hints (hint_refs > 0) and blocks in flight are on no queue; the TIP manager
// decides about them through their hint streams.
//
// Not thread-safe: FileCache guards the table with its mutex, the owner's lock. The index of its
// blocks by key is a BlockShards (block_shards.h), which a hit may also search under a shard's
// own mutex; Insert and Erase change it under both.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "cache/block_buffer.h"
#include "cache/block_key.h"
#include "cache/block_shards.h"

namespace tipfs::cache {

// Why a block was read from the disks (counters and eviction placement depend on it).
enum class BlockOrigin : uint8_t { kDemand, kReadahead, kHinted, kWarmup };
enum class BlockQueue : uint8_t { kNone, kLru, kEvictFirst };

struct Fetch;  // an in-flight read, owned by FileCache

// The fields a hit reads (data, valid_mask, tail_end; key and id are fixed) change only under
// the owner's lock and the block's shard mutex together (BlockShards::ShardMutex); the others
// only under the owner's lock.
struct Block {
  BlockKey key;
  uint64_t id = 0;    // unique for the table's life: tells a re-created block from an old one
  uint32_t disk = 0;  // the disk holding the block (TIP's per-disk T_disk, prefetch bounds)
  // The block's buffer once its first fetch completed; readers pin it under the lock and read it
  // without. Only its valid granules are ever read, and a valid granule's bytes change only by a
  // write patching an unpinned buffer (a pinned one is patched in a copy that replaces it), so a
  // fetch may fill invalid granules of it while readers read valid ones.
  std::shared_ptr<BlockBuffer> data;
  // Which granules (FileCache::granule_bytes() each, bit i = granule i) mirror the disks. A
  // demand miss fetches only the granules its read needs (rounded to CacheOptions::min_read),
  // a prefetch the whole block, a block at the end of a file only as far as the file went; a
  // read that needs a missing granule fetches it.
  uint64_t valid_mask = 0;
  // A write that reached into a missing granule from its start (or from this end) left its
  // first bytes valid: [start of granule tail_end / granule, tail_end) mirror the disks although
  // the granule is not in valid_mask (an append, with no size known here for the rest). 0: none.
  uint32_t tail_end = 0;
  // Non-null while a fetch fills it (it is then on no queue). Set and cleared only through
  // BlockTable::BeginFetch and EndFetch, which keep the list of blocks in flight.
  Fetch* fetch = nullptr;
  uint32_t hint_refs = 0;  // hinted accesses holding this block (TIP's hinted buffers)
  BlockOrigin origin = BlockOrigin::kDemand;
  uint8_t hint_source = 0;   // HintSource of the hint that fetched it (origin kHinted)
  bool used = false;         // read on demand since it was fetched
  bool evict_first = false;  // goes to the evict-first queue when it becomes unheld and valid

  // Queue linkage (BlockTable private). `next` points toward the queue's cold end.
  BlockQueue queue = BlockQueue::kNone;
  bool in_tail = false;
  Block* prev = nullptr;
  Block* next = nullptr;
  uint32_t in_flight_slot = 0;  // its place in the table's list of blocks in flight (BlockTable)

  bool valid() const { return fetch == nullptr; }
};

// Per-file state: its blocks in index order and its write epoch. Every write, truncate or remove
// bumps `epoch` when it starts and when it ends; a fetch whose inode epoch changed while it was in
// flight, or that completes while a writer is active, may hold bytes older than the disks', so its
// data is not kept (FileCache::OnFetchDone).
struct InodeState {
  std::map<uint64_t, std::unique_ptr<Block>> blocks;
  uint64_t epoch = 0;
  uint32_t writers = 0;
};

class BlockTable {
 public:
  // `tail_window`: k, the LRU tail window and ghost list length (>= 1). REQUIRES: `index`
  // outlives the table, and only the table inserts into or erases from it.
  BlockTable(BlockShards* index, uint32_t tail_window);
  ~BlockTable();
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  Block* Find(uint64_t ino, uint64_t index) const { return index_->Find(ino, index); }
  // REQUIRES: no block (ino, index). The new block is on no queue.
  Block* Insert(uint64_t ino, uint64_t index, uint32_t disk);
  // Unqueues and deletes the block. REQUIRES: b->fetch == nullptr (the caller ended its fetch
  // with EndFetch and detached the Fetch); aborts otherwise.
  void Erase(Block* b);

  // A fetch starts filling b (which leaves its queue) / stops (b->fetch is cleared; the caller
  // queues or erases it). The table lists the blocks in flight so that statistics look at those
  // alone: FileCache::Stats runs for every TIPFS_IOC_QUERY and scrape, under the cache's lock.
  // REQUIRES: b->fetch == nullptr (BeginFetch), b->fetch != nullptr (EndFetch).
  void BeginFetch(Block* b, Fetch* f);
  void EndFetch(Block* b);
  uint64_t in_flight_size() const { return in_flight_.size(); }
  // Calls fn(const Block&) for every block in flight.
  template <typename Fn>
  void ForEachInFlight(Fn fn) const {
    for (const Block* b : in_flight_) fn(*b);
  }

  InodeState* FindInode(uint64_t ino);
  InodeState* GetInode(uint64_t ino);  // creates it
  // Drops the inode's state when it has no blocks and no writer.
  void MaybeDropInode(uint64_t ino);
  // Blocks of `ino` with first <= index <= last, in index order.
  void BlocksInRange(uint64_t ino, uint64_t first, uint64_t last, std::vector<Block*>* out);

  // Queues.
  void PushLru(Block* b);  // at the most recently used end
  void PushEvictFirst(Block* b);
  void Unqueue(Block* b);  // from whichever queue holds it
  Block* LruColdest() const { return lru_.cold; }
  Block* LruWarmest() const { return lru_.warm; }
  Block* EvictFirstColdest() const { return evict_first_.cold; }
  uint64_t lru_size() const { return lru_.size; }
  uint64_t evict_first_size() const { return evict_first_.size; }
  uint64_t size() const { return blocks_; }

  // The LRU tail window: k and how many buffers are in it now (min(k, lru_size)).
  uint32_t tail_window() const { return tail_window_; }
  uint64_t tail_count() const { return tail_count_; }
  // Remembers the key of a block evicted from the LRU queue.
  void AddGhost(const BlockKey& key);
  // True (and forgets it) when `key` is a ghost.
  bool TakeGhost(const BlockKey& key);
  // Changes k; the window and the ghost list are rebuilt.
  void SetTailWindow(uint32_t k);

 private:
  struct Queue {
    Block* warm = nullptr;  // most recently used end
    Block* cold = nullptr;  // next to evict
    uint64_t size = 0;
  };
  void Link(Queue* q, Block* b);
  void Unlink(Queue* q, Block* b);

  std::unordered_map<uint64_t, InodeState> inodes_;
  // Every block of inodes_, by key: Find is one probe of an open-addressed table (block_index.h).
  // A hit used to walk the file's std::map (about 15 dependent cache misses for a 1 GiB file in
  // 64 KiB blocks), 7.6 % of all samples of warm-rand-16 in direct mode, under mu_; then a
  // std::unordered_map (bucket, then node: 5 %). The maps stay for ranges in index order.
  BlockShards* const index_;
  uint64_t blocks_ = 0;
  uint64_t next_id_ = 1;
  std::vector<Block*> in_flight_;  // each at its in_flight_slot; unordered

  Queue lru_;
  Queue evict_first_;
  uint32_t tail_window_;
  uint64_t tail_count_ = 0;
  Block* tail_head_ = nullptr;  // the warmest block inside the LRU tail window

  std::deque<std::pair<BlockKey, uint64_t>> ghost_order_;  // key, generation
  std::unordered_map<BlockKey, uint64_t, BlockKeyHash> ghosts_;
  uint64_t ghost_generation_ = 0;
};

}  // namespace tipfs::cache
