// MetaStore::Scan and MetaStore::ApplyRepair: whole-store reading and raw repairs for fsck and
// crash recovery. They stand apart from the namespace operations because they check nothing:
// Scan reports what is there (damaged records included), ApplyRepair writes what fsck decided.
#include <rocksdb/iterator.h>
#include <rocksdb/write_batch.h>

#include <memory>

#include "meta/meta_store.h"
#include "meta/meta_store_impl.h"

namespace tipfs::meta {

namespace {

constexpr size_t kInoKeyLength = 9;  // tag + big-endian inode number

Status UnknownKey(std::string_view key, const std::string& what) {
  return Status::Corruption("metadata record " + encoding::DescribeKey(key) +
                            " is damaged: " + what);
}

}  // namespace

Result<StoreScan> MetaStore::Scan() {
  TIPFS_RETURN_IF_ERROR(impl_->WriteBack());  // the records must say what the cache knows
  StoreScan scan;
  // One iterator is one implicit snapshot: every record below comes from the same state.
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions()));
  auto damaged = [&](std::string_view key, Status problem) {
    scan.damaged.push_back(DamagedRecord{std::string(key), std::move(problem)});
  };
  bool have_superblock = false;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    const std::string_view value(it->value().data(), it->value().size());
    const char tag = key.empty() ? '\0' : key[0];
    if (tag == encoding::kSuperblockTag && key.size() == 1) {
      auto sb = encoding::DecodeSuperblock(value);
      if (!sb.ok()) {
        damaged(key, sb.status());
        continue;
      }
      have_superblock = true;
      scan.volume_uuid = sb->volume_uuid;
      scan.next_ino = sb->next_ino;
      scan.inode_count = sb->inode_count;
      continue;
    }
    const bool keyed_by_ino = tag == encoding::kInodeTag || tag == encoding::kDirEntryTag ||
                              tag == encoding::kSymlinkTag || tag == encoding::kXattrTag ||
                              tag == encoding::kOrphanTag;
    if (!keyed_by_ino || key.size() < kInoKeyLength) {
      damaged(key, UnknownKey(key, "unknown key of " + std::to_string(key.size()) + " bytes"));
      continue;
    }
    const Ino ino = encoding::KeyIno(key);
    const std::string_view rest = key.substr(kInoKeyLength);
    switch (tag) {
      case encoding::kInodeTag: {
        if (!rest.empty()) {
          damaged(key, UnknownKey(key, "inode key with a name"));
          break;
        }
        auto inode = encoding::DecodeInode(key, ino, value);
        if (inode.ok()) {
          scan.inodes.push_back(*inode);
        } else {
          damaged(key, inode.status());
        }
        break;
      }
      case encoding::kDirEntryTag: {
        auto entry = encoding::DecodeDirEntry(key, rest, value);
        if (rest.empty() || rest.size() > kMaxNameLength || rest.find('/') != rest.npos ||
            rest.find('\0') != rest.npos || rest == "." || rest == "..") {
          damaged(key, UnknownKey(key, "invalid entry name"));
        } else if (entry.ok()) {
          scan.entries.push_back(EntryRecord{ino, std::move(*entry)});
        } else {
          damaged(key, entry.status());
        }
        break;
      }
      case encoding::kSymlinkTag:
      case encoding::kOrphanTag: {
        auto blob = encoding::DecodeBlob(key, value);
        if (!rest.empty()) {
          damaged(key, UnknownKey(key, "key with a name"));
        } else if (!blob.ok()) {
          damaged(key, blob.status());
        } else if (tag == encoding::kSymlinkTag) {
          scan.symlink_targets.push_back(ino);
        } else {
          scan.orphans.push_back(ino);
        }
        break;
      }
      default: {  // xattr
        auto blob = encoding::DecodeBlob(key, value);
        if (!blob.ok()) {
          damaged(key, blob.status());
        } else if (scan.xattr_owners.empty() || scan.xattr_owners.back() != ino) {
          scan.xattr_owners.push_back(ino);
        }
        break;
      }
    }
  }
  if (!it->status().ok()) return impl_->FromRocks(it->status(), "scan");
  if (!have_superblock) {
    return Status::Corruption("metadata store " + impl_->path + " is damaged: superblock missing");
  }
  return scan;
}

Status MetaStore::ApplyRepair(const RepairBatch& repair) {
  if (repair.empty()) return Status::OK();
  TIPFS_RETURN_IF_ERROR(impl_->WriteBack());
  MutexLock lock(&impl_->mu);
  // The repair rewrites records behind the inode cache's back.
  struct DropCachedInodes {
    InodeCache* cache;
    ~DropCachedInodes() { cache->DropClean(); }
  } drop{impl_->inodes.get()};
  rocksdb::WriteBatch batch;
  for (const std::string& key : repair.delete_raw_keys) (void)batch.Delete(key);
  for (Ino ino : repair.delete_inodes) {
    (void)batch.Delete(encoding::InodeKey(ino));
    (void)batch.Delete(encoding::SymlinkKey(ino));
    (void)batch.Delete(encoding::OrphanKey(ino));
    const std::string prefix = encoding::XattrPrefix(ino);
    const std::string end = encoding::PrefixEnd(prefix);
    (void)batch.DeleteRange(prefix, end);
  }
  for (const auto& [parent, name] : repair.delete_entries) {
    (void)batch.Delete(encoding::DirEntryKey(parent, name));
  }
  for (Ino ino : repair.clear_orphans) (void)batch.Delete(encoding::OrphanKey(ino));
  for (const Inode& inode : repair.put_inodes) {
    (void)batch.Put(encoding::InodeKey(inode.ino), encoding::EncodeInode(inode));
  }
  for (const EntryRecord& record : repair.put_entries) {
    (void)batch.Put(encoding::DirEntryKey(record.parent, record.entry.name),
                    encoding::EncodeDirEntry(record.entry.ino, record.entry.type));
  }
  for (Ino ino : repair.set_orphans) {
    (void)batch.Put(encoding::OrphanKey(ino), encoding::EncodeBlob(""));
  }
  encoding::Superblock superblock = impl_->superblock;
  if (repair.next_ino) superblock.next_ino = *repair.next_ino;
  if (repair.inode_count) superblock.inode_count = *repair.inode_count;
  if (repair.next_ino || repair.inode_count) {
    (void)batch.Put(encoding::SuperblockKey(), encoding::EncodeSuperblock(superblock));
  }
  rocksdb::WriteOptions sync_write;
  sync_write.sync = true;  // fsck reports a repair only once it is durable
  rocksdb::Status s = impl_->db->Write(sync_write, &batch);
  if (!s.ok()) return impl_->FromRocks(s, "repair");
  impl_->superblock = superblock;
  impl_->inode_count.store(superblock.inode_count, std::memory_order_relaxed);
  return Status::OK();
}

}  // namespace tipfs::meta
