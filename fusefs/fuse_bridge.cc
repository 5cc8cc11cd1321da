#include "fusefs/fuse_bridge.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/xattr.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fusefs/fuse_guard.h"
#include "fusefs/hint_ioctls.h"
#include "fusefs/process_ids.h"
#include "util/perf_context.h"
#include "util/statistics.h"

namespace tipfs::fusefs {
namespace {

// Handles: a directory handle snapshots the listing at opendir (readdir offsets index into it,
// so concurrent changes never make a listing skip or repeat an entry); a control file handle
// snapshots the rendered text at open.
struct DirHandle {
  std::vector<meta::DirEntry> entries;  // ".", "..", then the directory's entries by name
};
struct FileHandle {
  Ino ino = 0;
  int open_flags = 0;        // libfuse passes no flags with an ioctl: the hint checks need them
  std::string control_text;  // control files only
};

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

// A handle goes from the thread that opened it to the threads that use it and to the one that
// releases it, through the kernel (fi->fh of later requests). ThreadSanitizer cannot see that
// ordering, so it is annotated: the opener publishes the handle, each use acquires it and
// publishes its own accesses when done, and the releasing thread acquires all of them.
void PublishHandle(fuse_file_info* fi) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(reinterpret_cast<void*>(fi->fh));
#else
  (void)fi;
#endif
}
// For the handler that deletes the handle.
template <typename Handle>
Handle* HandleOf(fuse_file_info* fi) {
  auto* handle = reinterpret_cast<Handle*>(fi->fh);
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(handle);
#endif
  return handle;
}
// For a handler that uses the handle: Done() (or the destructor) publishes its accesses; call it
// before replying, since the reply lets the kernel send the release.
template <typename Handle>
class HandleUse {
 public:
  explicit HandleUse(fuse_file_info* fi) : fi_(fi), handle_(HandleOf<Handle>(fi)) {}
  ~HandleUse() { Done(); }
  Handle* operator->() const { return handle_; }
  void Done() {
    if (fi_ != nullptr) PublishHandle(fi_);
    fi_ = nullptr;
  }

