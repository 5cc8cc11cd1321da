// FileCache's write side: write-through writes that patch the cached blocks they cover, truncate
// and remove, and the detaching of fetches in flight that a write makes stale. Reads and fetch
// completion are in file_cache.cc.
#include <algorithm>
#include <cstring>
#include <limits>

#include "cache/file_cache.h"
#include "cache/file_cache_internal.h"
#include "cache/tip_manager.h"

namespace tipfs::cache {

void FileCache::DetachInFlight(uint64_t ino, uint64_t first, uint64_t last) {
  std::vector<Block*> blocks;
  table_.BlocksInRange(ino, first, last, &blocks);
  for (Block* b : blocks) {
    if (b->valid()) continue;
    b->fetch->block = nullptr;
    table_.EndFetch(b);
    table_.Erase(b);
  }
}

void FileCache::DropBlocks(uint64_t ino, uint64_t first, uint64_t last) {
  DetachInFlight(ino, first, last);
  std::vector<Block*> blocks;
  table_.BlocksInRange(ino, first, last, &blocks);
  for (Block* b : blocks) table_.Erase(b);
}

Status FileCache::Write(uint64_t ino, uint64_t offset, const char* data, size_t length) {
  if (length == 0) return Status::OK();
  const uint64_t first = offset / block_size_;
  const uint64_t last = (offset + length - 1) / block_size_;
  uint64_t my_epoch;
  {
    MutexLock lock(&mu_);
    InodeState* inode = table_.GetInode(ino);
    ++inode->epoch;
    ++inode->writers;
    my_epoch = inode->epoch;
    DetachInFlight(ino, first, last);
  }
  Status st = io_->Write(ino, offset, data, length);
  MutexLock lock(&mu_);
  InodeState* inode = table_.GetInode(ino);
  // Patch cached blocks only when no other write to the file overlapped this one in time: then
  // the disks hold exactly these bytes. Otherwise the order the disks applied is unknown: drop.
  const bool alone = st.ok() && inode->writers == 1 && inode->epoch == my_epoch;
  DetachInFlight(ino, first, last);
  std::vector<Block*> blocks;
  table_.BlocksInRange(ino, first, last, &blocks);
  for (Block* b : blocks) {
    if (!alone) {
      table_.Erase(b);
      ++counters_.write_blocks_dropped;
      continue;
    }
    const uint64_t block_start = b->key.index * block_size_;
    const uint64_t lo = std::max<uint64_t>(offset, block_start);
    const uint64_t hi = std::min<uint64_t>(offset + length, block_start + block_size_);
    // Readers use a buffer without the lock while they pin it (a copy out, a FUSE reply from
    // it): a pinned buffer is never changed, the patch goes into a copy that replaces it. An
    // unpinned one is patched in place; cache/block_buffer.h says why that is safe (not
    // use_count(), which is read without ordering). No fetch fills this block (DetachInFlight),
    // so nothing else writes into the buffer meanwhile. The block's shard mutex excludes a hit
    // pinning the buffer without mu_ from the check to the end of the patch.
    MutexLock shard(shards_.ShardMutex(b->key.ino, b->key.index));
    if (b->data->Unpinned()) {
      ++counters_.write_blocks_patched_in_place;
    } else {
      std::shared_ptr<BlockBuffer> patched = NewBlockBuffer(block_size_);
      std::memcpy(patched->bytes(), b->data->bytes(), block_size_);
      counters_.write_copied_bytes += block_size_;
      b->data = std::move(patched);
    }
    std::memcpy(b->data->bytes() + (lo - block_start), data + (lo - offset), hi - lo);
    // Granules the write covers wholly now mirror the disks; one it covers in part only if it
    // did before (the rest of it is still to be read from the disks).
    const uint32_t lo_rel = static_cast<uint32_t>(lo - block_start);
    const uint32_t hi_rel = static_cast<uint32_t>(hi - block_start);
    b->valid_mask |=
        GranuleMask(RoundUp(lo_rel, granule_bytes_), hi_rel / granule_bytes_ * granule_bytes_);
    // A write that ends inside a missing granule it reached from the granule's start (or from
    // the tail's end) makes that granule's first bytes valid: the append case.
    const uint32_t g = hi_rel / granule_bytes_;
    const bool same_tail = b->tail_end != 0 && b->tail_end / granule_bytes_ == g;
    if (hi_rel % granule_bytes_ != 0 && (b->valid_mask >> g & 1) == 0 &&
        (lo_rel <= g * granule_bytes_ || (same_tail && lo_rel <= b->tail_end))) {
      b->tail_end = same_tail ? std::max(b->tail_end, hi_rel) : hi_rel;
    }
    ForgetCoveredTail(b);
    ++counters_.write_blocks_updated;
  }
  ++inode->epoch;
  --inode->writers;
  table_.MaybeDropInode(ino);
  return st;
}

Status FileCache::Truncate(uint64_t ino, uint64_t old_size, uint64_t new_size) {
  const uint64_t first = std::min(old_size, new_size) / block_size_;
  constexpr uint64_t kEnd = std::numeric_limits<uint64_t>::max();
  {
    MutexLock lock(&mu_);
    InodeState* inode = table_.GetInode(ino);
    ++inode->epoch;
    ++inode->writers;
    DetachInFlight(ino, first, kEnd);
  }
  Status st = io_->Truncate(ino, old_size, new_size);
  MutexLock lock(&mu_);
  // The block holding the new end and everything after it are re-read from the disks when
  // needed, so the cache can never disagree with the disks about bytes past either end.
  DropBlocks(ino, first, kEnd);
  InodeState* inode = table_.GetInode(ino);
  ++inode->epoch;
  --inode->writers;
  table_.MaybeDropInode(ino);
  return st;
}

Status FileCache::Sync(uint64_t ino) { return io_->Sync(ino); }

Status FileCache::Remove(uint64_t ino) {
  constexpr uint64_t kEnd = std::numeric_limits<uint64_t>::max();
  manager_->DropInode(ino);
  {
    MutexLock lock(&mu_);
    InodeState* inode = table_.GetInode(ino);
    ++inode->epoch;
    ++inode->writers;
    DropBlocks(ino, 0, kEnd);
  }
  Status st = io_->Remove(ino);
  MutexLock lock(&mu_);
  DropBlocks(ino, 0, kEnd);
  InodeState* inode = table_.GetInode(ino);
  ++inode->epoch;
  --inode->writers;
  table_.MaybeDropInode(ino);
  return st;
}

}  // namespace tipfs::cache
