#include "fusefs/ring_workers.h"

#include <fcntl.h>
#include <pthread.h>

#include <cstddef>
#include <cstdio>  // RENAME_NOREPLACE, RENAME_EXCHANGE
#include <cstring>
#include <system_error>
#include <type_traits>

#include "fusefs/filesystem.h"

namespace tipfs::fusefs {
namespace {

// The first 32-bit field of a request's arguments: the open flags of an OPEN or CREATE, the
// `valid` mask of a SETATTR. 0 when the request is too short to hold it.
uint32_t FirstField(const void* args, size_t args_bytes) {
  uint32_t field = 0;
  if (args_bytes >= sizeof field) std::memcpy(&field, args, sizeof field);
  return field;
}

// The name that starts at `args` (an UNLINK's or RMDIR's whole argument), or null when it is
// not terminated inside the request.
const char* NameArgument(const void* args, size_t args_bytes) {
  const char* name = static_cast<const char*>(args);
  return std::memchr(name, '\0', args_bytes) != nullptr ? name : nullptr;
}

// Whether a RENAME or RENAME2 (`Args`: fuse_rename_in or fuse_rename2_in, then the old and the
// new name) may replace a file whose bytes `fs` would free after syncing the metadata store.
template <typename Args>
bool RenameWouldSync(const void* args, size_t args_bytes, FileSystem* fs) {
  Args rename;
  if (args_bytes < sizeof rename) return true;
  std::memcpy(&rename, args, sizeof rename);
  if constexpr (std::is_same_v<Args, fuse_rename2_in>) {
    if (rename.flags & (RENAME_NOREPLACE | RENAME_EXCHANGE)) return false;  // nothing is freed
  }
  const char* old_name =
      NameArgument(static_cast<const char*>(args) + sizeof rename, args_bytes - sizeof rename);
  if (old_name == nullptr) return true;
  const size_t old_bytes = std::strlen(old_name) + 1;
  const char* new_name = NameArgument(old_name + old_bytes, args_bytes - sizeof rename - old_bytes);
  return new_name == nullptr || fs->UnlinkWouldSync(rename.newdir, new_name);
}

}  // namespace

bool ServedInline(const fuse_in_header& in, const void* args, size_t args_bytes, FileSystem* fs) {
  static_assert(offsetof(fuse_open_in, flags) == 0 && offsetof(fuse_create_in, flags) == 0 &&
                offsetof(fuse_setattr_in, valid) == 0);
  switch (in.opcode) {
    case FUSE_READ:  // asynchronous: a miss is answered from its completion
    case FUSE_LOOKUP:
    case FUSE_GETATTR:
    case FUSE_READLINK:
    case FUSE_FLUSH:
    case FUSE_OPENDIR:
    case FUSE_READDIR:
    case FUSE_READDIRPLUS:
    case FUSE_RELEASEDIR:
    case FUSE_GETXATTR:
    case FUSE_LISTXATTR:
    case FUSE_SETXATTR:
    case FUSE_REMOVEXATTR:
    case FUSE_ACCESS:
    case FUSE_MKDIR:  // new names: the metadata store only
    case FUSE_MKNOD:
    case FUSE_SYMLINK:
    case FUSE_LINK:
    // Waits for the disks only in futex waits that are noticed (util/wait_notice.h), and the ring
    // passes to a spare thread if they last. (The kernel delivers an entry's next request through
    // the thread that committed its last reply, which a futex wait lets run at once; an
    // uninterruptible sleep would not.)
    case FUSE_WRITE:
      return true;
    case FUSE_OPEN:
    case FUSE_CREATE:  // the metadata store only, unless O_TRUNC empties an existing file
      return (FirstField(args, args_bytes) & O_TRUNC) == 0;
    case FUSE_SETATTR:  // modes, owners and times are metadata; a new size cuts the data
      return (FirstField(args, args_bytes) & FATTR_SIZE) == 0;
    case FUSE_UNLINK:  // unless it frees a file's data after the metadata store's fdatasync
    case FUSE_RMDIR: {
      const char* name = NameArgument(args, args_bytes);
      return fs != nullptr && name != nullptr && !fs->UnlinkWouldSync(in.nodeid, name);
    }
    case FUSE_RENAME:  // unless the file it replaces would be freed so
      return fs != nullptr && !RenameWouldSync<fuse_rename_in>(args, args_bytes, fs);
    case FUSE_RENAME2:
      return fs != nullptr && !RenameWouldSync<fuse_rename2_in>(args, args_bytes, fs);
    case FUSE_RELEASE:
      return fs != nullptr && !fs->ReleaseWouldSync(in.nodeid);
    default:  // fsync, statfs, ioctls, new opcodes
      return false;
  }
}

RingWorkers::RingWorkers(ServeFn serve, void* context, uint32_t threads)
    : serve_(serve), context_(context), thread_count_(threads) {}

RingWorkers::~RingWorkers() { Stop(); }

Status RingWorkers::Start() {
  try {
    for (uint32_t i = 0; i < thread_count_; ++i) threads_.emplace_back([this, i] { Run(i); });
  } catch (const std::system_error& e) {
    Stop();
    return Status::FromErrno(e.code().value(), std::string("FUSE ring: a worker: ") + e.what());
  }
  return Status::OK();
}

void RingWorkers::Hand(char* request, size_t bytes) {
  {
    MutexLock lock(&mu_);
    queued_.push_back({request, bytes});
  }
  work_.Signal();
}

void RingWorkers::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  work_.SignalAll();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void RingWorkers::Run(uint32_t index) {
  char name[16];
  std::snprintf(name, sizeof name, "tipfs-ringw%u", static_cast<unsigned>(index % 1000));
  pthread_setname_np(pthread_self(), name);
  MutexLock lock(&mu_);
  for (;;) {
    while (queued_.empty() && !stopping_) work_.Wait(&mu_);
    if (queued_.empty()) return;  // stopping, and everything handed over has been taken
    const Request request = queued_.front();
    queued_.pop_front();
    lock.Unlock();
    serve_(context_, request.data, request.bytes);
    lock.Lock();
  }
}

}  // namespace tipfs::fusefs
