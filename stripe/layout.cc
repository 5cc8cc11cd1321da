// Layout arithmetic and the disk error merge rule. See layout.h for the placement rule.
#include "stripe/layout.h"

#include <algorithm>
#include <cassert>

namespace tipfs::stripe {

Layout::Layout(uint32_t disk_count, uint32_t stripe_unit)
    : disk_count_(disk_count), stripe_unit_(stripe_unit) {
  assert(disk_count >= 1 && disk_count <= kMaxDisks);
  assert(stripe_unit >= 4096 && (stripe_unit & (stripe_unit - 1)) == 0);
}

uint32_t Layout::StartDisk(ObjectId ino) const { return static_cast<uint32_t>(ino % disk_count_); }

uint32_t Layout::DiskOfUnit(ObjectId ino, uint64_t unit_index) const {
  // (start + k) mod N without overflow: both terms are reduced first.
  return static_cast<uint32_t>((StartDisk(ino) + unit_index % disk_count_) % disk_count_);
}

uint32_t Layout::DiskOfOffset(ObjectId ino, uint64_t file_offset) const {
  return DiskOfUnit(ino, file_offset / stripe_unit_);
}

void Layout::Map(ObjectId ino, uint64_t offset, uint64_t length, std::vector<Extent>* out) const {
  const size_t first_piece = out->size();
  uint64_t pos = offset;
  const uint64_t end = offset + length;
  while (pos < end) {
    const uint64_t unit = pos / stripe_unit_;
    const uint64_t in_unit = pos % stripe_unit_;
    const uint64_t n = std::min<uint64_t>(stripe_unit_ - in_unit, end - pos);
    const uint32_t disk = DiskOfUnit(ino, unit);
    const uint64_t object_offset = (unit / disk_count_) * stripe_unit_ + in_unit;
    if (out->size() > first_piece) {
      Extent& last = out->back();
      if (last.disk == disk && last.object_offset + last.length == object_offset) {
        last.length += n;  // contiguous on the same disk (always so when N == 1)
        pos += n;
        continue;
      }
    }
    out->push_back(Extent{disk, object_offset, pos, n});
    pos += n;
  }
}

uint64_t Layout::ObjectSize(ObjectId ino, uint32_t disk, uint64_t file_size) const {
  if (file_size == 0) return 0;
  const uint64_t last_unit = (file_size - 1) / stripe_unit_;
  // Position of this disk in the file's rotation: units r, r + N, r + 2N, ... live on it.
  const uint64_t r = (disk + disk_count_ - StartDisk(ino)) % disk_count_;
  if (r > last_unit) return 0;
  const uint64_t last_here = r + ((last_unit - r) / disk_count_) * disk_count_;
  const uint64_t object_offset = (last_here / disk_count_) * stripe_unit_;
  if (last_here == last_unit) return object_offset + (file_size - last_unit * stripe_unit_);
  return object_offset + stripe_unit_;
}

namespace {

// mergerfs-style fixed precedence: an I/O error is never hidden behind a milder one.
int ErrorRank(const Status& s) {
  switch (s.error()) {
    case 0:
      return 0;
    case EIO:
      return 4;
    case EROFS:
      return 3;
    case ENOSPC:
      return 2;
    default:
      return 1;
  }
}

}  // namespace

uint64_t Layout::ObjectOffsetAtOrAfter(ObjectId ino, uint32_t disk, uint64_t file_offset) const {
  const uint64_t unit = file_offset / stripe_unit_;
  const uint64_t behind = (disk + disk_count_ - DiskOfUnit(ino, unit)) % disk_count_;
  if (behind == 0) return (unit / disk_count_) * stripe_unit_ + file_offset % stripe_unit_;
  return ((unit + behind) / disk_count_) * stripe_unit_;  // the start of its next unit there
}

uint64_t Layout::FileOffsetOf(ObjectId ino, uint32_t disk, uint64_t object_offset) const {
  const uint64_t r = (disk + disk_count_ - StartDisk(ino)) % disk_count_;
  const uint64_t unit = (object_offset / stripe_unit_) * disk_count_ + r;
  return unit * stripe_unit_ + object_offset % stripe_unit_;
}

Status MergeDiskErrors(const Status& a, const Status& b) {
  return ErrorRank(b) > ErrorRank(a) ? b : a;
}

}  // namespace tipfs::stripe