 private:
  fuse_file_info* fi_;
  Handle* handle_;
};

FuseBridge* Bridge(fuse_req_t req) { return static_cast<FuseBridge*>(fuse_req_userdata(req)); }
FileSystem* Fs(fuse_req_t req) { return Bridge(req)->fs(); }

Caller CallerOf(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  return Caller{ctx->uid, ctx->gid, static_cast<uint32_t>(ctx->pid)};
}

void ReplyStatus(fuse_req_t req, const Status& status) { fuse_reply_err(req, status.error()); }

uint32_t BlockSizeFor(FileSystem* fs) {
  // Programs that size their reads by st_blksize (coreutils' cat and cp; glibc's stdio only up
  // to BUFSIZ) read at least a stripe unit at a time, and fast sequential readers touch every
  // disk.
  return std::max<uint32_t>(fs->volume()->layout().stripe_unit(), 128 * 1024);
}

// `blocks`: st_blocks, asked of the disks by the caller (AllocatedBlocks).
struct stat ToStat(FileSystem* fs, const meta::Inode& inode, uint64_t blocks) {
  struct stat st = {};
  st.st_ino = inode.ino;
  st.st_mode = inode.mode;
  st.st_nlink = inode.nlink;
  st.st_uid = inode.uid;
  st.st_gid = inode.gid;
  st.st_rdev = inode.rdev;
  st.st_size = static_cast<off_t>(inode.size);
  st.st_blksize = BlockSizeFor(fs);
  st.st_blocks = static_cast<blkcnt_t>(blocks);
  st.st_atim = {inode.atime.sec, inode.atime.nsec};
  st.st_mtim = {inode.mtime.sec, inode.mtime.nsec};
  st.st_ctim = {inode.ctime.sec, inode.ctime.nsec};
  return st;
}

struct stat ToStat(FileSystem* fs, const meta::Inode& inode) {
  return ToStat(fs, inode, fs->AllocatedBlocks(inode));
}

struct stat ControlStat(uint64_t ino, bool writable) {
  struct stat st = {};
  st.st_ino = ino;
  st.st_nlink = ino == ControlFiles::kDirIno ? 2 : 1;
  st.st_mode =
      ino == ControlFiles::kDirIno ? (S_IFDIR | 0555) : (S_IFREG | (writable ? 0644 : 0444));
  st.st_blksize = 4096;
  return st;
}

fuse_entry_param EntryOf(fuse_req_t req, const meta::Inode& inode, uint64_t blocks) {
  fuse_entry_param e = {};
  e.ino = inode.ino;
  e.generation = 1;  // inode numbers are never reused
  e.attr = ToStat(Fs(req), inode, blocks);
  e.attr_timeout = Bridge(req)->options().attr_timeout_seconds;
  e.entry_timeout = Bridge(req)->options().attr_timeout_seconds;
  return e;
}

fuse_entry_param EntryOf(fuse_req_t req, const meta::Inode& inode) {
  return EntryOf(req, inode, Fs(req)->AllocatedBlocks(inode));
}

fuse_entry_param ControlEntry(fuse_req_t req, uint64_t ino) {
  fuse_entry_param e = {};
  e.ino = ino;
  e.generation = 1;
  e.attr = ControlStat(ino, Bridge(req)->control()->IsWritable(ino));
  // Never cached: the contents change with every open and the size is reported as 0.
  return e;
}

void ReplyEntry(fuse_req_t req, const Result<meta::Inode>& inode) {
  if (!inode.ok()) return ReplyStatus(req, inode.status());
  fuse_entry_param e = EntryOf(req, *inode);
  fuse_reply_entry(req, &e);
}

bool IsControlDirLookup(fuse_ino_t parent, const char* name) {
  return parent == meta::kRootIno && name == ControlFiles::kDirName;
}

// ---- namespace ----

void OnLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (IsControlDirLookup(parent, name)) {
    fuse_entry_param e = ControlEntry(req, ControlFiles::kDirIno);
    return (void)fuse_reply_entry(req, &e);
  }
  if (parent == ControlFiles::kDirIno) {
    uint64_t ino = Bridge(req)->control()->Lookup(name);
    if (ino == 0) return (void)fuse_reply_err(req, ENOENT);
    fuse_entry_param e = ControlEntry(req, ino);
    return (void)fuse_reply_entry(req, &e);
  }
  RecordTick(Bridge(req)->statistics(), FUSE_LOOKUP_OPS);  // the volume's names, not .tipfs
  Result<meta::Inode> inode = Fs(req)->Lookup(parent, name);
  if (!inode.ok() && inode.error() == ENOENT) {
    // A negative entry, cached by the kernel like a positive one (compilers probe many paths).
    fuse_entry_param e = {};
    e.entry_timeout = Bridge(req)->options().attr_timeout_seconds;
    return (void)fuse_reply_entry(req, &e);
  }
  ReplyEntry(req, inode);
}

void OnForget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (!ControlFiles::IsControl(ino)) Fs(req)->Forget(ino, nlookup);
  fuse_reply_none(req);
}

void OnForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  for (size_t i = 0; i < count; ++i) {
    if (!ControlFiles::IsControl(forgets[i].ino))
      Fs(req)->Forget(forgets[i].ino, forgets[i].nlookup);
  }
  fuse_reply_none(req);
}

void OnGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (ControlFiles::IsControl(ino)) {
    struct stat st = ControlStat(ino, Bridge(req)->control()->IsWritable(ino));
    return (void)fuse_reply_attr(req, &st, 0);
  }
  RecordTick(Bridge(req)->statistics(), FUSE_GETATTR_OPS);  // the volume's files, not .tipfs
  Result<meta::Inode> inode = Fs(req)->GetAttr(ino);
  if (!inode.ok()) return ReplyStatus(req, inode.status());
  struct stat st = ToStat(Fs(req), *inode);
  fuse_reply_attr(req, &st, Bridge(req)->options().attr_timeout_seconds);
}

meta::Time TimeOf(const timespec& ts) { return meta::Time{ts.tv_sec, ts.tv_nsec}; }

void OnSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (ControlFiles::IsControl(ino)) {
    // Truncating a writable control file before writing it (shell `>`) is harmless.
    if (to_set == FUSE_SET_ATTR_SIZE && Bridge(req)->control()->IsWritable(ino)) {
      struct stat st = ControlStat(ino, true);
      return (void)fuse_reply_attr(req, &st, 0);
    }
    return (void)fuse_reply_err(req, EPERM);
  }
  meta::AttrChange change;
  change.now = meta::Time::Now();
  if (to_set & FUSE_SET_ATTR_MODE) change.mode = attr->st_mode & 07777;
  if (to_set & FUSE_SET_ATTR_UID) change.uid = attr->st_uid;
  if (to_set & FUSE_SET_ATTR_GID) change.gid = attr->st_gid;
  if (to_set & FUSE_SET_ATTR_SIZE) change.size = static_cast<uint64_t>(attr->st_size);
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
    change.atime = change.now;
  } else if (to_set & FUSE_SET_ATTR_ATIME) {
    change.atime = TimeOf(attr->st_atim);
  }
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
    change.mtime = change.now;
  } else if (to_set & FUSE_SET_ATTR_MTIME) {
    change.mtime = TimeOf(attr->st_mtim);
  }
  Result<meta::Inode> inode = Fs(req)->SetAttr(CallerOf(req), ino, change);
  if (!inode.ok()) return ReplyStatus(req, inode.status());
  struct stat st = ToStat(Fs(req), *inode);
  fuse_reply_attr(req, &st, Bridge(req)->options().attr_timeout_seconds);
}

void OnReadlink(fuse_req_t req, fuse_ino_t ino) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  Result<std::string> target = Fs(req)->ReadLink(ino);
  if (!target.ok()) return ReplyStatus(req, target.status());
  fuse_reply_readlink(req, target->c_str());
}

bool RefuseInControlDir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (parent == ControlFiles::kDirIno || ControlFiles::IsControl(parent)) {
    fuse_reply_err(req, EPERM);
    return true;
  }
  if (IsControlDirLookup(parent, name)) {
    fuse_reply_err(req, EEXIST);
    return true;
  }
  return false;
}

void OnMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (RefuseInControlDir(req, parent, name)) return;
  ReplyEntry(req, Fs(req)->MakeNode(CallerOf(req), parent, name, mode, rdev));
}

void OnMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (RefuseInControlDir(req, parent, name)) return;
  ReplyEntry(req, Fs(req)->MakeNode(CallerOf(req), parent, name, S_IFDIR | (mode & 07777), 0));
}

void OnSymlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (RefuseInControlDir(req, parent, name)) return;
  ReplyEntry(req, Fs(req)->MakeNode(CallerOf(req), parent, name, S_IFLNK | 0777, 0, link));
}

void OnLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (ControlFiles::IsControl(ino)) return (void)fuse_reply_err(req, EPERM);
  if (RefuseInControlDir(req, new_parent, new_name)) return;
  ReplyEntry(req, Fs(req)->Link(ino, new_parent, new_name));
}

void OnUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (parent == ControlFiles::kDirIno || IsControlDirLookup(parent, name)) {
    return (void)fuse_reply_err(req, EPERM);
  }
  RecordTick(Bridge(req)->statistics(), FUSE_UNLINK_OPS);
  ReplyStatus(req, Fs(req)->Unlink(parent, name));
}

void OnRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (parent == ControlFiles::kDirIno || IsControlDirLookup(parent, name)) {
    return (void)fuse_reply_err(req, EPERM);
  }
  ReplyStatus(req, Fs(req)->Rmdir(parent, name));
}

void OnRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
              const char* new_name, unsigned int flags) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (parent == ControlFiles::kDirIno || new_parent == ControlFiles::kDirIno ||
      IsControlDirLookup(parent, name) || IsControlDirLookup(new_parent, new_name)) {
    return (void)fuse_reply_err(req, EPERM);
  }
  ReplyStatus(req, Fs(req)->Rename(parent, name, new_parent, new_name, flags));
}

// ---- files ----

