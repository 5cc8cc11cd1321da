// BlockBuffer: the bytes of one cached block, and BufferPin: a reader's claim on them while it
// uses them without FileCache's lock (a copy out, or a FUSE reply straight from the buffer).
//
// A write patches a cached block's buffer in place only when it can prove that no reader uses
// the buffer (docs/DESIGN.md "Writes into cached blocks"); otherwise it patches a copy, which
// replaces the block's buffer, and readers keep the bytes they pinned. The proof:
//   - a pin is taken only under FileCache::mu_ or under the block's shard mutex (a hit without
//     mu_, cache/block_shards.h) (BufferPin is made only by FileCache::Pin), and released after
//     the reader's last access to the bytes, with a release decrement;
//   - the writer holds both mu_ and the shard mutex from its check to the end of its patch, and
//     loads the count with acquire. Every change of the count is a read-modify-write, so each
//     release decrement heads a release sequence that runs through every later change: a load
//     that reads 0 synchronizes with the decrement of every pin taken before (their increments
//     precede it in the count's modification order, as the locks order them before the load),
//     so those readers' accesses happen before the patch. A pin taken after the writer let go
//     of the locks happens after the patch and sees the new bytes.
// shared_ptr's use_count() would not do: it is a relaxed load, and a reader that has just let go
// of its reference is not ordered before the writer. The count is not a lifetime: the shared_ptr
// still keeps the buffer alive.
//
// Thread-safety: pins may be released on any thread; bytes() of a pinned buffer may be read
// without a lock; the count is read only by FileCache under its mu_.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <utility>

#include "cache/buffer_pool.h"

namespace tipfs::cache {

class FileCache;

class BlockBuffer {
 public:
  // Page-aligned, so a backing store that reads with O_DIRECT reads into it. The memory comes
  // from, and goes back to, the process-wide BufferPool (cache/buffer_pool.h): its bytes are
  // not zeroed (a fetch writes the granules it makes valid, and zeros past the file's end).
  explicit BlockBuffer(uint32_t size)
      : size_(RoundToPage(size)), bytes_(BufferPool::Global()->Take(size_)) {}
  ~BlockBuffer() { BufferPool::Global()->Give(bytes_, size_); }
  BlockBuffer(const BlockBuffer&) = delete;
  BlockBuffer& operator=(const BlockBuffer&) = delete;

  char* bytes() const { return bytes_; }
  // True when no reader holds a pin. REQUIRES: FileCache::mu_ and the block's shard mutex held
  // (so no pin is being taken).
  bool Unpinned() const { return pins_.load(std::memory_order_acquire) == 0; }

 private:
  friend class BufferPin;
  static size_t RoundToPage(uint32_t size) { return (size_t{size} + 4095) / 4096 * 4096; }

  const size_t size_;
  char* const bytes_;
  std::atomic<uint32_t> pins_{0};
};

class BufferPin {
 public:
  BufferPin() = default;
  BufferPin(BufferPin&& other) noexcept : buffer_(std::move(other.buffer_)) {}
  BufferPin& operator=(BufferPin&& other) noexcept {
    if (this != &other) {
      Reset();
      buffer_ = std::move(other.buffer_);
    }
    return *this;
  }
  BufferPin(const BufferPin&) = delete;
  BufferPin& operator=(const BufferPin&) = delete;
  ~BufferPin() { Reset(); }

  const char* bytes() const { return buffer_->bytes(); }
  explicit operator bool() const { return buffer_ != nullptr; }
  // Lets go of the buffer: after the holder's last access to its bytes.
  void Reset() {
    if (buffer_ == nullptr) return;
    buffer_->pins_.fetch_sub(1, std::memory_order_release);
    buffer_.reset();
  }

 private:
  friend class FileCache;  // pins only under its mu_ or a shard mutex (FileCache::Pin)
  explicit BufferPin(std::shared_ptr<BlockBuffer> buffer) : buffer_(std::move(buffer)) {
    // Relaxed: mu_ or the shard mutex orders it against the writer's check.
    buffer_->pins_.fetch_add(1, std::memory_order_relaxed);
  }

  std::shared_ptr<BlockBuffer> buffer_;
};

}  // namespace tipfs::cache
