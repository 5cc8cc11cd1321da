// Disk: the seam between tipfs and a backing store. One Disk is one backing directory ("disk")
// of a volume, holding one sparse object per tipfs file. Every byte tipfs stores goes through this
// interface, so tests wrap it to inject latency (EmulatedDisk), faults (FaultyDisk) and crashes.
//
// Thread-safety: all methods may be called from any thread concurrently.
//
// A request moves through these states: submitted -> (queued, if the implementation models a
// queue) -> in service at the backing store -> completed, where a short read inside the object or
// an EINTR/EAGAIN is resubmitted for the rest -> done(result). `done` runs exactly once, from any
// thread (often the completion thread), and must not block for long.
#pragma once

#include <cerrno>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "util/status.h"

namespace tipfs::stripe {

// Names the object of one tipfs file on every disk: the file's inode number.
using ObjectId = uint64_t;

struct DiskRequest {
  enum class Kind : uint8_t { kRead, kWrite, kSync };
  // Who is waiting: a demand request has a program blocked on it; a prefetch has not. Emulation
  // and queueing policies may serve demand first.
  enum class Priority : uint8_t { kDemand, kPrefetch };
  // Why a read was made, for per-disk statistics and the timeline (disks treat all alike).
  enum class Purpose : uint8_t { kDemand, kReadahead, kHinted, kSpeculative };

  Kind kind = Kind::kRead;
  Priority priority = Priority::kDemand;
  Purpose purpose = Purpose::kDemand;  // kRead only
  ObjectId object = 0;
  uint64_t offset = 0;     // byte offset inside the object (kSync: ignored)
  uint64_t length = 0;     // bytes (kSync: ignored)
  char* buffer = nullptr;  // kRead: destination; kWrite: source, not modified
  // Bytes transferred, or the error. A read that reaches past the end of the object (or a missing
  // object) transfers fewer bytes; the caller treats the rest as a hole of zeros. A write
  // transfers `length` or fails.
  std::function<void(Result<uint64_t>)> done;
};

struct DiskUsage {
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;  // available to tipfs (statvfs f_bavail)
  uint64_t total_files = 0;
  uint64_t free_files = 0;
  // Free including the backing store's reserve for root (statvfs f_bfree); 0: same as free_bytes.
  uint64_t free_bytes_with_reserve = 0;
  // Disks with the same nonzero id share one backing store (directories on one file system, pools
  // of one cluster): statfs counts its space once. 0: not known, counted for this disk alone.
  uint64_t store_id = 0;
};

// What Disk::Seek looks for, as lseek(2)'s SEEK_DATA and SEEK_HOLE.
enum class SeekKind : uint8_t { kData, kHole };

struct ObjectInfo {
  uint64_t size = 0;             // logical length
  uint64_t allocated_bytes = 0;  // space it occupies (st_blocks * 512)
};

// How a disk moves bytes to and from its backing store, for `tipfs stats`.
struct BackingIoInfo {
  // "direct (O_DIRECT, 4096-byte alignment)", "buffered", or "buffered (O_DIRECT refused: ...)";
  // empty for disks that are not backed by files (in-memory test disks).
  std::string mode;
  uint64_t direct_reads = 0;    // reads that bypassed the backing store's page cache
  uint64_t buffered_reads = 0;  // reads through it (unaligned ones, or direct I/O off)
};

class Disk {
 public:
  virtual ~Disk() = default;

  // Starts an asynchronous read, write or sync; see DiskRequest for the contract.
  virtual void Submit(DiskRequest request) = 0;

  // Sets the object's length, creating it when missing (size 0 of a missing object is a no-op).
  virtual Status Truncate(ObjectId object, uint64_t size) = 0;
  // Deletes the object; OK when it does not exist.
  virtual Status Remove(ObjectId object) = 0;
  // NotFound (ENOENT) when the object does not exist.
  virtual Result<ObjectInfo> Stat(ObjectId object) = 0;
  // Stat without waiting, so a caller can ask several disks (or about several objects) at once:
  // `done` runs exactly once with what Stat would return, from any thread, inside this call when
  // the answer needs no I/O. The default asks Stat inline, which is right for disks whose Stat is
  // a local system call; a disk across a network (RadosDisk) overrides it. A disk that overrides
  // Stat to change its answer (faults, health, held writes) overrides this too.
  using StatDone = std::function<void(Result<ObjectInfo>)>;
  virtual void StatAsync(ObjectId object, StatDone done) { done(Stat(object)); }
  // Every object on the disk (for fsck and orphan reclamation).
  virtual Status ListObjects(std::vector<ObjectId>* out) = 0;
  virtual Result<DiskUsage> Usage() = 0;
  // lseek(2) SEEK_DATA / SEEK_HOLE inside the object, where the object's end and a missing object
  // read as one endless hole. kData: the first offset >= `offset` holding data, or kNoData.
  // kHole: the first offset >= `offset` inside a hole (so `offset` itself past the end). Disks
  // that cannot tell holes from data (the default, from Stat) report all of [0, size) as data.
  static constexpr uint64_t kNoData = UINT64_MAX;
  virtual Result<uint64_t> Seek(ObjectId object, uint64_t offset, SeekKind kind) {
    Result<ObjectInfo> info = Stat(object);
    if (!info.ok() && info.error() != ENOENT) return info.status();
    const uint64_t size = info.ok() ? info->size : 0;
    if (kind == SeekKind::kData) return offset < size ? offset : kNoData;
    return offset < size ? size : offset;
  }
  // Makes every completed write on this disk durable (syncfs of the backing store): a clean
  // unmount calls it so that everything, not only fsync'ed files, survives.
  virtual Status SyncAll() = 0;

  // For messages: "disk 2 (/srv/d2)".
  virtual std::string name() const = 0;
  virtual BackingIoInfo BackingIo() const { return {}; }
};

// Errors from several disks merge into one by a fixed rule: EIO is never hidden, then EROFS,
// then ENOSPC, then anything else, then OK.
Status MergeDiskErrors(const Status& a, const Status& b);

}  // namespace tipfs::stripe
