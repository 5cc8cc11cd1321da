#include "fusefs/hint_ioctls.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "fusefs/process_ids.h"
#include "tipfs/hint.h"
#include "util/mutex.h"
#include "util/perf_context.h"

namespace tipfs::fusefs {
namespace {

constexpr uint64_t kNamedStreamBase = uint64_t{1} << 32;
constexpr uint64_t kMaxOffset = uint64_t{INT64_MAX};
constexpr int kMaxSymlinkHops = 40;  // as Linux's MAXSYMLINKS
// Parent links followed from a reader to its sharing ancestor (a loader's workers are its
// children, or grandchildren under a fork server).
constexpr int kMaxAncestors = 32;
constexpr int64_t kLineageTtlNanos = 1'000'000'000;
constexpr size_t kMaxLineages = 4096;

int64_t MonotonicNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Status CheckHeader(const tipfs_hint_header& header) {
  if (header.version != TIPFS_HINT_VERSION) {
    return Status::FromErrno(EPROTO, "hint version " + std::to_string(header.version) +
                                         " is not supported (this daemon speaks " +
                                         std::to_string(TIPFS_HINT_VERSION) + ")");
  }
  if (header.source > TIPFS_SOURCE_SPECULATIVE_TAINTED) {
    return Status::InvalidArgument("unknown hint source " + std::to_string(header.source));
  }
  return Status::OK();
}

// Clips [offset, offset + length) (length 0: to end of file) to the file; false when nothing of
// it lies inside the file. EINVAL for a negative or overflowing range.
Result<bool> ClipRange(uint64_t offset, uint64_t length, uint64_t file_size,
                       cache::HintExtent* out) {
  if (offset > kMaxOffset || length > kMaxOffset || offset + length > kMaxOffset) {
    return Status::InvalidArgument("hint range at " + std::to_string(offset) + " of length " +
                                   std::to_string(length) + " is negative or overflows");
  }
  if (offset >= file_size) return false;
  uint64_t end = length == 0 ? file_size : std::min(file_size, offset + length);
  out->offset = offset;
  out->length = end - offset;
  out->file_size = file_size;
  return true;
}

bool ProcessExited(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return poll(&p, 1, 0) != 0;  // readable (or error) once the process is gone
}

}  // namespace

HintIoctls::HintIoctls(FileSystem* fs, cache::FileCache* cache, std::string mountpoint)
    : fs_(fs), cache_(cache), mountpoint_(std::move(mountpoint)) {}

HintIoctls::~HintIoctls() {
  for (auto& [pid, attachment] : attached_) close(attachment.pidfd);
  for (auto& [pid, sharer] : sharers_) close(sharer.pidfd);
}

Status HintIoctls::Handle(const IoctlCaller& caller, uint64_t ino, int open_flags,
                          unsigned int command, const void* in, size_t in_size, size_t out_size,
                          std::string* out) {
  PerfSection section(Subsystem::kHintProcessing);
  size_t expected;
  switch (command) {
    case TIPFS_IOC_HINT_FD:
      expected = sizeof(tipfs_hint_fd);
      break;
    case TIPFS_IOC_HINT_PATHS:
      expected = sizeof(tipfs_hint_paths);
      break;
    case TIPFS_IOC_CANCEL:
      expected = sizeof(tipfs_cancel);
      break;
    case TIPFS_IOC_QUERY:
      expected = sizeof(tipfs_query);
      break;
    case TIPFS_IOC_SPEC_ATTACH:
    case TIPFS_IOC_SPEC_DETACH:
      expected = sizeof(tipfs_spec_attach);
      break;
    case TIPFS_IOC_SHARE:
      expected = sizeof(tipfs_share);
      break;
    default:
      return Status::FromErrno(ENOTTY, "unknown ioctl command");
  }
  if (in_size != expected || in == nullptr) {
    return Status::InvalidArgument("ioctl argument of " + std::to_string(in_size) +
                                   " bytes, expected " + std::to_string(expected));
  }
  TIPFS_RETURN_IF_ERROR(CheckHeader(*static_cast<const tipfs_hint_header*>(in)));
  switch (command) {
    case TIPFS_IOC_HINT_FD:
      return HintFd(caller, ino, open_flags, in);
    case TIPFS_IOC_HINT_PATHS:
      return HintPaths(caller, in);
    case TIPFS_IOC_CANCEL:
      return Cancel(caller, in);
    case TIPFS_IOC_QUERY:
      if (out_size < sizeof(tipfs_query)) return Status::InvalidArgument("query reply too small");
      return Query(caller, in, out);
    case TIPFS_IOC_SPEC_ATTACH:
      return Attach(caller, in);
    case TIPFS_IOC_SHARE:
      return Share(caller, in);
    default:
      return Detach(caller);
  }
}

Result<uint64_t> HintIoctls::StreamFor(const IoctlCaller& caller, uint64_t requested) const {
  uint32_t process = ProcessOf(caller.pid);
  if (requested == TIPFS_STREAM_SELF || requested == process) return uint64_t{process};
  if (requested < kNamedStreamBase) {
    // A process id: only libtipspec's speculating child may hint for another process, its parent.
    if (requested == ParentOf(process)) return requested;
    return Status::FromErrno(EPERM,
                             "stream " + std::to_string(requested) + " belongs to another process");
  }
  if ((requested & 0xFFFF'FFFFull) == 0) {
    return Status::InvalidArgument("named stream ids need nonzero low 32 bits");
  }
  return (uint64_t{process} << 32) | (requested & 0xFFFF'FFFFull);
}

// The process a stream's hints are charged to and whose reads consume them.
static uint32_t OwnerOf(uint64_t stream) {
  return static_cast<uint32_t>(stream < kNamedStreamBase ? stream : stream >> 32);
}

Status HintIoctls::HintFd(const IoctlCaller& caller, uint64_t ino, int open_flags, const void* in) {
  const auto* request = static_cast<const tipfs_hint_fd*>(in);
  if (request->header.count > TIPFS_FD_SEGMENTS_MAX) {
    return Status::InvalidArgument("hint count " + std::to_string(request->header.count) +
                                   " exceeds " + std::to_string(TIPFS_FD_SEGMENTS_MAX));
  }
  if ((open_flags & O_ACCMODE) == O_WRONLY) {
    return Status::FromErrno(EBADF, "hinted file is not open for reading");
  }
  Result<meta::Inode> inode = fs_->GetAttr(ino);
  if (!inode.ok()) return inode.status();
  if (!S_ISREG(inode->mode)) return Status::FromErrno(EISDIR, "only regular files can be hinted");
  Result<uint64_t> stream = StreamFor(caller, request->header.stream);
  if (!stream.ok()) return stream.status();

  cache::HintBatch batch;
  batch.stream = *stream;
  batch.owner = OwnerOf(*stream);
  batch.source = static_cast<cache::HintSource>(request->header.source);
  batch.epoch = request->header.epoch;
  for (uint32_t i = 0; i < request->header.count; ++i) {
    cache::HintExtent extent;
    extent.ino = ino;
    Result<bool> inside =
        ClipRange(request->segments[i].offset, request->segments[i].length, inode->size, &extent);
    if (!inside.ok()) return inside.status();
    if (*inside) batch.extents.push_back(extent);
  }
  if (batch.extents.empty()) return Status::OK();
  return cache_->Hint(batch);
}

Status HintIoctls::HintPaths(const IoctlCaller& caller, const void* in) {
  const auto* request = static_cast<const tipfs_hint_paths*>(in);
  if (request->bytes > TIPFS_PATH_RECORDS_BYTES) {
    return Status::InvalidArgument("path records claim " + std::to_string(request->bytes) +
                                   " bytes, more than " + std::to_string(TIPFS_PATH_RECORDS_BYTES));
  }
  Result<uint64_t> stream = StreamFor(caller, request->header.stream);
  if (!stream.ok()) return stream.status();
  Credentials who = CredentialsOf(caller.uid, caller.gid, caller.pid);

  cache::HintBatch batch;
  batch.stream = *stream;
  batch.owner = OwnerOf(*stream);
  batch.source = static_cast<cache::HintSource>(request->header.source);
  batch.epoch = request->header.epoch;
  size_t pos = 0;
  for (uint32_t i = 0; i < request->header.count; ++i) {
    tipfs_path_record record;
    if (pos + sizeof(record) > request->bytes) {
      return Status::InvalidArgument("path record " + std::to_string(i) + " runs past the data");
    }
    std::memcpy(&record, request->records + pos, sizeof(record));
    pos += sizeof(record);
    if (record.path_length == 0 || record.path_length > 4095 || record.reserved != 0 ||
        pos + record.path_length > request->bytes) {
      return Status::InvalidArgument("path record " + std::to_string(i) + " is malformed");
    }
    std::string_view path(request->records + pos, record.path_length);
    pos += (record.path_length + 7) & ~size_t{7};
    if (path.find('\0') != std::string_view::npos) {
      return Status::InvalidArgument("path record " + std::to_string(i) + " holds a NUL byte");
    }
    Result<meta::Inode> inode = ResolvePath(path, who);
    if (!inode.ok()) return inode.status().WithContext("hint path '" + std::string(path) + "'");
    if (S_ISDIR(inode->mode)) {
      return Status::FromErrno(EISDIR, "hint path '" + std::string(path) + "' is a directory");
    }
    if (!S_ISREG(inode->mode)) {
      return Status::InvalidArgument("hint path '" + std::string(path) + "' is not a regular file");
    }
    if (!MayAccess(*inode, who, R_OK)) {
      return Status::FromErrno(EACCES, "hint path '" + std::string(path) + "' is not readable");
    }
    cache::HintExtent extent;
    extent.ino = inode->ino;
    Result<bool> inside = ClipRange(record.offset, record.length, inode->size, &extent);
    if (!inside.ok()) return inside.status();
    if (*inside) batch.extents.push_back(extent);
  }
  if (batch.extents.empty()) return Status::OK();
  return cache_->Hint(batch);
}

Result<meta::Inode> HintIoctls::ResolvePath(std::string_view path, const Credentials& who) {
  std::string rest(path);
  if (!rest.empty() && rest[0] == '/') {
    if (rest.compare(0, mountpoint_.size(), mountpoint_) != 0 ||
        (rest.size() > mountpoint_.size() && rest[mountpoint_.size()] != '/')) {
      return Status::FromErrno(EXDEV, "absolute path is outside the mount " + mountpoint_);
    }
    rest = rest.substr(mountpoint_.size());
  }
  Result<meta::Inode> current = fs_->GetAttr(meta::kRootIno);
  int hops = 0;
  while (current.ok()) {
    size_t start = rest.find_first_not_of('/');
    if (start == std::string::npos) return current;
    size_t end = rest.find('/', start);
    std::string name =
        rest.substr(start, end == std::string::npos ? std::string::npos : end - start);
    rest = end == std::string::npos ? std::string() : rest.substr(end);
    if (!S_ISDIR(current->mode)) return Status::FromErrno(ENOTDIR, "not a directory on the way");
    if (!MayAccess(*current, who, X_OK)) return Status::FromErrno(EACCES, "no search permission");
    if (name == ".") continue;
    if (name == "..") {
      current = fs_->GetAttr(current->parent);
      continue;
    }
    Result<meta::Inode> next = fs_->meta()->Lookup(current->ino, name);
    if (!next.ok()) return next;
    if (S_ISLNK(next->mode)) {
      if (++hops > kMaxSymlinkHops) return Status::FromErrno(ELOOP, "too many symbolic links");
      Result<std::string> target = fs_->ReadLink(next->ino);
      if (!target.ok()) return target.status();
      std::string link = *target;
      if (!link.empty() && link[0] == '/') {
        if (link.compare(0, mountpoint_.size(), mountpoint_) != 0) {
          return Status::FromErrno(EXDEV, "symbolic link leads outside the mount");
        }
        link = link.substr(mountpoint_.size());
        current = fs_->GetAttr(meta::kRootIno);
      }
      rest = link + "/" + rest;
      continue;
    }
    current = next;
  }
  return current;
}

Status HintIoctls::Cancel(const IoctlCaller& caller, const void* in) {
  const auto* request = static_cast<const tipfs_cancel*>(in);
  if (request->flags & ~(TIPFS_CANCEL_ALL | TIPFS_CANCEL_EPOCH | TIPFS_CANCEL_TAINTED)) {
    return Status::InvalidArgument("unknown cancel flags");
  }
  if ((request->flags & TIPFS_CANCEL_TAINTED) &&
      (request->flags & (TIPFS_CANCEL_EPOCH | TIPFS_CANCEL_ALL)) != TIPFS_CANCEL_EPOCH) {
    return Status::InvalidArgument("TIPFS_CANCEL_TAINTED needs TIPFS_CANCEL_EPOCH, not _ALL");
  }
  if (request->flags & TIPFS_CANCEL_ALL) {
    cache_->CancelProcess(ProcessOf(caller.pid));
    return Status::OK();
  }
  Result<uint64_t> stream = StreamFor(caller, request->header.stream);
  if (!stream.ok()) return stream.status();
  std::optional<uint32_t> epoch;
  if (request->flags & TIPFS_CANCEL_EPOCH) epoch = request->header.epoch;
  return cache_->Cancel(*stream, epoch, (request->flags & TIPFS_CANCEL_TAINTED) != 0);
}

Status HintIoctls::Query(const IoctlCaller& caller, const void* in, std::string* out) {
  const auto* request = static_cast<const tipfs_query*>(in);
  Result<uint64_t> stream = StreamFor(caller, request->header.stream);
  if (!stream.ok()) return stream.status();
  tipfs_query reply = *request;
  cache::StreamInfo info = cache_->QueryStream(*stream);
  reply.stream_hinted_bytes = info.hinted_bytes;
  reply.stream_segments_pending = info.segments_pending;
  reply.stream_blocks_consumed = info.blocks_consumed;
  reply.stream_blocks_prefetched = info.blocks_prefetched;
  reply.stream_cap_bytes = info.cap_bytes;
  reply.stream_exists = info.exists ? 1 : 0;
  for (size_t i = 0; i < cache::kHintSourceCount; ++i) {
    reply.process_consumed[i] = info.owner_consumed[i];
  }
  cache::CacheStats stats = cache_->Stats();
  reply.cache_capacity_bytes = stats.capacity_blocks * stats.block_size;
  reply.cache_block_bytes = stats.block_size;
  reply.demand_hits = stats.demand_hits;
  reply.demand_misses = stats.demand_misses;
  reply.readahead_hits = stats.readahead_hits;
  reply.hinted_prefetched = stats.hinted_prefetched;
  reply.hinted_used = stats.hinted_used;
  reply.hinted_evicted_unused = stats.hinted_evicted_unused;
  reply.hinted_cancelled = stats.hinted_cancelled;
  reply.stall_nanos = stats.stall_nanos;
  reply.prefetch_horizon = static_cast<uint64_t>(stats.prefetch_horizon);
  reply.lru_buffers = stats.lru_buffers;
  reply.hinted_buffers = stats.hinted_buffers;
  out->assign(reinterpret_cast<const char*>(&reply), sizeof(reply));
  return Status::OK();
}

Status HintIoctls::Attach(const IoctlCaller& caller, const void* in) {
  const auto* request = static_cast<const tipfs_spec_attach*>(in);
  if (request->wait_for_data > 1 || request->reserved != 0) {
    return Status::InvalidArgument("bad speculation attach flags");
  }
  if (request->header.source != TIPFS_SOURCE_SPECULATIVE &&
      request->header.source != TIPFS_SOURCE_SPECULATIVE_TAINTED) {
    return Status::InvalidArgument("a speculation attach needs a speculative source");
  }
  Result<uint64_t> stream = StreamFor(caller, request->header.stream);
  if (!stream.ok()) return stream.status();
  uint32_t process = ProcessOf(caller.pid);
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, process, 0));
  if (pidfd < 0) return ErrnoStatus("pidfd_open of the speculating process");
  MutexLock lock(&mu_);
  // Speculating children come and go at every restart; forget the ones that are gone.
  for (auto dead = attached_.begin(); dead != attached_.end();) {
    if (ProcessExited(dead->second.pidfd)) {
      close(dead->second.pidfd);
      dead = attached_.erase(dead);
    } else {
      ++dead;
    }
  }
  auto [it, inserted] = attached_.try_emplace(process);
  if (!inserted) close(it->second.pidfd);
  it->second = Attachment{pidfd, *stream, request->header.epoch, request->wait_for_data == 1,
                          static_cast<cache::HintSource>(request->header.source)};
  attached_count_.store(attached_.size(), std::memory_order_relaxed);
  return Status::OK();
}

Status HintIoctls::Detach(const IoctlCaller& caller) {
  MutexLock lock(&mu_);
  auto it = attached_.find(ProcessOf(caller.pid));
  if (it == attached_.end()) return Status::InvalidArgument("process is not attached");
  close(it->second.pidfd);
  attached_.erase(it);
  attached_count_.store(attached_.size(), std::memory_order_relaxed);
  return Status::OK();
}

Status HintIoctls::Share(const IoctlCaller& caller, const void* in) {
  const auto* request = static_cast<const tipfs_share*>(in);
  if ((request->flags & ~TIPFS_SHARE_DESCENDANTS) != 0 || request->reserved != 0) {
    return Status::InvalidArgument("unknown share flags");
  }
  Result<uint64_t> stream = StreamFor(caller, request->header.stream);
  if (!stream.ok()) return stream.status();
  const uint32_t process = ProcessOf(caller.pid);
  if (OwnerOf(*stream) != process) {
    return Status::FromErrno(EPERM, "only the process that owns stream " +
                                        std::to_string(request->header.stream) + " may share it");
  }
  const bool shared = (request->flags & TIPFS_SHARE_DESCENDANTS) != 0;
  if (shared) {
    MutexLock lock(&mu_);
    auto [it, inserted] = sharers_.try_emplace(process);
    if (!inserted && (ProcessExited(it->second.pidfd) || it->second.uid != caller.uid)) {
      // A process id reused since, or the sharer changed its user: start afresh.
      close(it->second.pidfd);
      inserted = true;
    }
    if (inserted) {
      it->second.pidfd = static_cast<int>(syscall(SYS_pidfd_open, process, 0));
      if (it->second.pidfd < 0) {
        Status status = ErrnoStatus("pidfd_open of the sharing process");
        sharers_.erase(it);
        return status;
      }
      it->second.uid = caller.uid;
      ++sharers_generation_;
      sharer_count_.store(sharers_.size(), std::memory_order_relaxed);
    }
  }
  return cache_->ShareStream(*stream, process, shared);
}

uint32_t HintIoctls::SharingAncestor(uint32_t process, uint32_t uid) {
  const int64_t now = MonotonicNanos();
  uint32_t sharer = 0;
  bool known = false;
  {
    MutexLock lock(&mu_);
    auto it = lineage_.find(process);
    if (it != lineage_.end() && it->second.generation == sharers_generation_ &&
        now - it->second.found_ns < kLineageTtlNanos) {
      sharer = it->second.sharer;
      known = true;
    }
  }
  if (!known) {
    // Walk /proc without the lock; the sharers are looked up under it below.
    uint32_t chain[kMaxAncestors];
    int length = 0;
    for (uint32_t p = ParentOf(process); p > 1 && length < kMaxAncestors; p = ParentOf(p)) {
      chain[length++] = p;
    }
    MutexLock lock(&mu_);
    for (int i = 0; i < length && sharer == 0; ++i) {
      if (sharers_.contains(chain[i])) sharer = chain[i];
    }
    if (lineage_.size() >= kMaxLineages) lineage_.clear();
    lineage_[process] = Lineage{sharer, sharers_generation_, now};
  }
  if (sharer == 0) return 0;
  bool exited = false;
  {
    MutexLock lock(&mu_);
    auto it = sharers_.find(sharer);
    if (it == sharers_.end()) return 0;
    if (ProcessExited(it->second.pidfd)) {
      close(it->second.pidfd);
      sharers_.erase(it);
      ++sharers_generation_;
      sharer_count_.store(sharers_.size(), std::memory_order_relaxed);
      exited = true;
    } else if (it->second.uid != uid) {
      return 0;  // another user's process never consumes the sharer's hints
    }
  }
  if (exited) {
    cache_->ForgetSharer(sharer);  // its hints have no reader left to serve
    return 0;
  }
  return sharer;
}

cache::ReadContext HintIoctls::ReadContextFor(uint32_t tid, uint32_t uid, int file_flags) {
  cache::ReadContext context;
  uint32_t process = ProcessOf(tid);
  context.stream = process;
  context.pid = tid;
  if (uid != kNoUid && sharer_count_.load(std::memory_order_relaxed) > 0) {
    context.shared_owner = SharingAncestor(process, uid);
  }
  if (attached_count_.load(std::memory_order_relaxed) == 0) return context;
  MutexLock lock(&mu_);
  auto it = attached_.find(process);
  if (it == attached_.end()) return context;
  if (ProcessExited(it->second.pidfd)) {
    // The process that attached is gone and its id may be someone else's now.
    close(it->second.pidfd);
    attached_.erase(it);
    attached_count_.store(attached_.size(), std::memory_order_relaxed);
    return context;
  }
  context.speculative = true;
  // O_NONBLOCK on the descriptor: this read may not wait (libtipspec's child waits for data only
  // at the call sites it learned are data-critical, and reads elsewhere through such a one).
  context.wait_for_data = it->second.wait_for_data && (file_flags & O_NONBLOCK) == 0;
  context.spec_source = it->second.source;
  context.spec_stream = it->second.stream;
  context.spec_epoch = it->second.epoch;
  context.spec_owner = OwnerOf(it->second.stream);
  return context;
}

size_t HintIoctls::attached() const {
  MutexLock lock(&mu_);
  size_t alive = 0;
  for (const auto& [process, attachment] : attached_) alive += !ProcessExited(attachment.pidfd);
  return alive;
}

cache::ReadContext ReadContextFor(uint32_t tid, uint32_t uid, HintIoctls* hints, int file_flags) {
  if (hints != nullptr) return hints->ReadContextFor(tid, uid, file_flags);
  cache::ReadContext context;
  context.stream = ProcessOf(tid);
  context.pid = tid;
  return context;
}

}  // namespace tipfs::fusefs