void SetOpenFlags(fuse_req_t req, const meta::Inode& inode, fuse_file_info* fi) {
  // Every close sends a FLUSH, which tipfs answers doing nothing (writes go through as they
  // arrive, OnFlush): FOPEN_NOFLUSH saves that round trip, one in four of a create+close. Kept
  // for an O_RDWR open in kernel mode, the only one that can map the file shared and writable:
  // the kernel's flush writes the mapping's dirty pages back at its close (write_inode_now).
  const bool read_write = (fi->flags & O_ACCMODE) == O_RDWR;
  if (Bridge(req)->options().data_cache == DataCacheMode::kDirect) {
    fi->direct_io = 1;
    fi->noflush = 1;
    return;
  }
  fi->noflush = !read_write;
  // tipfs is the only writer of its files, so pages cached by an earlier open stay valid, except
  // when a read is due to move atime (relatime): the kernel does not tell a FUSE daemon about
  // reads it serves from its page cache, so that first read must reach the daemon.
  bool reads = (fi->flags & O_ACCMODE) != O_WRONLY;
  fi->keep_cache = !(reads && Fs(req)->AtimeDue(inode));
}

void OnOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (ControlFiles::IsControl(ino)) {
    ControlFiles* control = Bridge(req)->control();
    if (ino == ControlFiles::kDirIno) return (void)fuse_reply_err(req, EISDIR);
    if ((fi->flags & O_ACCMODE) != O_RDONLY && !control->IsWritable(ino)) {
      return (void)fuse_reply_err(req, EACCES);
    }
    auto handle = std::make_unique<FileHandle>();
    handle->ino = ino;
    if ((fi->flags & O_ACCMODE) != O_WRONLY) {
      Result<std::string> text = control->Render(ino);
      if (!text.ok()) return ReplyStatus(req, text.status());
      handle->control_text = std::move(*text);
    }
    fi->direct_io = 1;
    fi->noflush = 1;  // a control file's write takes effect at write(2), not at close
    fi->fh = reinterpret_cast<uint64_t>(handle.release());
    PublishHandle(fi);
    // The opener is gone (interrupted): no release will come for this handle.
    if (fuse_reply_open(req, fi) != 0) delete reinterpret_cast<FileHandle*>(fi->fh);
    return;
  }
  RecordTick(Bridge(req)->statistics(), FUSE_OPEN_OPS);  // the volume's files, not .tipfs
  FileSystem* fs = Fs(req);  // req is freed by its reply, whether the reply arrives or not
  Result<OpenedFile> opened = fs->Open(CallerOf(req), ino, fi->flags);
  if (!opened.ok()) return ReplyStatus(req, opened.status());
  auto handle = std::make_unique<FileHandle>();
  handle->ino = ino;
  handle->open_flags = fi->flags;
  fi->fh = reinterpret_cast<uint64_t>(handle.release());
  PublishHandle(fi);
  SetOpenFlags(req, opened->inode, fi);
  if (fuse_reply_open(req, fi) != 0) {
    // The opener is gone (interrupted): undo the open so the handle count stays true.
    delete reinterpret_cast<FileHandle*>(fi->fh);
    UndoAfterFailedReply([&] { (void)fs->Release(ino); });
  }
}

void OnCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
              fuse_file_info* fi) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (RefuseInControlDir(req, parent, name)) return;
  RecordTick(Bridge(req)->statistics(), FUSE_CREATE_OPS);
  FileSystem* fs = Fs(req);  // req is freed by its reply, whether the reply arrives or not
  Result<OpenedFile> opened = fs->Create(CallerOf(req), parent, name, mode, fi->flags);
  if (!opened.ok()) return ReplyStatus(req, opened.status());
  auto handle = std::make_unique<FileHandle>();
  handle->ino = opened->inode.ino;
  handle->open_flags = fi->flags;
  fi->fh = reinterpret_cast<uint64_t>(handle.release());
  PublishHandle(fi);
  SetOpenFlags(req, opened->inode, fi);
  fuse_entry_param e = EntryOf(req, opened->inode);
  if (fuse_reply_create(req, &e, fi) != 0) {
    delete reinterpret_cast<FileHandle*>(fi->fh);
    const Ino ino = opened->inode.ino;
    UndoAfterFailedReply([&] {
      (void)fs->Release(ino);
      fs->Forget(ino, 1);
    });
  }
}

