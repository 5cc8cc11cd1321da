// PosixDisk: a Disk over one backing directory, its data I/O through an IoRing (io_uring) whose
// thread submits it (the volume gives each disk a ring of its own), but for small reads the
// backing store holds in memory (below).
//
// Objects live at <root>/objects/<2 hex: low byte of the id>/<16 hex id>, created on first write
// (the fan-out directory too). A request moves through the IoRing states (submitted, queued when
// the ring is full, completed, short read/write resubmitted, retried on EINTR/EAGAIN, failed or
// finished on the ring's thread; see io_ring.h); a read of a missing object completes at once with
// 0 bytes (a hole). Failures become a Status naming this disk ("disk 2 (/srv/d2): read object ...:
// strerror"). Truncate, Remove, Stat, ListObjects, Usage, Seek and SyncAll are synchronous
// syscalls.
//
// Open file descriptors are cached per object (LRU, `max_open_files`; when the process runs out
// of descriptors, idle cached ones are closed and the open is retried once). A request holds a
// reference on its descriptor while in flight, so Remove or eviction never closes an fd the kernel
// is still using; the descriptor closes when the last reference goes.
//
// Direct I/O (`direct_io` at Open): reads whose buffer, offset and length meet the backing file
// system's O_DIRECT alignment (statx STATX_DIOALIGN) bypass its page cache through a second
// descriptor opened with O_DIRECT, so data is not cached twice (tipfs caches it); other reads and
// every write stay buffered, which the kernel keeps coherent with direct reads (a direct read
// writes back dirty pages of its range first). Writes were tried direct too (aligned ones of a
// stripe unit or more, which the FUSE ring's page-aligned payload delivers) and measured worse
// here: 1 GiB of 1 MiB sequential writes through the ring, fdatasync included, ran at 317-353
// MB/s direct against 612-673 buffered, with 7.1-8.0 s of system CPU against 4.8-5.1 s (three
// alternating pairs, ext4 on the VM's disk): a small direct write also waits for the device
// (fio 4 KiB random writes on the backing file system: 5,184 IOPS direct, 49,400 buffered). A file
// system that refuses O_DIRECT (tmpfs before 6.6, some FUSE file systems) falls back to
// buffered I/O, and BackingIo() says why.
//
// Reads the backing store serves from memory complete on the submitting thread, before Submit
// returns: a buffered read of at most kMaxInlineReadBytes is tried first with preadv2(RWF_NOWAIT),
// which succeeds only when every byte is in the page cache, and on a memory file system (tmpfs,
// ramfs: no device to wait for, and no RWF_NOWAIT support) with a plain pread. Through the ring
// such a read paid two thread wake-ups (the ring thread's, and on tmpfs an io-wq worker's, which
// io_uring punts reads without nowait support to): on the shared VM that made 24-30 % of emulated
// ssd reads complete after their model deadline. Anything else (not all cached, bigger, O_DIRECT,
// writes, syncs) goes through the ring as before, which also keeps a long copy off the submitter.
//
// Durability: kSync is fdatasync of the object; the first kSync after the object was created
// also fsyncs its fan-out directory so the name survives a crash (new fan-out directories are
// made durable when created). SyncAll is syncfs(2) of the backing file system.
//
// Thread-safety: all methods may be called concurrently. No syscall that waits for I/O runs under
// mu_ (opens happen outside it; Submit releases it before handing the op to the ring), and mu_ is
// never held together with the IoRing's locks. `done` runs on the ring's thread, or inline before
// Submit returns when there is nothing to do (a hole, a zero-length request, an open that failed)
// or the read was served from memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "stripe/disk.h"
#include "stripe/io_ring.h"
#include "util/mutex.h"

namespace tipfs::stripe {

class PosixDisk : public Disk {
 public:
  static constexpr size_t kDefaultMaxOpenFiles = 1024;
  // Buffered reads up to this size may complete inline (above). One cache block of the default
  // 64 KiB stripe unit, with room for a larger block size.
  static constexpr uint64_t kMaxInlineReadBytes = 128 * 1024;

  // `root` must hold an objects/ directory (Mkfs makes it). `ring` must outlive the disk.
  static Result<std::unique_ptr<PosixDisk>> Open(const std::string& root, uint32_t index,
                                                 IoRing* ring,
                                                 size_t max_open_files = kDefaultMaxOpenFiles,
                                                 bool direct_io = false);
  // Waits for this disk's in-flight requests, then closes every descriptor.
  ~PosixDisk() override;

