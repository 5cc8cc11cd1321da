// BufferPool: page-aligned memory for the cache's block buffers, kept for the next buffer of the
// same size instead of going back to malloc. Every demand miss takes a block's worth of buffer
// and (evicting one) gives one back; through glibc each 64 KiB buffer was an aligned_alloc and a
// free outside the thread caches, under FileCache::mu_, that now and then trimmed the arena
// (madvise, mprotect, brk) so the next buffer's pages faulted in again inside the disk read:
// about 9 % of the daemon's samples at nvme-rand-32 (bench/fast/README.md, "The miss path's
// CPU"). The pool keeps at most kMaxPooledBytes free per size, so the memory it holds beyond
// the cache's own is bounded; sizes above kMaxPooledSize go straight to malloc.
//
// Thread-safety: Take and Give may be called from any thread; one leaf lock (nothing is called
// while it is held). The process-wide pool is never destroyed, so a buffer may outlive every
// cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "util/mutex.h"

namespace tipfs::cache {

class BufferPool {
 public:
  static constexpr size_t kPage = 4096;
  static constexpr size_t kMaxPooledSize = size_t{4} << 20;
  static constexpr size_t kMaxPooledBytes = size_t{16} << 20;  // free, per size

  // The pool every BlockBuffer uses.
  static BufferPool* Global();

  BufferPool() = default;
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // `bytes` (a multiple of kPage) of page-aligned memory, not zeroed; nullptr only when the
  // system has no memory left.
  char* Take(size_t bytes);
  // Gives back what Take returned for the same `bytes`.
  void Give(char* memory, size_t bytes);

  // Buffers handed out from the pool and newly allocated; buffers now free in it.
  struct Stats {
    uint64_t reused = 0;
    uint64_t allocated = 0;
    uint64_t pooled = 0;
  };
  Stats GetStats() const;

 private:
  struct SizeClass {
    size_t bytes = 0;
    std::vector<char*> free;
  };
  // The class of `bytes`, made on first use (a cache uses one or two sizes). REQUIRES: mu_.
  SizeClass* ClassOf(size_t bytes) REQUIRES(mu_);

  mutable Mutex mu_;
  std::vector<SizeClass> classes_ GUARDED_BY(mu_);
  uint64_t reused_ GUARDED_BY(mu_) = 0;
  uint64_t allocated_ GUARDED_BY(mu_) = 0;
};

}  // namespace tipfs::cache