// Replies with the read's bytes where the cache holds them: one iovec per slice, adjacent
// slices of one buffer merged, sent by one writev (fuse_reply_iov). fuse_reply_data would copy
// several memory buffers into one first.
void ReplyData(fuse_req_t req, const cache::ReadData& data) {
  constexpr size_t kInlineSlices = 32;
  iovec inline_iov[kInlineSlices];
  std::vector<iovec> heap_iov;
  iovec* iov = inline_iov;
  if (data.slices.size() > kInlineSlices) {
    heap_iov.resize(data.slices.size());
    iov = heap_iov.data();
  }
  int count = 0;
  for (const cache::ReadSlice& slice : data.slices) {
    if (count > 0 &&
        static_cast<const char*>(iov[count - 1].iov_base) + iov[count - 1].iov_len == slice.data) {
      iov[count - 1].iov_len += slice.length;
      continue;
    }
    iov[count++] = iovec{const_cast<char*>(slice.data), slice.length};
  }
  fuse_reply_iov(req, iov, count);
}

void OnRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  HandleUse<FileHandle> handle(fi);
  if (ControlFiles::IsControl(ino)) {
    // Replied from a copy: once the reply is in, the kernel may send the release that frees
    // the handle while libfuse's writev is still returning (sanitizers check its buffer then).
    thread_local std::string reply;
    const std::string& text = handle->control_text;
    const size_t start = std::min(static_cast<size_t>(off), text.size());
    reply.assign(text, start, std::min(size, text.size() - start));
    handle.Done();
    return (void)fuse_reply_buf(req, reply.data(), reply.size());
  }
  handle.Done();  // the data path needs only the inode number
  const fuse_ctx* ctx = fuse_req_ctx(req);
  FuseBridge* bridge = Bridge(req);
  cache::ReadContext context =
      ReadContextFor(static_cast<uint32_t>(ctx->pid), ctx->uid, bridge->hints(), fi->flags);
  // Asynchronous: a miss returns this worker to the FUSE loop at once and the reply goes out from
  // the completion, so the reads in flight are bounded by the disks' queues, not by the workers.
  bridge->fs()->ReadAsync(context, ino, static_cast<uint64_t>(off), size,
                          [req, bridge](Result<cache::ReadData> data) {
                            if (!data.ok()) return ReplyStatus(req, data.status());
                            RecordTick(bridge->statistics(), FUSE_READ_OPS);
                            RecordTick(bridge->statistics(), FUSE_READ_BYTES, data->bytes);
                            ReplyData(req, *data);
                          });
}

void OnWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
             fuse_file_info*) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (ControlFiles::IsControl(ino)) {
    if (off != 0) return (void)fuse_reply_err(req, EINVAL);
    Status st = Bridge(req)->control()->Write(ino, std::string_view(buf, size));
    if (!st.ok()) return ReplyStatus(req, st);
    return (void)fuse_reply_write(req, size);
  }
  Result<size_t> n = Fs(req)->Write(CallerOf(req), ino, static_cast<uint64_t>(off), buf, size);
  if (!n.ok()) return ReplyStatus(req, n.status());
  RecordTick(Bridge(req)->statistics(), FUSE_WRITE_OPS);
  RecordTick(Bridge(req)->statistics(), FUSE_WRITE_BYTES, *n);
  fuse_reply_write(req, *n);
}

void OnFlush(fuse_req_t req, fuse_ino_t, fuse_file_info*) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  RecordTick(Bridge(req)->statistics(), FUSE_FLUSH_OPS);
  // Writes go through to the disks as they arrive; close has nothing left to push.
  fuse_reply_err(req, 0);
}

void OnRelease(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  std::unique_ptr<FileHandle> handle(HandleOf<FileHandle>(fi));
  if (ControlFiles::IsControl(ino)) return (void)fuse_reply_err(req, 0);
  RecordTick(Bridge(req)->statistics(), FUSE_RELEASE_OPS);  // the volume's files, not .tipfs
  ReplyStatus(req, Fs(req)->Release(ino));
}

void OnFsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info*) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (ControlFiles::IsControl(ino)) return (void)fuse_reply_err(req, 0);
  ReplyStatus(req, Fs(req)->Fsync(ino, datasync != 0));
}

void OnLseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, fuse_file_info*) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  // Never ENOSYS: the kernel would stop asking for the whole mount. Control files report size 0.
  if (ControlFiles::IsControl(ino)) return (void)fuse_reply_err(req, ENXIO);
  if (off < 0) return (void)fuse_reply_err(req, ENXIO);
  Result<uint64_t> at = Fs(req)->Seek(ino, static_cast<uint64_t>(off), whence);
  if (!at.ok()) return ReplyStatus(req, at.status());
  fuse_reply_lseek(req, static_cast<off_t>(*at));
}