  void Submit(DiskRequest request) override;
  Status Truncate(ObjectId object, uint64_t size) override;
  Status Remove(ObjectId object) override;
  Result<ObjectInfo> Stat(ObjectId object) override;
  Status ListObjects(std::vector<ObjectId>* out) override;
  Result<DiskUsage> Usage() override;
  Result<uint64_t> Seek(ObjectId object, uint64_t offset, SeekKind kind) override;
  Status SyncAll() override;
  std::string name() const override { return name_; }
  BackingIoInfo BackingIo() const override;

  const std::string& root() const { return root_; }
  // For tests: descriptors currently cached / open (cached plus evicted-but-in-use).
  size_t cached_fds() const;
  size_t open_fds() const;
  // Reads completed on the submitting thread (above).
  uint64_t inline_reads() const { return inline_reads_.load(std::memory_order_relaxed); }

  // "objects/3f/000000000000123f" for object 0x123f, relative to root().
  static std::string ObjectRelativePath(ObjectId object);

 private:
  struct FdEntry {
    ObjectId object = 0;
    int fd = -1;
    int direct_fd = -1;  // O_DIRECT, opened at the first aligned read; GUARDED_BY(mu_)
    bool writable = false;
    bool cached = false;  // in map_/lru_; false once evicted or removed
    uint32_t refs = 0;
    std::list<FdEntry*>::iterator lru_pos;
  };

  // O_DIRECT alignment of the backing file system (0: direct I/O off), and why it is off.
  struct DirectIo {
    uint32_t memory_align = 0;
    uint32_t offset_align = 0;
    std::string refused;  // empty unless direct I/O was asked for and is not possible
  };
  static DirectIo ProbeDirectIo(int objects_fd);

  PosixDisk(std::string root, uint32_t index, IoRing* ring, size_t max_open_files, int objects_fd,
            DirectIo direct);

  // A referenced descriptor for `object`; nullptr with OK status when it does not exist and
  // `create` is false. Creates the object (and its fan-out directory) when `create`.
  Result<FdEntry*> Acquire(ObjectId object, bool create);
  void Release(FdEntry* entry);
  // The entry's O_DIRECT descriptor, opened on first use; -1 when it cannot be opened.
  int DirectFd(FdEntry* entry);
  bool Aligned(const DiskRequest& request) const;
  // Closes an entry's descriptors and frees it. REQUIRES: no references left.
  void DeleteEntryLocked(FdEntry* entry, std::vector<int>* to_close) REQUIRES(mu_);
  // Closes idle cached descriptors (EMFILE relief); returns how many.
  size_t ShedIdleFds();
  // Opens (and maybe creates) the object's file; *created tells whether this call created it.
  Result<int> OpenObject(ObjectId object, bool create, bool* writable, bool* created);
  Status SyncFanoutDirIfNew(ObjectId object);

  // Reads the request on this thread when the backing store has its bytes in memory: true when
  // *result holds the outcome (bytes or the error), false when it must go through the ring.
  bool ReadInline(int fd, const DiskRequest& request, Result<uint64_t>* result);

  static void FinishOp(IoRing::Op* op, int64_t result);
  Status OpError(const char* what, ObjectId object, uint64_t offset, int err) const;

  // Constant after construction.
  const std::string root_;
  const std::string name_;
  IoRing* const ring_;
  const size_t max_open_files_;
  const int objects_fd_;  // <root>/objects, for openat/fsync
  const DirectIo direct_;
  // tmpfs or ramfs: a read never waits for a device, so it always runs inline.
  const bool memory_backed_;

  mutable Mutex mu_;
  std::unordered_map<ObjectId, FdEntry*> map_ GUARDED_BY(mu_);
  std::list<FdEntry*> lru_ GUARDED_BY(mu_);  // most recently used first
  size_t open_fds_ GUARDED_BY(mu_) = 0;
  // Bumped by Remove: an open that raced with a Remove must not enter the cache.
  uint64_t remove_epoch_ GUARDED_BY(mu_) = 0;
  // Objects created whose directory entry has not been fsync'ed yet.
  std::unordered_set<ObjectId> unsynced_names_ GUARDED_BY(mu_);

  Mutex drain_mu_;
  CondVar drained_;
  std::atomic<uint64_t> in_flight_{0};
  std::atomic<uint64_t> direct_reads_{0};
  std::atomic<uint64_t> buffered_reads_{0};
  std::atomic<uint64_t> inline_reads_{0};
  // Cleared at the first EOPNOTSUPP: the file system has no RWF_NOWAIT reads.
  std::atomic<bool> nowait_reads_{true};
};

}  // namespace tipfs::stripe
