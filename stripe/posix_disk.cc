// PosixDisk implementation; see posix_disk.h for the request states and the fd cache rules.
#include "stripe/posix_disk.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "util/mutex.h"
#include "util/units.h"

namespace tipfs::stripe {

namespace {

bool IsMemoryFileSystem(int fd) {
  struct statfs fs;
  if (::fstatfs(fd, &fs) != 0) return false;
  return fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC;
}

// "3f/000000000000123f" relative to objects/, without allocating.
struct RelPath {
  explicit RelPath(ObjectId object) {
    std::snprintf(path, sizeof(path), "%02x/%016" PRIx64, static_cast<unsigned>(object & 0xff),
                  object);
    std::snprintf(dir, sizeof(dir), "%02x", static_cast<unsigned>(object & 0xff));
  }
  char path[24];
  char dir[4];
};

bool ParseHex(const char* s, size_t digits, uint64_t* out) {
  return std::strlen(s) == digits && ParseLowerHex(std::string_view(s, digits), out);
}

void CloseFd(int fd) {
  if (fd >= 0) ::close(fd);
}

}  // namespace

std::string PosixDisk::ObjectRelativePath(ObjectId object) {
  return std::string("objects/") + RelPath(object).path;
}

Result<std::unique_ptr<PosixDisk>> PosixDisk::Open(const std::string& root, uint32_t index,
                                                   IoRing* ring, size_t max_open_files,
                                                   bool direct_io) {
  const std::string objects = root + "/objects";
  const int fd = ::open(objects.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return ErrnoStatus("disk " + std::to_string(index) + " " + root + ": open " + objects);
  }
  DirectIo direct;
  if (direct_io) direct = ProbeDirectIo(fd);
  return std::unique_ptr<PosixDisk>(new PosixDisk(
      root, index, ring, max_open_files == 0 ? 1 : max_open_files, fd, std::move(direct)));
}

PosixDisk::DirectIo PosixDisk::ProbeDirectIo(int objects_fd) {
  // A scratch file in objects/ (its name is no object's, so listings skip it): whether the file
  // system takes O_DIRECT, and the alignment it needs (statx STATX_DIOALIGN, Linux 6.1).
  constexpr char kProbe[] = "tipfs-direct-io-probe";
  DirectIo direct;
  const int fd = ::openat(objects_fd, kProbe, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
  if (fd < 0) {
    direct.refused = std::string("O_DIRECT refused: ") + std::strerror(errno);
    ::unlinkat(objects_fd, kProbe, 0);
    return direct;
  }
  struct statx stx = {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
      (stx.stx_mask & STATX_DIOALIGN)) {
    if (stx.stx_dio_offset_align == 0) {
      direct.refused = "O_DIRECT not supported for its files (statx)";
    } else {
      direct.memory_align = std::max<uint32_t>(stx.stx_dio_mem_align, 1);
      direct.offset_align = stx.stx_dio_offset_align;
    }
  } else {
    direct.memory_align = direct.offset_align = 4096;  // it opened; the safe alignment
  }
  ::close(fd);
  ::unlinkat(objects_fd, kProbe, 0);
  return direct;
}

PosixDisk::PosixDisk(std::string root, uint32_t index, IoRing* ring, size_t max_open_files,
                     int objects_fd, DirectIo direct)
    : root_(std::move(root)),
      name_("disk " + std::to_string(index) + " (" + root_ + ")"),
      ring_(ring),
      max_open_files_(max_open_files),
      objects_fd_(objects_fd),
      direct_(std::move(direct)),
      memory_backed_(IsMemoryFileSystem(objects_fd)) {}

BackingIoInfo PosixDisk::BackingIo() const {
  BackingIoInfo info;
  if (direct_.offset_align != 0) {
    info.mode = "direct (O_DIRECT, " + std::to_string(direct_.offset_align) + "-byte alignment)";
  } else if (!direct_.refused.empty()) {
    info.mode = "buffered (" + direct_.refused + ")";
  } else {
    info.mode = "buffered";
  }
  info.direct_reads = direct_reads_.load(std::memory_order_relaxed);
  info.buffered_reads = buffered_reads_.load(std::memory_order_relaxed);
  return info;
}

void PosixDisk::DeleteEntryLocked(FdEntry* entry, std::vector<int>* to_close) {
  to_close->push_back(entry->fd);
  if (entry->direct_fd >= 0) to_close->push_back(entry->direct_fd);
  delete entry;
  --open_fds_;
}

bool PosixDisk::Aligned(const DiskRequest& request) const {
  if (direct_.offset_align == 0) return false;
  return reinterpret_cast<uintptr_t>(request.buffer) % direct_.memory_align == 0 &&
         request.offset % direct_.offset_align == 0 && request.length % direct_.offset_align == 0;
}

int PosixDisk::DirectFd(FdEntry* entry) {
  {
    MutexLock lock(&mu_);
    if (entry->direct_fd >= 0) return entry->direct_fd;
  }
  const int fd =
      ::openat(objects_fd_, RelPath(entry->object).path, O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return -1;  // out of descriptors, or the object went: the buffered one serves
  MutexLock lock(&mu_);
  if (entry->direct_fd >= 0) {
    ::close(fd);  // another read opened one meanwhile
  } else {
    entry->direct_fd = fd;
  }
  return entry->direct_fd;
}

PosixDisk::~PosixDisk() {
  {
    MutexLock lock(&drain_mu_);
    while (in_flight_.load() != 0) drained_.Wait(&drain_mu_);
  }
  std::vector<int> to_close;
  {
    MutexLock lock(&mu_);
    for (FdEntry* e : lru_) DeleteEntryLocked(e, &to_close);
    lru_.clear();
    map_.clear();
  }
  for (int fd : to_close) CloseFd(fd);
  CloseFd(objects_fd_);
}

Status PosixDisk::OpError(const char* what, ObjectId object, uint64_t offset, int err) const {
  char buf[96];
  std::snprintf(buf, sizeof(buf), ": %s object %016" PRIx64 " at %" PRIu64, what, object, offset);
  return ErrnoStatus(name_ + buf, err);
}

Result<int> PosixDisk::OpenObject(ObjectId object, bool create, bool* writable, bool* created) {
  const RelPath rel(object);
  *created = false;
  *writable = true;
  int fd = ::openat(objects_fd_, rel.path, O_RDWR | O_CLOEXEC);
  if (fd >= 0) return fd;
  if ((errno == EROFS || errno == EACCES) && !create) {
    // A read-only backing store still serves reads.
    fd = ::openat(objects_fd_, rel.path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      *writable = false;
      return fd;
    }
  }
  if (errno != ENOENT) return OpError("open", object, 0, errno);
  if (!create) return -1;  // missing object: a hole
  for (int attempt = 0; attempt < 3; ++attempt) {
    fd = ::openat(objects_fd_, rel.path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      *created = true;
      return fd;
    }
    if (errno == EEXIST) {  // another thread created it meanwhile
      fd = ::openat(objects_fd_, rel.path, O_RDWR | O_CLOEXEC);
      if (fd >= 0) return fd;
      if (errno != ENOENT) return OpError("open", object, 0, errno);
      continue;
    }
    if (errno != ENOENT) return OpError("create", object, 0, errno);
    // The fan-out directory does not exist yet: make it, durably (objects/ is fsync'ed once).
    if (::mkdirat(objects_fd_, rel.dir, 0700) == 0) {
      if (::fsync(objects_fd_) != 0) return OpError("fsync objects/ for", object, 0, errno);
    } else if (errno != EEXIST) {
      return OpError("mkdir fan-out directory for", object, 0, errno);
    }
  }
  return OpError("create", object, 0, ENOENT);
}

Result<PosixDisk::FdEntry*> PosixDisk::Acquire(ObjectId object, bool create) {
  uint64_t epoch;
  {
    MutexLock lock(&mu_);
    auto it = map_.find(object);
    if (it != map_.end() && (!create || it->second->writable)) {
      FdEntry* e = it->second;
      ++e->refs;
      lru_.splice(lru_.begin(), lru_, e->lru_pos);
      return e;
    }
    epoch = remove_epoch_;
  }
  // The open syscalls run without the lock.
  bool writable = false;
  bool created = false;
  Result<int> fd = OpenObject(object, create, &writable, &created);
  if (!fd.ok() && (fd.error() == EMFILE || fd.error() == ENFILE) && ShedIdleFds() > 0) {
    fd = OpenObject(object, create, &writable, &created);  // out of descriptors: once more
  }
  if (!fd.ok()) return fd.status();
  if (*fd < 0) return static_cast<FdEntry*>(nullptr);

  std::vector<int> to_close;
  FdEntry* result = nullptr;
  {
    MutexLock lock(&mu_);
    if (created) unsynced_names_.insert(object);
    auto it = map_.find(object);
    if (it != map_.end() && (!create || it->second->writable)) {
      // Another thread cached a usable descriptor while we were opening: share it.
      result = it->second;
      ++result->refs;
      lru_.splice(lru_.begin(), lru_, result->lru_pos);
      to_close.push_back(*fd);
    } else {
      result = new FdEntry{object, *fd, -1, writable, false, 1, {}};
      ++open_fds_;
      // An open that raced with Remove may hold the unlinked file: use it once, never cache it.
      if (epoch == remove_epoch_) {
        if (it != map_.end()) {  // a read-only entry replaced by a writable one
          FdEntry* old = it->second;
          lru_.erase(old->lru_pos);
          map_.erase(it);
          old->cached = false;
          if (old->refs == 0) DeleteEntryLocked(old, &to_close);
        }
        lru_.push_front(result);
        result->lru_pos = lru_.begin();
        result->cached = true;
        map_.emplace(object, result);
        if (map_.size() > max_open_files_) {
          FdEntry* victim = lru_.back();
          lru_.pop_back();
          map_.erase(victim->object);
          victim->cached = false;
          if (victim->refs == 0) DeleteEntryLocked(victim, &to_close);
        }
      }
    }
  }
  for (int fd : to_close) CloseFd(fd);
  return result;
}

size_t PosixDisk::ShedIdleFds() {
  std::vector<int> to_close;
  size_t shed = 0;
  {
    MutexLock lock(&mu_);
    // Half of the idle cached descriptors, least recently used first.
    const size_t want = std::max<size_t>(1, map_.size() / 2);
    auto it = lru_.end();
    while (it != lru_.begin() && shed < want) {
      --it;
      FdEntry* e = *it;
      if (e->refs > 0) continue;
      it = lru_.erase(it);  // the next step's --it lands on the entry before this one
      map_.erase(e->object);
      DeleteEntryLocked(e, &to_close);
      ++shed;
    }
  }
  for (int fd : to_close) CloseFd(fd);
  return shed;
}

void PosixDisk::Release(FdEntry* entry) {
  std::vector<int> to_close;
  {
    MutexLock lock(&mu_);
    if (--entry->refs == 0 && !entry->cached) DeleteEntryLocked(entry, &to_close);
  }
  for (int fd : to_close) CloseFd(fd);
}

Status PosixDisk::SyncFanoutDirIfNew(ObjectId object) {
  {
    MutexLock lock(&mu_);
    if (unsynced_names_.erase(object) == 0) return Status::OK();
  }
  const RelPath rel(object);
  const int dir = ::openat(objects_fd_, rel.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int err = 0;
  if (dir < 0 || ::fsync(dir) != 0) err = errno;
  CloseFd(dir);
  if (err == 0) return Status::OK();
  MutexLock lock(&mu_);
  unsynced_names_.insert(object);
  return OpError("fsync directory of", object, 0, err);
}

void PosixDisk::Submit(DiskRequest request) {
  const bool is_write = request.kind == DiskRequest::Kind::kWrite;
  if (request.kind != DiskRequest::Kind::kSync && request.length == 0) {
    request.done(uint64_t{0});
    return;
  }
  Result<FdEntry*> entry = Acquire(request.object, is_write);
  if (!entry.ok()) {
    request.done(entry.status());
    return;
  }
  if (*entry == nullptr) {
    // No object: a read is all hole; there is nothing to sync. Unless objects/ itself was
    // removed (the disk went away): then every object would read as zeros, silently.
    struct stat dir;
    if (request.kind == DiskRequest::Kind::kRead && ::fstat(objects_fd_, &dir) == 0 &&
        dir.st_nlink == 0) {
      request.done(Status::IOError(name_ + ": read object " + std::to_string(request.object) +
                                   ": its objects/ directory was removed"));
      return;
    }
    request.done(uint64_t{0});
    return;
  }
  if (request.kind == DiskRequest::Kind::kSync) {
    Status s = SyncFanoutDirIfNew(request.object);
    if (!s.ok()) {
      Release(*entry);
      request.done(std::move(s));
      return;
    }
  }
  const int direct_fd =
      request.kind == DiskRequest::Kind::kRead && Aligned(request) ? DirectFd(*entry) : -1;
  if (request.kind == DiskRequest::Kind::kRead && direct_fd < 0) {
    Result<uint64_t> result = uint64_t{0};
    if (ReadInline((*entry)->fd, request, &result)) {
      buffered_reads_.fetch_add(1, std::memory_order_relaxed);
      inline_reads_.fetch_add(1, std::memory_order_relaxed);
      Release(*entry);
      request.done(std::move(result));
      return;
    }
  }
  IoRing::Op* op = ring_->AllocOp();
  switch (request.kind) {
    case DiskRequest::Kind::kRead:
      op->kind = IoRing::OpKind::kRead;
      break;
    case DiskRequest::Kind::kWrite:
      op->kind = IoRing::OpKind::kWrite;
      break;
    case DiskRequest::Kind::kSync:
      op->kind = IoRing::OpKind::kFdatasync;
      break;
  }
  op->fd = (*entry)->fd;
  if (request.kind == DiskRequest::Kind::kRead) {
    if (direct_fd >= 0) {
      op->fd = direct_fd;
      op->short_read_ends = true;
      direct_reads_.fetch_add(1, std::memory_order_relaxed);
    } else {
      buffered_reads_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  op->buffer = request.buffer;
  op->offset = request.offset;
  op->length = request.kind == DiskRequest::Kind::kSync ? 0 : request.length;
  op->finish = &PosixDisk::FinishOp;
  op->owner = this;
  op->owner_data = *entry;
  op->done = std::move(request.done);
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  ring_->Submit(op);
}

bool PosixDisk::ReadInline(int fd, const DiskRequest& request, Result<uint64_t>* result) {
  if (request.length > kMaxInlineReadBytes) return false;
  if (!memory_backed_) {
    if (!nowait_reads_.load(std::memory_order_relaxed)) return false;
    iovec iov{request.buffer, request.length};
    const ssize_t n = ::preadv2(fd, &iov, 1, static_cast<off_t>(request.offset), RWF_NOWAIT);
    if (n == static_cast<ssize_t>(request.length)) {
      *result = static_cast<uint64_t>(n);
      return true;
    }
    // Not all in memory (EAGAIN, or a short read that may be either the object's end or a part
    // not cached: the ring tells them apart), or no RWF_NOWAIT here: the ring reads it all.
    if (n < 0 && errno == EOPNOTSUPP) nowait_reads_.store(false, std::memory_order_relaxed);
    return false;
  }
  // A memory file system: pread until the object's end, as the ring does with short reads.
  uint64_t done = 0;
  uint32_t retries = 0;
  while (done < request.length) {
    const ssize_t n = ::pread(fd, request.buffer + done, request.length - done,
                              static_cast<off_t>(request.offset + done));
    if (n > 0) {
      done += static_cast<uint64_t>(n);
      continue;
    }
    if (n == 0) break;  // the object's end: the caller zero-fills the rest
    if ((errno == EINTR || errno == EAGAIN) && ++retries <= 64) continue;
    *result = OpError("read", request.object, request.offset, errno);
    return true;
  }
  *result = done;
  return true;
}

void PosixDisk::FinishOp(IoRing::Op* op, int64_t result) {
  auto* disk = static_cast<PosixDisk*>(op->owner);
  auto* entry = static_cast<FdEntry*>(op->owner_data);
  auto done = std::move(op->done);
  Result<uint64_t> r = uint64_t{0};
  if (result >= 0) {
    r = static_cast<uint64_t>(result);
  } else {
    const char* what = op->kind == IoRing::OpKind::kRead    ? "read"
                       : op->kind == IoRing::OpKind::kWrite ? "write"
                                                            : "fdatasync";
    r = disk->OpError(what, entry->object, op->offset, static_cast<int>(-result));
  }
  disk->Release(entry);
  done(std::move(r));
  if (disk->in_flight_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    // Notify under the lock: the destructor may free the disk as soon as it sees zero.
    MutexLock lock(&disk->drain_mu_);
    disk->drained_.SignalAll();
  }
}

Status PosixDisk::Truncate(ObjectId object, uint64_t size) {
  Result<FdEntry*> entry = Acquire(object, /*create=*/size > 0);
  if (!entry.ok()) return entry.status();
  if (*entry == nullptr) return Status::OK();  // missing and size 0
  Status s;
  if (!(*entry)->writable) {
    s = OpError("truncate", object, size, EROFS);
  } else if (::ftruncate((*entry)->fd, static_cast<off_t>(size)) != 0) {
    s = OpError("truncate", object, size, errno);
  }
  Release(*entry);
  return s;
}

Status PosixDisk::Remove(ObjectId object) {
  std::vector<int> to_close;
  {
    MutexLock lock(&mu_);
    ++remove_epoch_;
    unsynced_names_.erase(object);
    auto it = map_.find(object);
    if (it != map_.end()) {
      FdEntry* e = it->second;
      lru_.erase(e->lru_pos);
      map_.erase(it);
      e->cached = false;  // in-flight requests keep using it; the last Release closes it
      if (e->refs == 0) DeleteEntryLocked(e, &to_close);
    }
  }
  for (int fd : to_close) CloseFd(fd);
  if (::unlinkat(objects_fd_, RelPath(object).path, 0) != 0 && errno != ENOENT) {
    return OpError("remove", object, 0, errno);
  }
  return Status::OK();
}

Result<ObjectInfo> PosixDisk::Stat(ObjectId object) {
  struct stat st;
  if (::fstatat(objects_fd_, RelPath(object).path, &st, 0) != 0) {
    return OpError("stat", object, 0, errno);
  }
  return ObjectInfo{static_cast<uint64_t>(st.st_size), static_cast<uint64_t>(st.st_blocks) * 512};
}

Status PosixDisk::ListObjects(std::vector<ObjectId>* out) {
  const std::string objects = root_ + "/objects";
  DIR* top = ::opendir(objects.c_str());
  if (top == nullptr) return ErrnoStatus(name_ + ": list " + objects);
  Status status;
  while (dirent* d = ::readdir(top)) {
    uint64_t fan;
    if (!ParseHex(d->d_name, 2, &fan)) continue;  // ".", "..", anything not ours
    const std::string sub = objects + "/" + d->d_name;
    DIR* dir = ::opendir(sub.c_str());
    if (dir == nullptr) {
      if (errno == ENOENT) continue;
      status = ErrnoStatus(name_ + ": list " + sub);
      break;
    }
    while (dirent* f = ::readdir(dir)) {
      uint64_t id;
      if (ParseHex(f->d_name, 16, &id) && (id & 0xff) == fan) out->push_back(id);
    }
    ::closedir(dir);
  }
  ::closedir(top);
  return status;
}

Result<DiskUsage> PosixDisk::Usage() {
  struct statvfs vfs;
  if (::fstatvfs(objects_fd_, &vfs) != 0) return ErrnoStatus(name_ + ": statvfs");
  struct stat st;
  if (::fstat(objects_fd_, &st) != 0) return ErrnoStatus(name_ + ": stat objects/");
  DiskUsage usage;
  usage.total_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
  usage.free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  usage.total_files = static_cast<uint64_t>(vfs.f_files);
  usage.free_files = static_cast<uint64_t>(vfs.f_favail);
  usage.free_bytes_with_reserve = static_cast<uint64_t>(vfs.f_bfree) * vfs.f_frsize;
  // One st_dev per mounted file system: directories on it (bind mounts too) share its space.
  usage.store_id = static_cast<uint64_t>(st.st_dev) + 1;
  return usage;
}

Result<uint64_t> PosixDisk::Seek(ObjectId object, uint64_t offset, SeekKind kind) {
  Result<FdEntry*> entry = Acquire(object, /*create=*/false);
  if (!entry.ok()) return entry.status();
  if (*entry == nullptr) return kind == SeekKind::kData ? kNoData : offset;  // missing: all hole
  // Requests carry their own offsets (io_uring, like pread), so moving the shared file position
  // disturbs nobody.
  const off_t at = ::lseek((*entry)->fd, static_cast<off_t>(offset),
                           kind == SeekKind::kData ? SEEK_DATA : SEEK_HOLE);
  const int err = errno;
  Release(*entry);
  if (at >= 0) return static_cast<uint64_t>(at);
  if (err == ENXIO) return kind == SeekKind::kData ? kNoData : offset;  // at or past the end
  return OpError(kind == SeekKind::kData ? "seek data" : "seek hole", object, offset, err);
}

Status PosixDisk::SyncAll() {
  if (::syncfs(objects_fd_) != 0) return ErrnoStatus(name_ + ": syncfs");
  MutexLock lock(&mu_);
  unsynced_names_.clear();  // syncfs made every directory entry durable too
  return Status::OK();
}

size_t PosixDisk::cached_fds() const {
  MutexLock lock(&mu_);
  return map_.size();
}

size_t PosixDisk::open_fds() const {
  MutexLock lock(&mu_);
  return open_fds_;
}

}  // namespace tipfs::stripe