// ---- directories ----

void OnOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  auto handle = std::make_unique<DirHandle>();
  if (ino == ControlFiles::kDirIno) {
    handle->entries.push_back({".", ino, S_IFDIR});
    handle->entries.push_back({"..", meta::kRootIno, S_IFDIR});
    for (auto& [name, file_ino] : Bridge(req)->control()->List()) {
      handle->entries.push_back({name, file_ino, S_IFREG});
    }
  } else {
    Result<meta::Inode> dir = Fs(req)->GetAttr(ino);
    if (!dir.ok()) return ReplyStatus(req, dir.status());
    if (!S_ISDIR(dir->mode)) return (void)fuse_reply_err(req, ENOTDIR);
    Result<std::vector<meta::DirEntry>> entries = Fs(req)->ListDir(ino);
    if (!entries.ok()) return ReplyStatus(req, entries.status());
    handle->entries.reserve(entries->size() + 2);
    handle->entries.push_back({".", ino, S_IFDIR});
    handle->entries.push_back({"..", dir->parent, S_IFDIR});
    for (auto& entry : *entries) handle->entries.push_back(std::move(entry));
  }
  fi->fh = reinterpret_cast<uint64_t>(handle.release());
  PublishHandle(fi);
  if (fuse_reply_open(req, fi) != 0) delete reinterpret_cast<DirHandle*>(fi->fh);
}

// One READDIRPLUS reply: which entries fit depends on their names alone, so the entries are
// chosen first and st_blocks of all of them asked of the disks at once (on RADOS disks one round
// trip for the reply instead of one per entry and disk).
size_t FillDirectoryPlus(fuse_req_t req, const std::vector<meta::DirEntry>& entries, size_t off,
                         bool control_dir, char* buffer, size_t size, std::vector<Ino>* looked_up) {
  FileSystem* fs = Fs(req);
  struct Chosen {
    size_t index = 0;
    fuse_entry_param entry = {};
    bool counted = false;  // hands the kernel a lookup reference (all but ".", ".." and .tipfs/)
    meta::Inode inode;     // counted ones
  };
  std::vector<Chosen> chosen;
  size_t fitted = 0;
  for (size_t i = off; i < entries.size(); ++i) {
    const meta::DirEntry& entry = entries[i];
    const size_t needed = fuse_add_direntry_plus(req, nullptr, 0, entry.name.c_str(), nullptr, 0);
    if (fitted + needed > size) break;
    Chosen c;
    c.index = i;
    if (control_dir) {
      c.entry = ControlEntry(req, entry.ino);
    } else if (entry.name == "." || entry.name == "..") {
      c.entry.attr.st_ino = entry.ino;
      c.entry.attr.st_mode = entry.type;
    } else {
      Result<meta::Inode> inode = fs->GetAttr(entry.ino);
      if (!inode.ok()) continue;  // removed since opendir
      c.counted = true;
      c.inode = *inode;
    }
    fitted += needed;
    chosen.push_back(std::move(c));
  }
  std::vector<const meta::Inode*> inodes;
  for (const Chosen& c : chosen) {
    if (c.counted) inodes.push_back(&c.inode);
  }
  const std::vector<uint64_t> blocks = fs->AllocatedBlocks(inodes);
  size_t used = 0;
  size_t next_blocks = 0;
  for (Chosen& c : chosen) {
    if (c.counted) c.entry = EntryOf(req, c.inode, blocks[next_blocks++]);
    used += fuse_add_direntry_plus(req, buffer + used, size - used, entries[c.index].name.c_str(),
                                   &c.entry, static_cast<off_t>(c.index + 1));
    // Counted before the reply: the kernel may forget an entry as soon as it has the reply.
    if (c.counted) {
      looked_up->push_back(c.inode.ino);
      fs->inodes()->AddLookups(c.inode.ino);
    }
  }
  return used;
}

