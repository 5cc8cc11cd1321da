// MetaStore namespace operations: Lookup, MakeNode, Link, Unlink, Rmdir, Rename.
//
// Errnos and their order follow Linux's VFS (fs/namei.c: filename_create, do_unlinkat,
// do_rmdir, do_renameat2, vfs_rename) over ext4, checked against ext4 on the development
// machine: e.g. rename("a/b/f", "a/b") is ENOTEMPTY (the target is an ancestor of the source),
// unlink(".") is EISDIR, rmdir("..") is ENOTEMPTY, rename of "." is EBUSY.
#include <rocksdb/snapshot.h>
#include <stdio.h>  // RENAME_NOREPLACE, RENAME_EXCHANGE
#include <sys/stat.h>

#include <climits>
#include <functional>
#include <mutex>

#include "meta/meta_store.h"
#include "meta/meta_store_impl.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

namespace tipfs::meta {
namespace {

// ext4's EXT4_LINK_MAX: more hard links to one file fail with EMLINK.
constexpr uint32_t kMaxHardLinks = 65000;
// Directories count their subdirectories in nlink; stop before the 32-bit counter wraps.
constexpr uint32_t kMaxDirectoryLinks = UINT32_MAX - 1;

bool IsDotName(std::string_view name) { return name == "." || name == ".."; }

std::string Quote(std::string_view name) { return "\"" + std::string(name) + "\""; }

// Checks a name an operation creates or removes. Linux refuses "." and ".." with an errno that
// depends on the call (`dot_errno` for ".", `dotdot_errno` for "..").
Status CheckName(std::string_view name, int dot_errno, int dotdot_errno) {
  if (name.size() > kMaxNameLength) {
    return Status::FromErrno(ENAMETOOLONG, "name of " + std::to_string(name.size()) +
                                               " bytes (at most " + std::to_string(kMaxNameLength) +
                                               ")");
  }
  if (name.empty()) return Status::NotFound("empty name");
  if (name == ".") return Status::FromErrno(dot_errno, "invalid name \".\"");
  if (name == "..") return Status::FromErrno(dotdot_errno, "invalid name \"..\"");
  if (name.find('/') != std::string_view::npos || name.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument("name " + Quote(name) + " contains '/' or NUL");
  }
  return Status::OK();
}

// A directory that was removed (nlink 0) but is still open accepts no new entries (ENOENT, as
// Linux gives for creating in a deleted directory).
Status CheckLiveDirectory(const Inode& dir) {
  if (dir.nlink == 0) {
    return Status::NotFound("directory " + std::to_string(dir.ino) + " has been removed");
  }
  return Status::OK();
}

}  // namespace

size_t AbsentNames::SlotOf(Ino parent, std::string_view name) {
  return (std::hash<std::string_view>()(name) ^ (parent * 0x9e3779b97f4a7c15ULL)) % kSlots;
}

void AbsentNames::Note(Ino parent, std::string_view name, uint64_t generation) {
  MutexLock lock(&mu_);
  Slot& slot = slots_[SlotOf(parent, name)];
  slot.parent = parent;
  slot.name.assign(name);
  slot.generation = generation;
}

bool AbsentNames::Take(Ino parent, std::string_view name, uint64_t generation) {
  MutexLock lock(&mu_);
  Slot& slot = slots_[SlotOf(parent, name)];
  if (slot.parent != parent || slot.name != name) return false;
  slot.parent = 0;
  return slot.generation == generation;
}

Result<Inode> MetaStore::Lookup(Ino parent, std::string_view name) {
  if (name.size() > kMaxNameLength) return CheckName(name, 0, 0);
  if (name == ".") return impl_->ReadDirectory(parent);
  if (name == "..") {
    auto dir = impl_->ReadDirectory(parent);
    if (!dir.ok()) return dir;
    return impl_->ReadInode(dir->parent);
  }
  if (name.empty()) return NoEntry(parent, name);
  // Read before the entry: a commit that adds the name after it moves the generation.
  const uint64_t generation = impl_->inodes->Generation(parent);
  // Fast path: the entry, then its inode (entries exist only in directories, so a found entry
  // also proves the parent is one).
  auto entry = impl_->ReadEntry(parent, name);
  if (!entry.ok()) return entry.status();
  if (entry->has_value()) {
    auto inode = impl_->ReadInode((*entry)->ino);
    if (inode.ok() && (inode->mode & S_IFMT) == (*entry)->type) return inode;
    if (!inode.ok() && inode.error() != ENOENT) return inode;
    // The inode vanished or looks wrong: either the entry was removed (and the inode deleted)
    // between the two reads, or the store is damaged. One snapshot tells which.
    rocksdb::ManagedSnapshot snapshot(impl_->db.get());
    entry = impl_->ReadEntry(parent, name, snapshot.snapshot());
    if (!entry.ok()) return entry.status();
    if (entry->has_value()) {
      inode = impl_->ReadInode((*entry)->ino, snapshot.snapshot());
      if (inode.error() == ENOENT || (inode.ok() && (inode->mode & S_IFMT) != (*entry)->type)) {
        return Status::Corruption("metadata entry " +
                                  encoding::DescribeKey(encoding::DirEntryKey(parent, name)) +
                                  " points to inode " + std::to_string((*entry)->ino) +
                                  (inode.ok() ? " of another type" : ", which does not exist"));
      }
      return inode;
    }
  }
  // No entry: ENOENT, unless the parent is missing or not a directory.
  auto dir = impl_->ReadDirectory(parent);
  if (!dir.ok()) return dir.status();
  if (name.size() <= kMaxNameLength) impl_->absent_names.Note(parent, name, generation);
  return NoEntry(parent, name);
}

Result<Inode> MetaStore::MakeNode(Ino parent, std::string_view name, const NewNode& node) {
  TIPFS_RETURN_IF_ERROR(CheckName(name, EEXIST, EEXIST));
  const uint32_t type = node.mode & S_IFMT;
  if (!encoding::IsValidFileType(type)) {
    return Status::InvalidArgument("mknod " + Quote(name) + ": invalid file type in mode " +
                                   std::to_string(node.mode));
  }
  if (type == S_IFLNK) {
    if (node.symlink_target.empty()) return Status::NotFound("symlink with an empty target");
    if (node.symlink_target.size() >= PATH_MAX) {
      return Status::FromErrno(
          ENAMETOOLONG,
          "symlink target of " + std::to_string(node.symlink_target.size()) + " bytes");
    }
  }
  Mutation m(impl_.get());
  auto dir = m.LoadDirectory(parent);
  if (!dir.ok()) return dir.status();
  TIPFS_RETURN_IF_ERROR(CheckLiveDirectory(**dir));
  // The kernel's lookup of the name just found it absent, and no commit since could have added it
  // (this mutation holds the store's mutex, so none is under way either).
  if (!impl_->absent_names.Take(parent, name, impl_->inodes->Generation(parent))) {
    auto existing = impl_->ReadEntry(parent, name);
    if (!existing.ok()) return existing.status();
    if (existing->has_value()) {
      return Status::Exists(Quote(name) + " exists in directory " + std::to_string(parent));
    }
  }
  const bool is_dir = type == S_IFDIR;
  if (is_dir && (*dir)->nlink >= kMaxDirectoryLinks) {
    return Status::FromErrno(
        EMLINK, "directory " + std::to_string(parent) + " has too many subdirectories");
  }
  Inode* inode = m.Allocate();
  inode->mode = node.mode;
  inode->uid = node.uid;
  inode->gid = node.gid;
  inode->rdev = node.rdev;
  inode->nlink = is_dir ? 2 : 1;
  inode->size = type == S_IFLNK ? node.symlink_target.size() : 0;
  inode->parent = is_dir ? parent : 0;
  inode->atime = inode->mtime = inode->ctime = node.now;
  m.PutEntry(parent, name, *inode);
  if (type == S_IFLNK) {
    m.Put(encoding::SymlinkKey(inode->ino), encoding::EncodeBlob(node.symlink_target));
  }
  TouchDirectory(*dir, node.now);
  if (is_dir) ++(*dir)->nlink;
  Inode result = *inode;
  TIPFS_RETURN_IF_ERROR(m.Commit());
  return result;
}

Result<Inode> MetaStore::Link(Ino ino, Ino new_parent, std::string_view new_name, Time now) {
  TIPFS_RETURN_IF_ERROR(CheckName(new_name, EEXIST, EEXIST));
  Mutation m(impl_.get());
  auto inode = m.Load(ino);
  if (!inode.ok()) return inode.status();
  auto dir = m.LoadDirectory(new_parent);
  if (!dir.ok()) return dir.status();
  TIPFS_RETURN_IF_ERROR(CheckLiveDirectory(**dir));
  auto existing = impl_->ReadEntry(new_parent, new_name);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) {
    return Status::Exists(Quote(new_name) + " exists in directory " + std::to_string(new_parent));
  }
  if (S_ISDIR((*inode)->mode)) {
    return Status::FromErrno(EPERM, "link: inode " + std::to_string(ino) + " is a directory");
  }
  if ((*inode)->nlink == 0) {
    return Status::NotFound("link: inode " + std::to_string(ino) + " has been unlinked");
  }
  if ((*inode)->nlink >= kMaxHardLinks) {
    return Status::FromErrno(EMLINK, "link: inode " + std::to_string(ino) + " has " +
                                         std::to_string((*inode)->nlink) + " links");
  }
  ++(*inode)->nlink;
  (*inode)->ctime = now;
  m.PutEntry(new_parent, new_name, **inode);
  TouchDirectory(*dir, now);
  Inode result = **inode;
  TIPFS_RETURN_IF_ERROR(m.Commit());
  return result;
}

