// What the file system reports about space: statfs, st_blocks and SEEK_DATA / SEEK_HOLE. Each
// answer comes from the disks themselves (statvfs of their backing stores, the blocks and holes
// of each object), so df, du, `cp --sparse`, `tar -S` and `rsync -S` see what is really stored.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <vector>

#include "fusefs/filesystem.h"
#include "util/mutex.h"
#include "util/perf_context.h"

namespace tipfs::fusefs {

Result<struct statvfs> FileSystem::StatFs() {
  struct statvfs st = {};
  constexpr uint64_t kFragment = 4096;
  st.f_bsize = volume_->layout().stripe_unit();
  st.f_frsize = kFragment;
  st.f_namemax = meta::kMaxNameLength;
  uint64_t free_files = 0;
  std::set<uint64_t> stores_counted;
  for (stripe::Disk* disk : volume_->disks()) {
    Result<stripe::DiskUsage> usage = disk->Usage();
    if (!usage.ok()) return usage.status();
    free_files = free_files == 0 ? usage->free_files : std::min(free_files, usage->free_files);
    // Disks that are directories of one file system share its space: count it once, or an
    // empty volume of 3 disks on one 252 GB disk would show 756 GB.
    if (usage->store_id != 0 && !stores_counted.insert(usage->store_id).second) continue;
    const uint64_t free_with_reserve = std::max(usage->free_bytes_with_reserve, usage->free_bytes);
    st.f_blocks += usage->total_bytes / kFragment;
    st.f_bfree += free_with_reserve / kFragment;
    st.f_bavail += usage->free_bytes / kFragment;
  }
  Result<meta::Counts> counts = meta_->GetCounts();
  if (!counts.ok()) return counts.status();
  // Every file has an object on each disk it touches, so the tightest disk bounds new files.
  st.f_files = counts->inodes + free_files;
  st.f_ffree = free_files;
  st.f_favail = free_files;
  return st;
}

uint64_t FileSystem::AllocatedBlocks(const meta::Inode& inode) {
  return AllocatedBlocks(std::vector<const meta::Inode*>{&inode})[0];
}

std::vector<uint64_t> FileSystem::AllocatedBlocks(const std::vector<const meta::Inode*>& inodes) {
  const stripe::Layout& layout = volume_->layout();
  // Only the disks a file's units reach hold objects of it (a small file: one disk).
  auto disks_of = [&layout](const meta::Inode& inode) -> uint32_t {
    // Directories, symbolic links and special files keep everything in the metadata store.
    if (!S_ISREG(inode.mode) || inode.size == 0) return 0;
    const uint64_t units = (inode.size + layout.stripe_unit() - 1) / layout.stripe_unit();
    return static_cast<uint32_t>(std::min<uint64_t>(units, layout.disk_count()));
  };
  // The answers land here from the disks' completion threads; the stack frame outlives them,
  // since this waits for the last.
  Mutex mu;
  CondVar all_answered;
  size_t pending = 0;
  std::vector<uint64_t> bytes(inodes.size(), 0);
  for (const meta::Inode* inode : inodes) pending += disks_of(*inode);
  PerfSection metadata(Subsystem::kMetadata);
  for (size_t i = 0; i < inodes.size(); ++i) {
    const meta::Inode& inode = *inodes[i];
    if (!S_ISREG(inode.mode)) bytes[i] = (inode.size + 4095) / 4096 * 4096;  // as before
    for (uint32_t k = 0; k < disks_of(inode); ++k) {
      const uint32_t disk = layout.DiskOfUnit(inode.ino, k);
      // No lock is held here: a disk may answer inside the call.
      volume_->disk(disk)->StatAsync(inode.ino, [&, i, disk, size = inode.size,
                                                 ino = inode.ino](Result<stripe::ObjectInfo> info) {
        uint64_t held = 0;
        if (info.ok()) {
          held = info->allocated_bytes;
        } else if (info.error() != ENOENT) {
          // A disk that cannot answer (its health board has the error): stat must still
          // work, so count what the file's size says this disk holds.
          held = layout.ObjectSize(ino, disk, size);
        }
        MutexLock lock(&mu);
        bytes[i] += held;
        if (--pending == 0) all_answered.SignalAll();
      });
    }
  }
  std::vector<uint64_t> blocks(inodes.size());
  MutexLock lock(&mu);
  while (pending > 0) all_answered.Wait(&mu);
  for (size_t i = 0; i < inodes.size(); ++i) blocks[i] = (bytes[i] + 511) / 512;
  return blocks;
}

Result<uint64_t> FileSystem::Seek(Ino ino, uint64_t offset, int whence) {
  if (whence != SEEK_DATA && whence != SEEK_HOLE) {
    return Status::InvalidArgument("lseek: only SEEK_DATA and SEEK_HOLE reach the file system");
  }
  Result<meta::Inode> inode = meta_->Get(ino);
  if (!inode.ok()) return inode.status();
  // As lseek(2) on a local file: no data and no hole at or past the end.
  if (offset >= inode->size) return Status::FromErrno(ENXIO, "lseek past the end of the file");
  const stripe::Layout& layout = volume_->layout();
  const stripe::SeekKind kind =
      whence == SEEK_DATA ? stripe::SeekKind::kData : stripe::SeekKind::kHole;
  // Each disk answers for its own units: the first data (or hole) at or after `offset` among
  // them. The mapping between file and object offsets is monotonic, so the nearest answer of any
  // disk is the file's answer; the end of the file is a hole.
  uint64_t best = inode->size;
  for (uint32_t disk = 0; disk < layout.disk_count(); ++disk) {
    const uint64_t from = layout.ObjectOffsetAtOrAfter(ino, disk, offset);
    Result<uint64_t> at = volume_->disk(disk)->Seek(ino, from, kind);
    if (!at.ok()) return DataError(at.status());
    if (*at == stripe::Disk::kNoData) continue;
    uint64_t object_offset = *at;
    // A hole that starts inside a 4 KiB block is the object's end, which a write past it left
    // there: the block is allocated, and a local file system (a file not ending there) reports
    // data up to its end. Reporting a hole later than it starts is always allowed.
    if (kind == stripe::SeekKind::kHole && object_offset > from) {
      object_offset = (object_offset + 4095) / 4096 * 4096;
    }
    best = std::min(best, layout.FileOffsetOf(ino, disk, object_offset));
  }
  if (kind == stripe::SeekKind::kData && best >= inode->size) {
    return Status::FromErrno(ENXIO, "lseek: no data after the offset");
  }
  return best;
}

}  // namespace tipfs::fusefs
