// FileCache's granules: which parts of a block are valid (a 64-bit mask of granules), and the
// fetches a demand miss starts for the granules it lacks (rounded to min_read), into a new block,
// into a partly valid block's own buffer, or into a copy of it. Called under mu_ from StartRead
// (file_cache.cc).
#include <bit>
#include <cstring>

#include "cache/file_cache.h"
#include "cache/file_cache_internal.h"
#include "cache/tip_manager.h"

namespace tipfs::cache {

namespace {

// Granules [lo, hi) of `m` as bytes when its set bits are one run, else false.
bool OneRun(uint64_t m, uint32_t granule, uint32_t* lo, uint32_t* hi) {
  if (m == 0) return false;
  const int first = std::countr_zero(m);
  const int last = 63 - std::countl_zero(m);
  const uint64_t run =
      (last - first == 63 ? ~uint64_t{0} : ((uint64_t{1} << (last - first + 1)) - 1)) << first;
  if (run != m) return false;
  *lo = static_cast<uint32_t>(first) * granule;
  *hi = static_cast<uint32_t>(last + 1) * granule;
  return true;
}

}  // namespace

BufferPin FileCache::Pin(const std::shared_ptr<BlockBuffer>& buffer) const {
  return BufferPin(buffer);
}

ReadPart FileCache::JoinFetch(std::shared_ptr<Fetch> fetch) const {
  BufferPin pin = Pin(fetch->buffer);
  return ReadPart{std::move(pin), std::move(fetch)};
}

uint64_t FileCache::GranuleMask(uint64_t lo, uint64_t hi) const {
  if (hi <= lo) return 0;
  const uint64_t first = lo / granule_bytes_;
  const uint64_t count = (hi - 1) / granule_bytes_ - first + 1;
  return (count >= 64 ? ~uint64_t{0} : (uint64_t{1} << count) - 1) << first;
}

bool FileCache::Holds(const Block& b, uint32_t lo, uint32_t hi) const {
  if (b.data == nullptr) return false;
  const uint64_t missing = GranuleMask(lo, hi) & ~b.valid_mask;
  if (missing == 0) return true;
  return b.tail_end != 0 && missing == uint64_t{1} << (b.tail_end / granule_bytes_) &&
         hi <= b.tail_end;
}

void FileCache::FillFromFetch(Block* b, const Fetch& fetch) {
  MutexLock shard(shards_.ShardMutex(b->key.ino, b->key.index));
  b->data = fetch.buffer;
  b->valid_mask |= fetch.mask;
  ForgetCoveredTail(b);
}

void FileCache::ForgetCoveredTail(Block* b) const {
  if (b->tail_end != 0 && (b->valid_mask >> (b->tail_end / granule_bytes_) & 1) != 0) {
    b->tail_end = 0;  // its granule is valid as a whole now
  }
}

std::shared_ptr<Fetch> FileCache::NewFetch(uint64_t ino, uint64_t index, bool prefetch,
                                           uint64_t file_size, int64_t now, uint32_t lo,
                                           uint32_t hi, std::shared_ptr<BlockBuffer> buffer) {
  // Only as far as the file goes, rounded up to a page; at least a page (a block past the end).
  const uint64_t start = index * block_size_;
  const uint64_t file_end = file_size > start ? RoundUp(file_size - start, 4096) : 0;
  uint32_t read_hi = static_cast<uint32_t>(std::min<uint64_t>(hi, file_end));
  if (read_hi <= lo) read_hi = lo + 4096;
  auto f = std::make_shared<Fetch>();
  f->key = BlockKey{ino, index};
  f->disk = DiskOf(ino, index);
  f->prefetch = prefetch;
  f->submit_ns = now;
  f->offset = lo;
  f->length = read_hi - lo;
  f->mask = GranuleMask(lo, read_hi);
  // T_driver is the whole CPU cost of a fetch (Patterson 1995: what a miss costs the CPU beyond
  // T_hit): this allocation, the submission (DrainIssues) and the completion (OnFetchDone), for
  // one fetch in kCpuSampleEvery.
  thread_local uint32_t driver_sample = 0;
  f->timed = ++driver_sample % kCpuSampleEvery == 1;
  const int64_t cpu0 = f->timed ? clock_->ThreadCpuNanos() : 0;
  f->buffer = buffer != nullptr ? std::move(buffer) : NewBlockBuffer(block_size_);
  // The rest of the last granule is past the end of the file: zeros, as the disks would read.
  const uint64_t granule_end = std::min<uint64_t>(RoundUp(read_hi, granule_bytes_), block_size_);
  if (granule_end > read_hi) std::memset(f->buffer->bytes() + read_hi, 0, granule_end - read_hi);
  if (f->timed) manager_->events()->RecordDriver(clock_->ThreadCpuNanos() - cpu0, 0);
  f->self = f;
  if (prefetch) {
    AdjustDiskPrefetches(f->disk, 1);
    issue_prefetch_.push_back(f);
  } else {
    issue_demand_.push_back(f);
  }
  issues_queued_.store(true, std::memory_order_release);
  fetches_in_flight_.fetch_add(1, std::memory_order_relaxed);
  return f;
}

Block* FileCache::NewFetchedBlock(uint64_t ino, uint64_t index, BlockOrigin origin, bool prefetch,
                                  uint64_t file_size, int64_t now, uint32_t lo, uint32_t hi) {
  Block* b = table_.Insert(ino, index, DiskOf(ino, index));
  b->origin = origin;
  b->used = origin == BlockOrigin::kDemand;
  std::shared_ptr<Fetch> f =
      NewFetch(ino, index, prefetch, file_size, now, lo, std::min(hi, block_size_), nullptr);
  f->block = b;
  f->inode_epoch = table_.GetInode(ino)->epoch;
  table_.BeginFetch(b, f.get());
  return b;
}

std::pair<uint32_t, uint32_t> FileCache::RoundToMinRead(uint32_t lo, uint32_t hi) const {
  const uint32_t min_read = options_.min_read;
  return {lo / min_read * min_read,
          static_cast<uint32_t>(std::min<uint64_t>(RoundUp(hi, min_read), block_size_))};
}

std::shared_ptr<Fetch> FileCache::FetchMissing(Block* b, uint32_t lo, uint32_t hi, bool prefetch,
                                               uint64_t file_size, int64_t now) {
  // One run goes into the block's own buffer: a fetch never rewrites a valid granule, which
  // readers may be reading. Several runs are read as one span (re-reading the valid granules
  // between them, which the disks hold as the cache does) into a copy of the buffer that
  // replaces it when the fetch completes.
  const auto [round_lo, round_hi] = RoundToMinRead(lo, hi);
  const uint64_t missing = GranuleMask(round_lo, round_hi) & ~b->valid_mask;
  uint32_t run_lo = 0;
  uint32_t run_hi = 0;
  std::shared_ptr<BlockBuffer> buffer = b->data;
  // The tail's bytes are valid too: a fetch of its granule goes to a copy as well.
  const uint64_t tail = b->tail_end != 0 ? uint64_t{1} << (b->tail_end / granule_bytes_) : 0;
  if (!OneRun(missing, granule_bytes_, &run_lo, &run_hi) || (missing & tail) != 0) {
    run_lo = static_cast<uint32_t>(std::countr_zero(missing)) * granule_bytes_;
    run_hi = static_cast<uint32_t>(64 - std::countl_zero(missing)) * granule_bytes_;
    buffer = NewBlockBuffer(block_size_);
    std::memcpy(buffer->bytes(), b->data->bytes(), block_size_);
    if (!prefetch) ++counters_.demand_span_fetches;
  }
  std::shared_ptr<Fetch> f = NewFetch(b->key.ino, b->key.index, prefetch, file_size, now, run_lo,
                                      run_hi, std::move(buffer));
  f->block = b;
  f->inode_epoch = table_.GetInode(b->key.ino)->epoch;
  table_.BeginFetch(b, f.get());  // a block being filled is on no queue
  return f;
}

bool FileCache::FetchBrings(const Block& b, uint64_t needed) const {
  return (needed & ~b.valid_mask & ~b.fetch->mask) == 0;
}

CacheBuffers::Fill FileCache::PrefetchMissing(Block* b, uint32_t lo, uint32_t hi,
                                              uint64_t file_size, int64_t now) {
  if (Holds(*b, lo, hi)) return Fill::kNotNeeded;
  // A block without data is being filled (a failed fetch erases its block).
  if (b->fetch != nullptr) {
    return FetchBrings(*b, GranuleMask(lo, hi)) ? Fill::kNotNeeded : Fill::kLater;
  }
  if (!DiskHasRoom(b->disk)) return Fill::kLater;
  ++counters_.hinted_fills;
  FetchMissing(b, lo, hi, /*prefetch=*/true, file_size, now);
  return Fill::kIssued;
}

ReadPart FileCache::DemandPart(const ReadContext& ctx, uint64_t ino, uint64_t index, Block* b,
                               uint32_t lo, uint32_t hi, uint64_t file_size, int64_t now,
                               LruEvents* lru) {
  const bool demand = !ctx.speculative;
  const uint64_t needed = GranuleMask(lo, hi);
  if (demand) ++counters_.demand_misses;
  if (b == nullptr) {
    if (demand) {
      ++lru->accesses;
      if (table_.TakeGhost(BlockKey{ino, index})) {
        ++lru->ghost_hits;
        ++counters_.ghost_hits;
      }
    }
    MakeRoomFromUnheld();  // else overshoot: a demand read never waits for a buffer
    const auto [round_lo, round_hi] = RoundToMinRead(lo, hi);
    b = NewFetchedBlock(ino, index, BlockOrigin::kDemand, /*prefetch=*/false, file_size, now,
                        round_lo, round_hi);
    return JoinFetch(b->fetch->self);
  }
  if (demand) {
    if (b->fetch == nullptr) ++lru->accesses;
    if (!b->used && b->origin == BlockOrigin::kHinted) ++counters_.hinted_used;
    if (!b->used && b->origin == BlockOrigin::kReadahead) ++counters_.readahead_hits;
    b->used = true;
    b->evict_first = false;
  }
  if (b->fetch != nullptr) {
    // The fetch in flight brings what is missing: wait for it, never fetch a granule twice.
    if (FetchBrings(*b, needed)) {
      if (demand) ++counters_.inflight_waits;
      return JoinFetch(b->fetch->self);
    }
  } else {
    return JoinFetch(FetchMissing(b, lo, hi, /*prefetch=*/false, file_size, now));
  }
  // Another fetch is filling the block and does not bring all this read needs: its granules
  // come in a buffer of its own, kept by no block (rare: concurrent readers of different parts
  // of one block).
  ++counters_.demand_private_fetches;
  const uint32_t g_lo = lo / granule_bytes_ * granule_bytes_;
  const uint32_t g_hi = static_cast<uint32_t>(RoundUp(hi, granule_bytes_));
  return JoinFetch(NewFetch(ino, index, /*prefetch=*/false, file_size, now, g_lo, g_hi, nullptr));
}

}  // namespace tipfs::cache
