// Layout: where each byte of a file lives. Pure arithmetic, no I/O; thread-safe (immutable).
//
// A file is cut into stripe units. Unit k of file `ino` lives on disk (StartDisk(ino) + k) mod N,
// where the start disk rotates by inode so small files spread over all disks. Each disk keeps one
// sparse object per file holding that disk's units back to back: unit k sits at object offset
// (k / N) * unit (the object-per-disk layout of PVFS and Lustre).
#pragma once

#include <cstdint>
#include <vector>

#include "stripe/disk.h"

namespace tipfs::stripe {

// One contiguous piece of a file range on one disk.
struct Extent {
  uint32_t disk = 0;
  uint64_t object_offset = 0;
  uint64_t file_offset = 0;
  uint64_t length = 0;
};

class Layout {
 public:
  // REQUIRES: 1 <= disk_count <= kMaxDisks, stripe_unit a power of two >= 4096.
  Layout(uint32_t disk_count, uint32_t stripe_unit);

  static constexpr uint32_t kMaxDisks = 64;

  uint32_t disk_count() const { return disk_count_; }
  uint32_t stripe_unit() const { return stripe_unit_; }

  uint32_t StartDisk(ObjectId ino) const;
  uint32_t DiskOfUnit(ObjectId ino, uint64_t unit_index) const;
  uint32_t DiskOfOffset(ObjectId ino, uint64_t file_offset) const;

  // Appends the pieces of [offset, offset + length) to *out in file order, one per stripe unit
  // touched (pieces that are contiguous on one disk, as every unit is when N == 1, are merged).
  void Map(ObjectId ino, uint64_t offset, uint64_t length, std::vector<Extent>* out) const;

  // The length disk `disk`'s object has when the file is `file_size` bytes long and dense.
  uint64_t ObjectSize(ObjectId ino, uint32_t disk, uint64_t file_size) const;

  // Where in disk `disk`'s object the first file byte at or after `file_offset` that lives on
  // that disk sits. With FileOffsetOf, its inverse, a search inside one object (holes, data)
  // maps back to the file: both are monotonic.
  uint64_t ObjectOffsetAtOrAfter(ObjectId ino, uint32_t disk, uint64_t file_offset) const;
  // The file offset of byte `object_offset` of disk `disk`'s object.
  uint64_t FileOffsetOf(ObjectId ino, uint32_t disk, uint64_t object_offset) const;

 private:
  uint32_t disk_count_;
  uint32_t stripe_unit_;
};

}  // namespace tipfs::stripe