Result<Inode> MetaStore::Unlink(Ino parent, std::string_view name, Time now) {
  TIPFS_RETURN_IF_ERROR(CheckName(name, EISDIR, EISDIR));
  Mutation m(impl_.get());
  auto named = m.LoadNamedChild(parent, name);
  if (!named.ok()) return named.status();
  auto [dir, inode] = *named;
  if (S_ISDIR(inode->mode)) {
    return Status::FromErrno(EISDIR, "unlink: " + Quote(name) + " is a directory");
  }
  m.DeleteEntry(parent, name);
  m.DropLink(inode, now);
  TouchDirectory(dir, now);
  Inode result = *inode;
  TIPFS_RETURN_IF_ERROR(m.Commit());
  return result;
}

Result<Inode> MetaStore::Rmdir(Ino parent, std::string_view name, Time now) {
  TIPFS_RETURN_IF_ERROR(CheckName(name, EINVAL, ENOTEMPTY));
  Mutation m(impl_.get());
  auto named = m.LoadNamedChild(parent, name);
  if (!named.ok()) return named.status();
  auto [dir, child] = *named;
  if (!S_ISDIR(child->mode)) {
    return Status::FromErrno(ENOTDIR, "rmdir: " + Quote(name) + " is not a directory");
  }
  auto has_entries = impl_->HasKeyWithPrefix(encoding::DirEntryPrefix(child->ino));
  if (!has_entries.ok()) return has_entries.status();
  if (*has_entries) {
    return Status::FromErrno(ENOTEMPTY, "rmdir: directory " + Quote(name) + " is not empty");
  }
  m.DeleteEntry(parent, name);
  m.DropLink(child, now);
  --dir->nlink;
  TouchDirectory(dir, now);
  Inode result = *child;
  TIPFS_RETURN_IF_ERROR(m.Commit());
  return result;
}

