#include "fusefs/filesystem.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include <cstdio>

#include "fusefs/permissions.h"
#include "util/perf_context.h"
#include "util/wait_notice.h"

namespace tipfs::fusefs {

using meta::Inode;
using meta::Time;

namespace {

// Set-id bits a write or truncate by an unprivileged caller takes away: S_ISUID, and S_ISGID on a
// group-executable file (the kernel's should_remove_suid; regular files only).
bool HasDroppableSetId(const Inode& inode) {
  return S_ISREG(inode.mode) &&
         ((inode.mode & S_ISUID) || ((inode.mode & S_ISGID) && (inode.mode & S_IXGRP)));
}

// Whether `caller` keeps set-id bits when it writes or truncates: CAP_FSETID, or no process at
// all (Caller::pid 0). Reads /proc, so only asked about files that have such bits.
bool MayKeepSetId(const Caller& caller) {
  return caller.pid == 0 || CredentialsOf(caller.uid, caller.gid, caller.pid).fsetid;
}

}  // namespace

FileSystem::FileSystem(stripe::Volume* volume, meta::MetaStore* meta, cache::FileCache* cache)
    : volume_(volume), meta_(meta), cache_(cache) {}

Status FileSystem::Recover() {
  Result<std::vector<Ino>> orphans = meta_->ListOrphans();
  if (!orphans.ok()) return orphans.status();
  // Orphans read from a store just opened: their unlinks are durable already.
  for (Ino ino : *orphans) TIPFS_RETURN_IF_ERROR(Reclaim(ino, /*sync_unlink_first=*/false));
  return Status::OK();
}

Status FileSystem::DataError(const Status& status) {
  // What read(2), write(2) and fsync(2) on a local file can fail with. Anything else the backing
  // store said (an object that became a directory, a vanished objects/ tree) means the storage
  // under the file failed: EIO, with the real cause in the message.
  switch (status.error()) {
    case 0:
    case EIO:
    case ENOSPC:
    case EDQUOT:
    case EROFS:
    case EFBIG:
    case EAGAIN:  // a speculating reader asked for data that is not cached
    case EINTR:
      return status;
    default:
      return Status::IOError(status.message());
  }
}

Result<Inode> FileSystem::Lookup(Ino parent, std::string_view name) {
  PerfSection metadata(Subsystem::kMetadata);
  Result<Inode> inode = meta_->Lookup(parent, name);
  if (inode.ok()) inodes_.AddLookups(inode->ino);
  return inode;
}

void FileSystem::Forget(Ino ino, uint64_t count) {
  // Taken before the table drops the inode: it remembers whether the data is gone already.
  std::shared_ptr<InodeState> state = inodes_.State(ino);
  if (!inodes_.Forget(ino, count)) return;
  // The kernel let go of an inode nobody has open: if it has no links left either (unlinked, or
  // a removed directory that was somebody's cwd), its record can go now.
  Result<Inode> inode = meta_->Get(ino);
  if (inode.ok() && inode->nlink == 0) {
    (void)Reclaim(ino, /*sync_unlink_first=*/false, std::move(state));
  }
}

Result<Inode> FileSystem::GetAttr(Ino ino) {
  PerfSection metadata(Subsystem::kMetadata);
  return meta_->Get(ino);
}

Result<Inode> FileSystem::SetAttr(Ino ino, meta::AttrChange change) {
  Result<Inode> result = ApplyAttrChange(ino, change);
  if (result.ok()) NoteSetIdBits(*result);
  return result;
}

Result<Inode> FileSystem::SetAttr(const Caller& caller, Ino ino, meta::AttrChange change) {
  if (change.size || change.uid || change.gid) {
    Result<Inode> inode = meta_->Get(ino);
    if (!inode.ok()) return inode;
    if (S_ISREG(inode->mode) && (inode->mode & (S_ISUID | S_ISGID))) {
      // chown_common: a new owner or group clears S_ISUID whoever asks, and S_ISGID of a
      // group-executable file; S_ISGID alone stays only for a member of the file's group or a
      // caller with CAP_FSETID (setattr_should_drop_sgid).
      if (change.uid || change.gid) {
        change.clear_setid = true;
        if ((inode->mode & S_ISGID) && !(inode->mode & S_IXGRP)) {
          Credentials who = CredentialsOf(caller.uid, caller.gid, caller.pid);
          if (caller.pid != 0 && !who.fsetid && !InGroup(who, inode->gid)) {
            change.clear_setgid = true;
          }
        }
      }
      if (change.size && HasDroppableSetId(*inode) && !MayKeepSetId(caller)) {
        change.clear_setid = true;
      }
    }
  }
  return SetAttr(ino, change);
}

Result<Inode> FileSystem::ApplyAttrChange(Ino ino, meta::AttrChange change) {
  if (!change.size) return meta_->SetAttr(ino, change);
  std::shared_ptr<InodeState> state = inodes_.State(ino);
  NoticedExclusiveLock io_lock(&state->io_mutex);
  Result<Inode> inode = meta_->Get(ino);
  if (!inode.ok()) return inode;
  if (S_ISDIR(inode->mode)) return Status::FromErrno(EISDIR, "truncate of a directory");
  if (!S_ISREG(inode->mode)) return Status::InvalidArgument("truncate of a special file");
  Result<Inode> resized = Resize(*inode, *change.size, change.now, change.clear_setid);
  if (!resized.ok()) return resized;
  change.size.reset();
  change.clear_setid = false;  // done with the size, in the same batch
  if (!change.mode && !change.uid && !change.gid && !change.atime && !change.mtime &&
      !change.clear_setgid) {
    return resized;
  }
  return meta_->SetAttr(ino, change);
}

void FileSystem::NoteSetIdBits(const Inode& inode) {
  if (!HasDroppableSetId(inode)) return;
  inodes_.State(inode.ino)->may_have_setid.store(true, std::memory_order_release);
}

Status FileSystem::DropSetIdBeforeWrite(const Caller& caller, Ino ino, InodeState* state) {
  Result<Inode> inode = meta_->Get(ino);
  if (!inode.ok()) return inode.status();
  if (!HasDroppableSetId(*inode)) {
    state->may_have_setid.store(false, std::memory_order_relaxed);
    return Status::OK();
  }
  if (MayKeepSetId(caller)) return Status::OK();
  meta::AttrChange change;
  change.clear_setid = true;
  change.now = Time::Now();
  Result<Inode> changed = meta_->SetAttr(ino, change);
  if (!changed.ok()) return changed.status();
  state->may_have_setid.store(HasDroppableSetId(*changed), std::memory_order_relaxed);
  // The kernel may hold the old mode (and would exec the file set-id with it until it asks).
  if (attribute_listener_) attribute_listener_(ino);
  return Status::OK();
}

Result<Inode> FileSystem::Resize(const Inode& inode, uint64_t new_size, Time now,
                                 bool clear_setid) {
  // Objects change before the metadata: after a crash in between, a shrunk file may read zeros
  // where truncated data was, but a file never exposes bytes it did not own. Growth first cuts
  // the objects at the old size, so that bytes a crash left past the recorded size cannot
  // reappear inside the new range.
  uint64_t cut = std::min(inode.size, new_size);
  TIPFS_RETURN_IF_ERROR(DataError(cache_->Truncate(inode.ino, inode.size, cut)));
  meta::AttrChange change;
  change.size = new_size;
  change.clear_setid = clear_setid;
  change.now = now;
  return meta_->SetAttr(inode.ino, change);
}

Result<Inode> FileSystem::MakeNode(const Caller& caller, Ino parent, std::string_view name,
                                   uint32_t mode, uint64_t rdev, std::string_view symlink_target) {
  Result<Inode> dir = meta_->Get(parent);
  if (!dir.ok()) return dir;
  meta::NewNode node;
  node.mode = mode;
  node.uid = caller.uid;
  node.gid = caller.gid;
  node.rdev = rdev;
  node.symlink_target = std::string(symlink_target);
  node.now = Time::Now();
  // BSD group semantics of a set-group-ID directory, as ext4 applies them.
  if (dir->mode & S_ISGID) {
    node.gid = dir->gid;
    if (S_ISDIR(mode)) node.mode |= S_ISGID;
  }
  Result<Inode> inode = meta_->MakeNode(parent, name, node);
  if (inode.ok()) inodes_.AddLookups(inode->ino);
  return inode;
}

Result<Inode> FileSystem::Link(Ino ino, Ino new_parent, std::string_view new_name) {
  PerfSection metadata(Subsystem::kMetadata);
  Result<Inode> inode = meta_->Link(ino, new_parent, new_name, Time::Now());
  if (inode.ok()) inodes_.AddLookups(inode->ino);
  return inode;
}

Status FileSystem::Unlink(Ino parent, std::string_view name) {
  Result<Inode> inode = meta_->Unlink(parent, name, Time::Now());
  if (!inode.ok()) return inode.status();
  ReclaimAfterNamespaceChange(*inode);
  return Status::OK();
}

Status FileSystem::Rmdir(Ino parent, std::string_view name) {
  Result<Inode> inode = meta_->Rmdir(parent, name, Time::Now());
  if (!inode.ok()) return inode.status();
  ReclaimAfterNamespaceChange(*inode);
  return Status::OK();
}

Status FileSystem::Rename(Ino parent, std::string_view name, Ino new_parent,
                          std::string_view new_name, unsigned flags) {
  Result<std::optional<Inode>> replaced =
      meta_->Rename(parent, name, new_parent, new_name, flags, Time::Now());
  if (!replaced.ok()) return replaced.status();
  if (replaced->has_value()) ReclaimAfterNamespaceChange(**replaced);
  return Status::OK();
}

void FileSystem::ReclaimAfterNamespaceChange(const Inode& inode) {
  // The name is gone already (one batch, as on a local file system): failing the call now would
  // tell the program its file is still there. An inode whose data could not be freed stays on
  // the orphan list, and the next mount (Recover) frees it.
  Status reclaimed = ReclaimIfUnused(inode);
  if (!reclaimed.ok()) {
    std::fprintf(stderr,
                 "tipfs: freeing the data of inode %llu failed (the next mount frees it): %s\n",
                 static_cast<unsigned long long>(inode.ino), reclaimed.ToString().c_str());
  }
}

Result<std::string> FileSystem::ReadLink(Ino ino) {
  PerfSection metadata(Subsystem::kMetadata);
  return meta_->ReadLink(ino);
}

Result<OpenedFile> FileSystem::Open(const Caller& caller, Ino ino, int flags) {
  std::shared_ptr<InodeState> state = inodes_.State(ino);
  {
    // Counted open under the inode lock, so a concurrent reclaim either sees this handle or has
    // already deleted the inode (and Get below fails).
    NoticedSharedLock io_lock(&state->io_mutex);
    inodes_.Open(ino);
    state->data_removed.store(false, std::memory_order_relaxed);  // it may get data again
  }
  Result<Inode> inode = meta_->Get(ino);
  if (inode.ok() && (flags & O_TRUNC) && S_ISREG(inode->mode) && inode->size > 0) {
    NoticedExclusiveLock io_lock(&state->io_mutex);
    inode = Resize(*inode, 0, Time::Now(), HasDroppableSetId(*inode) && !MayKeepSetId(caller));
  }
  if (!inode.ok()) {
    inodes_.Close(ino);
    return inode.status();
  }
  NoteSetIdBits(*inode);
  return OpenedFile{*inode, next_handle_++};
}

Result<OpenedFile> FileSystem::Create(const Caller& caller, Ino parent, std::string_view name,
                                      uint32_t mode, int flags) {
  Result<Inode> inode = MakeNode(caller, parent, name, S_IFREG | (mode & 07777), 0);
  if (!inode.ok()) return inode.status();
  Result<OpenedFile> opened = Open(caller, inode->ino, flags & ~O_TRUNC);
  if (opened.ok()) return opened;
  // A create that fails leaves no name: the caller got no descriptor and was told it failed.
  Forget(inode->ino, 1);
  Result<Inode> named = meta_->Lookup(parent, name);
  if (named.ok() && named->ino == inode->ino) {  // not renamed or replaced meanwhile
    if (Result<Inode> removed = meta_->Unlink(parent, name, Time::Now()); removed.ok()) {
      ReclaimAfterNamespaceChange(*removed);
    }
  }
  return opened;
}

Result<size_t> FileSystem::Read(const cache::ReadContext& context, Ino ino, uint64_t offset,
                                size_t length, char* out) {
  std::shared_ptr<InodeState> state = inodes_.State(ino);
  NoticedSharedLock io_lock(&state->io_mutex);
  Result<Inode> inode = GetAttr(ino);
  if (!inode.ok()) return inode.status();
  if (S_ISDIR(inode->mode)) return Status::FromErrno(EISDIR, "read of a directory");
  Result<size_t> n = cache_->Read(context, ino, offset, length, inode->size, out);
  if (!n.ok()) return DataError(n.status());
  if (!context.speculative) UpdateAtime(*inode);
  return n;
}

void FileSystem::ReadAsync(const cache::ReadContext& context, Ino ino, uint64_t offset,
                           size_t length, std::function<void(Result<cache::ReadData>)> done) {
  // No inode lock across the wait: a read comes with an open handle, so the file cannot be
  // reclaimed meanwhile, and the cache keeps a read that overlaps a truncate or a write coherent
  // (it returns the bytes before or after, never a mix that neither left).
  Result<Inode> inode = GetAttr(ino);
  if (!inode.ok()) return done(inode.status());
  if (S_ISDIR(inode->mode)) return done(Status::FromErrno(EISDIR, "read of a directory"));
  const bool atime_due = !context.speculative && AtimeDue(*inode);
  cache_->ReadShared(
      context, ino, offset, length, inode->size,
      [this, done = std::move(done), atime_due, inode = *inode](Result<cache::ReadData> data) {
        if (!data.ok()) return done(DataError(data.status()));
        if (atime_due) UpdateAtime(inode);
        done(std::move(data));
      });
}

bool FileSystem::AtimeDue(const Inode& inode) const {
  if (atime_mode_ == AtimeMode::kNever) return false;
  if (atime_mode_ == AtimeMode::kEveryRead) return true;
  // relatime, as the mount reports it (the kernel leaves atime of FUSE inodes to the daemon):
  // a read moves atime when it is not newer than mtime or ctime, or is a day old.
  auto not_after = [](const Time& a, const Time& b) {
    return a.sec < b.sec || (a.sec == b.sec && a.nsec <= b.nsec);
  };
  constexpr int64_t kDay = 24 * 60 * 60;
  if (not_after(inode.atime, inode.mtime) || not_after(inode.atime, inode.ctime)) return true;
  // Every read asks this: the coarse clock (a vDSO read of the last tick, no clock source
  // access) is exact enough for a day.
  timespec now;
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  return now.tv_sec - inode.atime.sec >= kDay;
}

void FileSystem::UpdateAtime(const Inode& inode) {
  // Most reads change nothing. The change stays in memory until the next write-back: it runs on
  // the completion of a miss, where a metadata write would hold up the disk's other completions.
  if (!AtimeDue(inode)) return;
  PerfSection metadata(Subsystem::kMetadata);
  (void)meta_->RecordAccess(inode.ino, Time::Now());
}

Result<size_t> FileSystem::Write(const Caller& caller, Ino ino, uint64_t offset, const char* data,
                                 size_t length) {
  if (offset + length < offset || offset + length > uint64_t{INT64_MAX}) {
    return Status::FromErrno(EFBIG, "write past the largest file size");
  }
  std::shared_ptr<InodeState> state = inodes_.State(ino);
  // One atomic load for every file without set-id bits; the bits go before the data lands.
  if (state->may_have_setid.load(std::memory_order_acquire)) {
    TIPFS_RETURN_IF_ERROR(DropSetIdBeforeWrite(caller, ino, state.get()));
  }
  Status written;
  {
    NoticedSharedLock io_lock(&state->io_mutex);
    written = DataError(cache_->Write(ino, offset, data, length));
    if (written.ok()) {
      PerfSection metadata(Subsystem::kMetadata);
      Result<Inode> inode = meta_->RecordWrite(ino, offset + length, Time::Now());
      if (!inode.ok()) return inode.status();
      return length;
    }
  }
  // A write that failed on one disk may have landed on the others. Past the recorded end of the
  // file those bytes would show inside the hole a later write further out leaves: cut every
  // object back to the recorded size (exclusively, so no write in flight is cut).
  NoticedExclusiveLock io_lock(&state->io_mutex);
  Result<Inode> inode = meta_->Get(ino);
  if (inode.ok() && offset + length > inode->size) {
    (void)cache_->Truncate(ino, offset + length, inode->size);
  }
  return written;
}

Status FileSystem::Fsync(Ino ino, bool data_only) {
  TIPFS_RETURN_IF_ERROR(DataError(cache_->Sync(ino)));
  // The size and times that make the data reachable are metadata; fdatasync needs them too
  // whenever the size changed, so both forms sync the log.
  (void)data_only;
  return meta_->Sync();
}

Status FileSystem::Release(Ino ino) {
  if (inodes_.Close(ino) > 0) return Status::OK();
  // The last close writes back the size and times its writes left in memory (meta/inode_cache.h).
  TIPFS_RETURN_IF_ERROR(meta_->WriteBack());
  Result<Inode> inode = meta_->Get(ino);
  if (!inode.ok()) return inode.error() == ENOENT ? Status::OK() : inode.status();
  return ReclaimIfUnused(*inode);
}

bool FileSystem::UnlinkWouldSync(Ino parent, std::string_view name) {
  Result<Inode> inode = meta_->Lookup(parent, name);
  return inode.ok() && inode->nlink == 1 && SyncsBeforeFreeing(*inode) &&
         inodes_.UseOf(inode->ino).opens == 0;
}

bool FileSystem::ReleaseWouldSync(Ino ino) {
  if (inodes_.UseOf(ino).opens > 1) return false;
  Result<Inode> inode = meta_->Get(ino);
  return inode.ok() && inode->nlink == 0 && SyncsBeforeFreeing(*inode);
}

bool FileSystem::SyncsBeforeFreeing(const Inode& inode) {
  return S_ISREG(inode.mode) && inode.size > 0;
}

Status FileSystem::ReclaimIfUnused(const Inode& inode) {
  if (inode.nlink > 0) return Status::OK();
  return Reclaim(inode.ino);
}

Status FileSystem::Reclaim(Ino ino, bool sync_unlink_first, std::shared_ptr<InodeState> state) {
  if (state == nullptr) state = inodes_.State(ino);
  NoticedExclusiveLock io_lock(&state->io_mutex);
  InodeTable::Use use = inodes_.UseOf(ino);
  if (use.opens > 0) return Status::OK();  // the last Release reclaims it
  if (state->data_removed.load(std::memory_order_relaxed)) {
    // The unlink (or the last close) removed the data already and nothing opened the inode
    // since: the forget that follows only deletes the record.
    if (use.lookups > 0) return Status::OK();
    return meta_->DeleteInode(ino);
  }
  if (sync_unlink_first) {
    // The unlink (or the rename that replaced the file) must be durable before the data goes:
    // a power loss that undid it would bring the file back with its bytes gone (the rename-over
    // idiom would leave a zeroed file where the old one was). Empty files have nothing to lose.
    Result<Inode> inode = meta_->Get(ino);
    if (inode.ok() && SyncsBeforeFreeing(*inode)) TIPFS_RETURN_IF_ERROR(meta_->Sync());
  }
  // The space goes at the last close; the record stays while the kernel still refers to the
  // inode (an unlinked file's fstat, a removed directory that is a cwd) and goes at its forget.
  TIPFS_RETURN_IF_ERROR(cache_->Remove(ino));
  if (use.lookups > 0) {
    state->data_removed.store(true, std::memory_order_relaxed);
    return Status::OK();
  }
  return meta_->DeleteInode(ino);
}

Result<std::vector<meta::DirEntry>> FileSystem::ListDir(Ino ino) {
  PerfSection metadata(Subsystem::kMetadata);
  return meta_->ListDir(ino);
}

Result<std::string> FileSystem::GetXattr(Ino ino, std::string_view name) {
  PerfSection metadata(Subsystem::kMetadata);
  return meta_->GetXattr(ino, name);
}

Status FileSystem::SetXattr(Ino ino, std::string_view name, std::string_view value, int flags) {
  PerfSection metadata(Subsystem::kMetadata);
  return meta_->SetXattr(ino, name, value, flags, Time::Now());
}

Result<std::vector<std::string>> FileSystem::ListXattrs(Ino ino) {
  PerfSection metadata(Subsystem::kMetadata);
  return meta_->ListXattrs(ino);
}

Status FileSystem::RemoveXattr(Ino ino, std::string_view name) {
  PerfSection metadata(Subsystem::kMetadata);
  return meta_->RemoveXattr(ino, name, Time::Now());
}

Status FileSystem::SyncAll() {
  PerfSection metadata(Subsystem::kMetadata);
  return meta_->Sync();
}

}  // namespace tipfs::fusefs