void ReadDirectory(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi,
                   bool plus) {
  HandleUse<DirHandle> handle(fi);
  FileSystem* fs = Fs(req);
  std::vector<char> buffer(size);
  std::vector<Ino> looked_up;  // readdirplus: the references this reply hands the kernel
  size_t used = 0;
  const bool control_dir = ino == ControlFiles::kDirIno;
  if (plus) {
    used = FillDirectoryPlus(req, handle->entries, static_cast<size_t>(off), control_dir,
                             buffer.data(), size, &looked_up);
  }
  for (size_t i = static_cast<size_t>(off); !plus && i < handle->entries.size(); ++i) {
    const meta::DirEntry& entry = handle->entries[i];
    struct stat st = {};
    st.st_ino = entry.ino;
    st.st_mode = entry.type;
    const size_t needed = fuse_add_direntry(req, buffer.data() + used, size - used,
                                            entry.name.c_str(), &st, static_cast<off_t>(i + 1));
    if (needed > size - used) break;
    used += needed;
  }
  handle.Done();
  if (fuse_reply_buf(req, buffer.data(), used) != 0 && !looked_up.empty()) {
    // The kernel never got these entries, so it will never forget them: take the references back.
    UndoAfterFailedReply([&] {
      for (Ino looked : looked_up) fs->Forget(looked, 1);
    });
  }
}

void OnReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  ReadDirectory(req, ino, size, off, fi, false);
}

void OnReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  ReadDirectory(req, ino, size, off, fi, true);
}

void OnReleasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  delete HandleOf<DirHandle>(fi);
  fuse_reply_err(req, 0);
}

void OnFsyncdir(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  ReplyStatus(req, Fs(req)->SyncAll());
}

void OnStatfs(fuse_req_t req, fuse_ino_t) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  Result<struct statvfs> st = Fs(req)->StatFs();
  if (!st.ok()) return ReplyStatus(req, st.status());
  fuse_reply_statfs(req, &*st);
}

// ---- extended attributes ----

bool UnsupportedXattr(const char* name) {
  // The namespaces Linux file systems store: user., trusted. and security. (the kernel checks
  // who may touch which). No POSIX ACLs or other system.* attributes: storing one without
  // enforcing it would lie, and unknown prefixes are EOPNOTSUPP as on ext4.
  for (const char* prefix : {"user.", "trusted.", "security."}) {
    if (std::strncmp(name, prefix, std::strlen(prefix)) == 0) return false;
  }
  return true;
}

void OnSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
                int flags) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (ControlFiles::IsControl(ino)) return (void)fuse_reply_err(req, EPERM);
  if (UnsupportedXattr(name)) return (void)fuse_reply_err(req, EOPNOTSUPP);
  ReplyStatus(req, Fs(req)->SetXattr(ino, name, std::string_view(value, size), flags));
}

void ReplySized(fuse_req_t req, const std::string& data, size_t size) {
  if (size == 0) return (void)fuse_reply_xattr(req, data.size());
  if (size < data.size()) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, data.data(), data.size());
}

void OnGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (ControlFiles::IsControl(ino)) return (void)fuse_reply_err(req, ENODATA);
  if (UnsupportedXattr(name)) return (void)fuse_reply_err(req, EOPNOTSUPP);
  Result<std::string> value = Fs(req)->GetXattr(ino, name);
  if (!value.ok()) return ReplyStatus(req, value.status());
  ReplySized(req, *value, size);
}

void OnListxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (ControlFiles::IsControl(ino)) return ReplySized(req, std::string(), size);
  Result<std::vector<std::string>> names = Fs(req)->ListXattrs(ino);
  if (!names.ok()) return ReplyStatus(req, names.status());
  std::string packed;
  for (const std::string& name : *names) packed.append(name).push_back('\0');
  ReplySized(req, packed, size);
}

void OnRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  if (ControlFiles::IsControl(ino)) return (void)fuse_reply_err(req, EPERM);
  if (UnsupportedXattr(name)) return (void)fuse_reply_err(req, EOPNOTSUPP);
  ReplyStatus(req, Fs(req)->RemoveXattr(ino, name));
}

// ---- ioctl ----

void OnIoctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void*, fuse_file_info* fi,
             unsigned flags, const void* in_buf, size_t in_size, size_t out_size) {
  PerfSection dispatch(Subsystem::kFuseDispatch);
  HintIoctls* hints = Bridge(req)->hints();
  if (hints == nullptr || (flags & FUSE_IOCTL_COMPAT)) return (void)fuse_reply_err(req, ENOTTY);
  const fuse_ctx* ctx = fuse_req_ctx(req);
  IoctlCaller caller{ctx->uid, ctx->gid, static_cast<uint32_t>(ctx->pid)};
  std::string out;
  // A directory's fh is a DirHandle (and hinting one is EISDIR whatever its flags).
  int open_flags = O_RDONLY;
  if (fi != nullptr && !(flags & FUSE_IOCTL_DIR) && fi->fh != 0 && !ControlFiles::IsControl(ino)) {
    open_flags = HandleUse<FileHandle>(fi)->open_flags;
  }
  Status st = hints->Handle(caller, ino, open_flags, cmd, in_buf, in_size, out_size, &out);
  if (!st.ok()) return ReplyStatus(req, st);
  fuse_reply_ioctl(req, 0, out.empty() ? nullptr : out.data(), out.size());
}

// ---- session ----

void OnInit(void* userdata, fuse_conn_info* conn) noexcept {
  auto* bridge = static_cast<FuseBridge*>(userdata);
  // Large requests: one FUSE round trip moves up to 1 MiB, many stripe units at once.
  conn->max_write = 1024 * 1024;
  conn->max_readahead = kKernelReadaheadBytes;
  // The kernel lets only max_background asynchronous requests (read-ahead, AIO) of a connection
  // into the daemon at once, 12 by default: too few to keep an array busy from one deep queue.
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  if (conn->capable & FUSE_CAP_IOCTL_DIR) conn->want |= FUSE_CAP_IOCTL_DIR;
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  if (conn->capable & FUSE_CAP_CACHE_SYMLINKS) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
  // Data changes only through this mount; the kernel need not drop pages when mtime moves.
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
  (void)bridge;
}

}  // namespace

FuseBridge::FuseBridge(FileSystem* fs, ControlFiles* control, HintIoctls* hints,
                       Statistics* statistics, const MountOptions& options)
    : fs_(fs), control_(control), hints_(hints), statistics_(statistics), options_(options) {}

const fuse_lowlevel_ops* FuseBridge::Operations() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o = {};
    o.init = OnInit;
    o.lookup = GuardedHandler<OnLookup>::Run;
    o.forget = GuardedHandler<OnForget, true>::Run;
    o.forget_multi = GuardedHandler<OnForgetMulti, true>::Run;
    o.getattr = GuardedHandler<OnGetattr>::Run;
    o.setattr = GuardedHandler<OnSetattr>::Run;
    o.readlink = GuardedHandler<OnReadlink>::Run;
    o.mknod = GuardedHandler<OnMknod>::Run;
    o.mkdir = GuardedHandler<OnMkdir>::Run;
    o.symlink = GuardedHandler<OnSymlink>::Run;
    o.link = GuardedHandler<OnLink>::Run;
    o.unlink = GuardedHandler<OnUnlink>::Run;
    o.rmdir = GuardedHandler<OnRmdir>::Run;
    o.rename = GuardedHandler<OnRename>::Run;
    o.open = GuardedHandler<OnOpen>::Run;
    o.create = GuardedHandler<OnCreate>::Run;
    o.read = GuardedHandler<OnRead>::Run;
    o.write = GuardedHandler<OnWrite>::Run;
    o.flush = GuardedHandler<OnFlush>::Run;
    o.release = GuardedHandler<OnRelease>::Run;
    o.fsync = GuardedHandler<OnFsync>::Run;
    o.lseek = GuardedHandler<OnLseek>::Run;
    o.opendir = GuardedHandler<OnOpendir>::Run;
    o.readdir = GuardedHandler<OnReaddir>::Run;
    o.readdirplus = GuardedHandler<OnReaddirplus>::Run;
    o.releasedir = GuardedHandler<OnReleasedir>::Run;
    o.fsyncdir = GuardedHandler<OnFsyncdir>::Run;
    o.statfs = GuardedHandler<OnStatfs>::Run;
    o.setxattr = GuardedHandler<OnSetxattr>::Run;
    o.getxattr = GuardedHandler<OnGetxattr>::Run;
    o.listxattr = GuardedHandler<OnListxattr>::Run;
    o.removexattr = GuardedHandler<OnRemovexattr>::Run;
    o.ioctl = GuardedHandler<OnIoctl>::Run;
    return o;
  }();
  return &ops;
}

}  // namespace tipfs::fusefs