Result<std::optional<Inode>> MetaStore::Rename(Ino parent, std::string_view name, Ino new_parent,
                                               std::string_view new_name, unsigned flags,
                                               Time now) {
  if ((flags & ~unsigned{RENAME_NOREPLACE | RENAME_EXCHANGE}) != 0 ||
      flags == (RENAME_NOREPLACE | RENAME_EXCHANGE)) {
    return Status::InvalidArgument("rename: invalid flags " + std::to_string(flags));
  }
  const bool exchange = (flags & RENAME_EXCHANGE) != 0;
  const bool noreplace = (flags & RENAME_NOREPLACE) != 0;
  // Names first, as the path walk does; "." and ".." are EBUSY on either side (a NOREPLACE
  // rename onto them: EEXIST).
  for (std::string_view n : {name, new_name}) {
    if (n.size() > kMaxNameLength) return CheckName(n, 0, 0);
  }
  if (IsDotName(name)) return Status::Busy("rename: cannot rename " + Quote(name));
  if (IsDotName(new_name)) {
    if (noreplace) return Status::Exists("rename: target " + Quote(new_name) + " exists");
    return Status::Busy("rename: cannot rename onto " + Quote(new_name));
  }
  TIPFS_RETURN_IF_ERROR(CheckName(name, EBUSY, EBUSY));
  TIPFS_RETURN_IF_ERROR(CheckName(new_name, EBUSY, EBUSY));

  Mutation m(impl_.get());
  auto old_dir = m.LoadDirectory(parent);
  if (!old_dir.ok()) return old_dir.status();
  auto new_dir = m.LoadDirectory(new_parent);
  if (!new_dir.ok()) return new_dir.status();
  auto named_source = m.LoadNamedChild(parent, name);
  if (!named_source.ok()) return named_source.status();
  Inode* source = named_source->child;
  TIPFS_RETURN_IF_ERROR(CheckLiveDirectory(**new_dir));
  auto target_entry = impl_->ReadEntry(new_parent, new_name);
  if (!target_entry.ok()) return target_entry.status();
  const bool has_target = target_entry->has_value();
  if (exchange && !has_target) return NoEntry(new_parent, new_name);
  if (noreplace && has_target) {
    return Status::Exists("rename: target " + Quote(new_name) + " exists");
  }

  Inode* target = nullptr;
  if (has_target) {
    auto target_loaded = m.LoadChild(new_parent, **target_entry);
    if (!target_loaded.ok()) return target_loaded.status();
    target = *target_loaded;
  }
  const bool source_is_dir = S_ISDIR(source->mode);
  const bool target_is_dir = target != nullptr && S_ISDIR(target->mode);

  // A directory may not move below itself (Linux: the source is the lock_rename "trap").
  if (source_is_dir && parent != new_parent) {
    auto inside = m.IsAncestorOrSelf(source->ino, new_parent);
    if (!inside.ok()) return inside.status();
    if (*inside) {
      return Status::InvalidArgument("rename: cannot move directory " + Quote(name) +
                                     " into its own subtree");
    }
  }
  // The target may not be an ancestor of the source: rename(2) says ENOTEMPTY (it contains
  // the source), RENAME_EXCHANGE says EINVAL.
  if (target_is_dir && parent != new_parent) {
    auto above = m.IsAncestorOrSelf(target->ino, parent);
    if (!above.ok()) return above.status();
    if (*above) {
      return Status::FromErrno(exchange ? EINVAL : ENOTEMPTY,
                               "rename: target " + Quote(new_name) + " contains the source");
    }
  }
  // Two names of one inode: rename(2) does nothing and succeeds.
  if (target != nullptr && target->ino == source->ino) return std::optional<Inode>();

  if (!exchange && target != nullptr) {
    if (source_is_dir && !target_is_dir) {
      return Status::FromErrno(ENOTDIR,
                               "rename: target " + Quote(new_name) + " is not a directory");
    }
    if (!source_is_dir && target_is_dir) {
      return Status::FromErrno(EISDIR, "rename: target " + Quote(new_name) + " is a directory");
    }
    if (target_is_dir) {
      auto has_entries = impl_->HasKeyWithPrefix(encoding::DirEntryPrefix(target->ino));
      if (!has_entries.ok()) return has_entries.status();
      if (*has_entries) {
        return Status::FromErrno(ENOTEMPTY,
                                 "rename: target directory " + Quote(new_name) + " is not empty");
      }
    }
  }
  // Moving a directory to another parent moves one ".." link with it.
  auto move_directory = [&](Inode* dir, Inode* from, Inode* to) {
    if (from->ino == to->ino) return;
    dir->parent = to->ino;
    --from->nlink;
    ++to->nlink;
  };

  std::optional<Inode> replaced;
  if (exchange) {
    m.PutEntry(parent, name, *target);
    m.PutEntry(new_parent, new_name, *source);
    if (source_is_dir) move_directory(source, *old_dir, *new_dir);
    if (target_is_dir) move_directory(target, *new_dir, *old_dir);
    target->ctime = now;
  } else {
    if (source_is_dir && !target_is_dir && parent != new_parent &&
        (*new_dir)->nlink >= kMaxDirectoryLinks) {
      return Status::FromErrno(EMLINK, "rename: directory " + std::to_string(new_parent) +
                                           " has too many subdirectories");
    }
    m.DeleteEntry(parent, name);
    m.PutEntry(new_parent, new_name, *source);
    if (source_is_dir) move_directory(source, *old_dir, *new_dir);
    if (target != nullptr) {
      m.DropLink(target, now);
      if (target_is_dir) --(*new_dir)->nlink;  // its ".." no longer points at new_dir
    }
  }
  source->ctime = now;
  TouchDirectory(*old_dir, now);
  TouchDirectory(*new_dir, now);
  if (!exchange && target != nullptr) replaced = *target;
  TIPFS_RETURN_IF_ERROR(m.Commit());
  return replaced;
}

}  // namespace tipfs::meta
