// BlockShards: the block table's index from (inode, block index) to its Block, split into shards
// that each have a mutex of their own, so that a read which hits takes no lock of the whole
// volume (issue 11; docs/DESIGN.md "The hit path").
//
// Every other use of the table runs under its owner's lock (FileCache::mu_). The owner inserts
// and erases under that lock and the shard's mutex together, and changes the fields of a Block
// that a hit reads (data, valid_mask, tail_end) under both as well. So a lookup, and a read of
// those fields, is valid under either lock: the owner's, or the block's shard mutex, which the
// hit path takes alone. A hit served so cannot move its block in the eviction queues (they are
// the owner's): it leaves a DeferredHit in its shard, which the owner applies in the order the
// hits happened before anything that reads the queues' order (FileCache::ApplyDeferredHits),
// as BP-Wrapper batches the LRU updates of a buffer pool (Ding et al., ICDE 2009).
//
// Thread-safety: ShardMutex, DeferHits, HasDeferredHits and TakeDeferredHits may be called from
// any thread; Find as said above; Insert and Erase by the owner only (they take the shard's
// mutex themselves).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cache/block_index.h"
#include "cache/block_key.h"
#include "util/mutex.h"

namespace tipfs::cache {

struct Block;

// A demand hit served under its block's shard mutex only, for the owner to apply.
struct DeferredHit {
  uint64_t seq = 0;  // the order of the hits across every shard (DeferHits sets it)
  BlockKey key;
  uint64_t id = 0;     // the block hit (Block::id): a block made at the key since is another
  uint32_t reads = 0;  // demand reads this hit ends: 1 on the last block of a read
};

class BlockShards {
 public:
  static constexpr size_t kShards = 64;

  BlockShards() = default;
  BlockShards(const BlockShards&) = delete;
  BlockShards& operator=(const BlockShards&) = delete;

  // The mutex of the shard of (ino, index). A Block* found under it stays valid, and its hit
  // fields unchanged, until it is released.
  Mutex* ShardMutex(uint64_t ino, uint64_t index) const { return &shards_[ShardOf(ino, index)].mu; }
  // REQUIRES: the owner's lock or ShardMutex(ino, index).
  Block* Find(uint64_t ino, uint64_t index) const {
    return shards_[ShardOf(ino, index)].index.Find(ino, index);
  }
  // REQUIRES: the owner's lock; (ino, index) absent (Insert) or present (Erase).
  void Insert(uint64_t ino, uint64_t index, Block* block);
  void Erase(uint64_t ino, uint64_t index);

  // REQUIRES: ShardMutex(ino, index) held. Keeps *hits (a read's, of any blocks) in that shard
  // for the owner and clears *hits; returns how many hits all shards keep now.
  uint64_t DeferHits(uint64_t ino, uint64_t index, std::vector<DeferredHit>* hits);
  // True when some shard keeps hits. A relaxed load: a hit deferred by another thread at the
  // same time may be missed (it is applied at the owner's next look).
  bool HasDeferredHits() const { return deferred_.load(std::memory_order_relaxed) != 0; }
  // Appends every shard's hits to *out (in shard order, not yet in seq order), taking each
  // non-empty shard's mutex in turn.
  void TakeDeferredHits(std::vector<DeferredHit>* out);

 private:
  // Aligned so that readers of different shards do not share a cache line.
  struct alignas(64) Shard {
    mutable Mutex mu;
    BlockIndex index;  // changed under mu and the owner's lock
    std::vector<DeferredHit> hits GUARDED_BY(mu);
    std::atomic<uint32_t> hit_count{0};  // hits.size(), read without mu to skip empty shards
  };
  static size_t ShardOf(uint64_t ino, uint64_t index) {
    // The top bits of the key's hash: BlockIndex places keys by their own low bits, so each
    // shard's table fills evenly.
    return static_cast<size_t>(BlockKeyHash{}(BlockKey{ino, index}) >> 58) % kShards;
  }

  std::array<Shard, kShards> shards_;
  std::atomic<uint64_t> hit_seq_{0};
  std::atomic<uint64_t> deferred_{0};  // hits kept in every shard
};

}  // namespace tipfs::cache
