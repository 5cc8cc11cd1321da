// ReadWindow: the buffering of a program's read-only stdio stream on a watched file, which
// libtipspec turns into a fopencookie stream so that the program's refills are reads it sees
// (interpose.cc). glibc gives such a stream no position of its own: every fseek drops its buffer
// and calls the cookie, and every refill is a read of the buffer's size from where the stream
// stands. A plain stream keeps its buffer across a seek into it and refills from a buffer-aligned
// offset. Without that, GNU ld (seeking about each object, reading a few KB at each place) made
// 13,521 reads of the mount under `tipfs run` against 5,137 without, and read 140 MB for 37 MB.
// The window keeps the bytes of the last read and serves the stream from them while it stands
// inside: a read after a seek takes `first_read` bytes from a multiple of `first_read`; reads
// that go on where the last one ended double, up to the window's capacity (st_blksize), so a
// sequential reader reads large pieces (as a plain stream's fread does, reading whole buffers
// straight into the caller's memory). The bytes stand for the file until the stream reads
// elsewhere, as a plain stream's buffer does (for at most BUFSIZ of them).
// Pure (the caller passes the read), so unit tests drive it; not thread-safe (one per stream,
// and glibc locks the stream around its calls).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace tipfs::spec {

class ReadWindow {
 public:
  // `storage` holds `capacity` bytes and outlives the window; 0 < first_read <= capacity.
  ReadWindow(char* storage, size_t capacity, size_t first_read, off64_t position)
      : storage_(storage), capacity_(capacity), first_read_(first_read), position_(position) {}

  off64_t position() const { return position_; }
  // The stream moved to `position` (>= 0): nothing is read until the next Read.
  void Seek(off64_t position) { position_ = position; }

  // Up to `size` bytes at the position into `out`, the position moving past them: from the
  // window, or after `read_at(offset, buffer, length)` (bytes read, 0 at the end, -1 on error
  // with errno set) has refilled it. 0 at the end of the file, -1 when the read failed.
  template <typename ReadAt>
  ssize_t Read(char* out, size_t size, ReadAt read_at) {
    const off64_t end = offset_ + static_cast<off64_t>(length_);
    if (position_ < offset_ || position_ >= end) {
      // Where the last read ended the next one starts (at the end of the file it reads nothing,
      // as a plain stream's does), twice as long when the last one came back whole.
      const bool at_end = last_read_ != 0 && position_ == end;
      const size_t length =
          at_end && length_ == last_read_ ? std::min(2 * last_read_, capacity_) : first_read_;
      const off64_t offset =
          at_end ? position_ : position_ / static_cast<off64_t>(first_read_) * first_read_;
      const ssize_t n = read_at(offset, storage_, length);
      if (n < 0) return -1;
      offset_ = offset;
      length_ = static_cast<size_t>(n);
      last_read_ = length;
      if (position_ >= offset_ + n) return 0;
    }
    const size_t n = std::min(size, static_cast<size_t>(offset_ + length_ - position_));
    std::memcpy(out, storage_ + (position_ - offset_), n);
    position_ += static_cast<off64_t>(n);
    return static_cast<ssize_t>(n);
  }

 private:
  char* const storage_;
  const size_t capacity_;
  const size_t first_read_;
  off64_t position_;
  off64_t offset_ = 0;    // the file offset of storage_[0]
  size_t length_ = 0;     // bytes of the file in storage_
  size_t last_read_ = 0;  // the length the last read asked for
};

}  // namespace tipfs::spec
