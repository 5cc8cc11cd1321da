// Private parts of FileCache shared by its .cc files: in-flight fetches, waiting reads and
// per-process reader state. Not for use outside cache/.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

#include "cache/block_table.h"
#include "cache/cache_types.h"
#include "cache/tip_events.h"
#include "cache/tip_model.h"
#include "stripe/disk.h"
#include "util/mutex.h"
#include "util/status.h"

namespace tipfs::cache {

// One block read in flight. States: queued (in FileCache's issue lists) -> submitted to
// StripedIo -> done (status set, waiters woken). A write to the file while it is in flight
// detaches it from its block (block = nullptr): its readers still get its bytes, but the bytes
// never enter the cache. Owned by shared pointers: its own `self` until done, and every waiting
// read's part. `block`, `done` and `waiters` change only under the owning FileCache's mu_ (a lock
// of another object, which clang's analysis cannot name: FileCache's methods that touch them
// are REQUIRES(mu_)).
struct Fetch {
  BlockKey key;
  uint32_t disk = 0;
  bool prefetch = false;  // bounded per disk; issued with priority kPrefetch
  stripe::DiskRequest::Purpose purpose = stripe::DiskRequest::Purpose::kDemand;  // set at issue
  uint32_t offset = 0;  // where in the block the read starts (granule-aligned)
  uint32_t length = 0;  // bytes read from there (the rest of its granules are zeros)
  uint64_t mask = 0;    // the granules it makes valid
  // The block's buffer: a new one, or (a fetch of a partly valid block's missing granules) the
  // block's own, whose other granules readers may be reading meanwhile.
  int64_t submit_ns = 0;
  bool disk_was_idle = false;  // none of the cache's reads was on its disk at submission (T_disk)
  bool timed = false;          // its driver CPU time is sampled (T_driver)
  uint64_t inode_epoch = 0;
  std::shared_ptr<BlockBuffer> buffer;
  Block* block = nullptr;
  bool done = false;  // status and buffer final once set
  Status status;
  std::vector<std::shared_ptr<PendingRead>> waiters;
  std::shared_ptr<Fetch> self;  // keeps it alive until done
};

// One block of a read: its bytes, either already in memory or coming from a fetch (then `buffer`
// pins the fetch's buffer, taken when the read joined it: the buffer a completed fetch gives its
// block, which waiting readers copy from after the completion). Move-only.
struct ReadPart {
  BufferPin buffer;
  std::shared_ptr<Fetch> fetch;  // null: the bytes are valid in `buffer` already
};

// A read that waits for one or more fetches. The last fetch to complete either wakes the waiting
// thread (blocking Read) or finishes the read and calls `done` (ReadAsync).
struct PendingRead {
  char* out = nullptr;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t first_block = 0;
  uint32_t block_size = 0;
  int64_t start_ns = 0;
  bool demand = true;  // stall time counts only for demand readers
  std::vector<ReadPart> parts;
  std::shared_ptr<ReaderTiming> reader;  // stamped with the read's end (T_cpu)
  std::atomic<uint32_t> remaining{0};
  std::function<void(Result<size_t>)> done;           // empty for a blocking Read
  std::function<void(Result<ReadData>)> shared_done;  // ReadShared: out is null

  Mutex mu;
  CondVar cv;
  bool complete GUARDED_BY(mu) = false;
};

// Validity is tracked per granule in a 64-bit mask: 4 KiB granules up to 256 KiB blocks, larger
// granules beyond (a 1 MiB stripe unit has 16 KiB granules).
inline uint32_t GranuleBytesFor(uint32_t block_size) {
  return std::max<uint32_t>(4096, block_size / 64);
}

inline std::shared_ptr<BlockBuffer> NewBlockBuffer(uint32_t block_size) {
  return std::make_shared<BlockBuffer>(block_size);
}

inline uint64_t RoundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

// One demand read (T_hit) or fetch submission (T_driver) in this many has its CPU time measured:
// the thread CPU clock is a system call (about 0.5 us here), too dear for every hit.
constexpr uint32_t kCpuSampleEvery = 64;
// Hits kept in BlockShards before the thread that finds so many applies them to the queues if
// the cache's lock is free (FileCache::HitWithoutTableLock), and before it waits for the lock.
// The batch bounds how stale the LRU order may be between two looks at it (each look applies
// what is kept: an eviction, a miss, Stats).
constexpr uint64_t kDeferredHitsBatch = 256;
constexpr uint64_t kDeferredHitsHardLimit = 16384;

// Copies the bytes of [offset, offset + length) out of the parts (part i is block first_block+i),
// or (out == nullptr) appends references to them to *shared, which take over the parts' pins.
// The caller clears the parts after: that releases the pins of the copy.
Status CopyParts(std::vector<ReadPart>* parts, uint64_t first_block, uint32_t block_size,
                 uint64_t offset, uint64_t length, char* out, ReadData* shared = nullptr);

}  // namespace tipfs::cache
