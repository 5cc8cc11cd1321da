// MetaStore: opening/creating the RocksDB store, the shared read helpers, the Mutation batch,
// attributes, xattrs and orphans. The namespace operations (MakeNode, Link, Unlink, Rmdir,
// Rename, Lookup) are in meta_namespace.cc.
#include "meta/meta_store.h"

#include <rocksdb/filter_policy.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/snapshot.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

#include "meta/meta_store_impl.h"

namespace tipfs::meta {

using encoding::DecodeBlob;
using encoding::DecodeInode;
using encoding::EncodeBlob;
using encoding::EncodeInode;

namespace {

// Linux limits for extended attributes (XATTR_NAME_MAX, XATTR_SIZE_MAX).
constexpr size_t kMaxXattrNameLength = 255;
constexpr size_t kMaxXattrValueSize = 64 * 1024;

rocksdb::Options MakeRocksOptions(const MetaStoreOptions& tuning,
                                  std::shared_ptr<rocksdb::Cache>* block_cache) {
  rocksdb::Options options;
  rocksdb::BlockBasedTableOptions table;
  *block_cache = rocksdb::NewLRUCache(tuning.block_cache_bytes);
  table.block_cache = *block_cache;
  // Most reads are point lookups (inode, one entry); a full-key bloom filter of 10 bits per key
  // (~1% false positives) keeps a negative lookup (create, EEXIST checks) off the table files.
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.whole_key_filtering = true;
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  options.memtable_whole_key_filtering = true;
  options.memtable_prefix_bloom_size_ratio = 0.02;
  options.write_buffer_size = tuning.write_buffer_bytes;
  options.max_write_buffer_number = 2;
  options.max_open_files = tuning.max_open_files;
  options.max_background_jobs = tuning.background_jobs;
  options.level_compaction_dynamic_level_bytes = true;
  // RocksDB's own LOG files: keep them small, they sit beside the data.
  options.keep_log_file_num = 3;
  options.max_log_file_size = 1 << 20;
  options.stats_dump_period_sec = 0;
  // After a crash the log's last record may be torn: recover up to it (point in time). After a
  // clean close the log is whole, so a damaged record is corruption (bit rot, a bad copy) and
  // the store is refused, instead of silently dropping every record after it.
  options.wal_recovery_mode = tuning.after_unclean_shutdown
                                  ? rocksdb::WALRecoveryMode::kPointInTimeRecovery
                                  : rocksdb::WALRecoveryMode::kAbsoluteConsistency;
  return options;
}

// A RocksDB LOCK conflict comes back as an IOError naming the LOCK file ("While lock file:
// <path>/LOCK: Resource temporarily unavailable" from another process, "lock hold by current
// process ... <path>/LOCK" from this one).
bool IsLockConflict(const rocksdb::Status& s) {
  return s.IsIOError() && s.ToString().find("/LOCK") != std::string::npos;
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Status CheckXattrName(std::string_view name) {
  if (name.empty() || name.size() > kMaxXattrNameLength) {
    return Status::FromErrno(ERANGE, "xattr name of " + std::to_string(name.size()) +
                                         " bytes (1.." + std::to_string(kMaxXattrNameLength) +
                                         " allowed)");
  }
  return Status::OK();
}

// True when another process holds RocksDB's lock on the store. DB::Open would find out too, but
// only after it has rotated the running daemon's LOG file: a refused mount must change nothing.
// The check reads /proc/locks instead of probing the LOCK file with fcntl, because opening and
// closing that file would drop every POSIX lock this process holds on it.
bool LockedByAnotherProcess(const std::string& path) {
  struct stat st;
  if (::stat((path + "/LOCK").c_str(), &st) != 0) return false;
  std::ifstream locks("/proc/locks");
  std::string line;
  const std::string self = std::to_string(::getpid());
  while (std::getline(locks, line)) {
    // "1: POSIX  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a "->" marks a blocked waiter).
    std::istringstream fields(line);
    std::string index, kind, mode, access, pid, device;
    fields >> index >> kind;
    if (kind == "->") fields >> kind;
    fields >> mode >> access >> pid >> device;
    unsigned major = 0, minor = 0;
    unsigned long long ino = 0;
    if (std::sscanf(device.c_str(), "%x:%x:%llu", &major, &minor, &ino) != 3) continue;
    if (ino == st.st_ino && major == ::major(st.st_dev) && minor == ::minor(st.st_dev) &&
        pid != self) {
      return true;
    }
  }
  return false;
}

Status OpenDb(const std::string& path, const rocksdb::Options& options,
              std::unique_ptr<rocksdb::DB>* db) {
  if (LockedByAnotherProcess(path)) {
    return Status::Busy("metadata store " + path + " is locked by a running mount");
  }
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, path, &raw);
  if (s.ok()) {
    db->reset(raw);
    return Status::OK();
  }
  if (IsLockConflict(s)) {
    return Status::Busy("metadata store " + path + " is locked by a running mount");
  }
  // A file the store's own records name (CURRENT -> MANIFEST -> tables) that is missing is
  // damage too: the directory and its CURRENT exist (Open checked).
  if (s.IsCorruption() || s.IsPathNotFound()) {
    return Status::Corruption("metadata store " + path + " is damaged: " + s.ToString());
  }
  if (s.IsInvalidArgument() && s.ToString().find("exists") != std::string::npos) {
    return Status::Exists("metadata store " + path + " already exists");
  }
  return Status::IOError("metadata store " + path + ": open: " + s.ToString());
}

}  // namespace

Time Time::Now() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return Time{ts.tv_sec, ts.tv_nsec};
}

// ---- StoreCore --------------------------------------------------------------------------------

StoreCore::~StoreCore() {
  if (write_back_thread.joinable()) {
    {
      MutexLock lock(&write_back_mu);
      stopping = true;
    }
    write_back_cv.Signal();
    write_back_thread.join();
  }
  if (db == nullptr) return;
  // A clean close makes everything durable; nobody is left to report a failure to, and Sync()
  // is how a caller that cares learns of one.
  if (inodes != nullptr) (void)WriteBack();
  (void)db->FlushWAL(/*sync=*/true);
  (void)db->Close();
}

void StoreCore::StartWriteBack(int64_t interval_ms) {
  if (interval_ms <= 0) return;
  write_back_thread = std::thread([this, interval_ms] {
    MutexLock lock(&write_back_mu);
    while (!stopping) {
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(interval_ms);
      while (!stopping && write_back_cv.WaitUntil(&write_back_mu, deadline)) {
      }
      if (stopping || inodes->dirty_count() == 0) continue;
      lock.Unlock();
      Status s = WriteBack();
      if (!s.ok()) {
        std::fprintf(stderr, "tipfs: write-back of attributes: %s\n", s.ToString().c_str());
      }
      lock.Lock();
    }
  });
}

Status StoreCore::WriteBack() {
  if (inodes->dirty_count() == 0) return Status::OK();
  Mutation m(this);
  return m.Commit();
}

Status StoreCore::FromRocks(const rocksdb::Status& s, std::string_view what) const {
  std::string message = "metadata store " + path + ": " + std::string(what) + ": " + s.ToString();
  if (s.IsCorruption()) return Status::Corruption(std::move(message));
  if (s.IsNoSpace()) return Status::NoSpace(std::move(message));
  return Status::IOError(std::move(message));
}

Result<std::optional<std::string>> StoreCore::GetRaw(const std::string& key,
                                                     const rocksdb::Snapshot* snapshot) {
  rocksdb::ReadOptions read_options;
  read_options.snapshot = snapshot;
  std::string value;
  point_reads.fetch_add(1, std::memory_order_relaxed);
  rocksdb::Status s = db->Get(read_options, key, &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return FromRocks(s, "read " + encoding::DescribeKey(key));
  return std::optional<std::string>(std::move(value));
}

Result<Inode> StoreCore::ReadInode(Ino ino, const rocksdb::Snapshot* snapshot) {
  if (snapshot != nullptr) {
    Result<Inode> inode = ReadStoredInode(ino, snapshot);
    if (inode.ok()) inodes->OverlayDirty(&*inode);
    return inode;
  }
  if (std::optional<InodeCache::Versioned> cached = inodes->Find(ino)) return cached->inode;
  const uint64_t generation = inodes->Generation(ino);
  Result<Inode> inode = ReadStoredInode(ino);
  if (inode.ok()) inodes->InsertIfUnchanged(*inode, generation);
  return inode;
}

Result<Inode> StoreCore::ReadStoredInode(Ino ino, const rocksdb::Snapshot* snapshot) {
  const std::string key = encoding::InodeKey(ino);
  auto raw = GetRaw(key, snapshot);
  if (!raw.ok()) return raw.status();
  if (!raw->has_value())
    return Status::NotFound("inode " + std::to_string(ino) + " does not exist");
  return DecodeInode(key, ino, **raw);
}

Result<Inode> StoreCore::ReadDirectory(Ino ino, const rocksdb::Snapshot* snapshot) {
  auto inode = ReadInode(ino, snapshot);
  if (inode.ok() && !S_ISDIR(inode->mode)) {
    return Status::FromErrno(ENOTDIR, "inode " + std::to_string(ino) + " is not a directory");
  }
  return inode;
}

Result<std::optional<DirEntry>> StoreCore::ReadEntry(Ino parent, std::string_view name,
                                                     const rocksdb::Snapshot* snapshot) {
  const std::string key = encoding::DirEntryKey(parent, name);
  auto raw = GetRaw(key, snapshot);
  if (!raw.ok()) return raw.status();
  if (!raw->has_value()) return std::optional<DirEntry>();
  auto entry = encoding::DecodeDirEntry(key, name, **raw);
  if (!entry.ok()) return entry.status();
  return std::optional<DirEntry>(std::move(*entry));
}

Status StoreCore::ScanPrefix(const std::string& prefix, const PrefixVisitor& visit) {
  const std::string end = encoding::PrefixEnd(prefix);
  rocksdb::Slice upper_bound(end);
  rocksdb::ReadOptions read_options;
  read_options.iterate_upper_bound = &upper_bound;
  scans.fetch_add(1, std::memory_order_relaxed);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(read_options));
  for (it->Seek(prefix); it->Valid(); it->Next()) {
    bool keep_going = true;
    TIPFS_RETURN_IF_ERROR(visit(std::string_view(it->key().data(), it->key().size()),
                                std::string_view(it->value().data(), it->value().size()),
                                &keep_going));
    if (!keep_going) return Status::OK();
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan " + encoding::DescribeKey(prefix));
  return Status::OK();
}

Result<bool> StoreCore::HasKey(const std::string& key) {
  auto raw = GetRaw(key);
  if (!raw.ok()) return raw.status();
  return raw->has_value();
}

Result<bool> StoreCore::HasKeyWithPrefix(const std::string& prefix) {
  bool found = false;
  TIPFS_RETURN_IF_ERROR(ScanPrefix(prefix, [&](std::string_view, std::string_view, bool* more) {
    found = true;
    *more = false;
    return Status::OK();
  }));
  return found;
}

// ---- Mutation ---------------------------------------------------------------------------------

Result<Inode*> Mutation::Load(Ino ino) {
  auto it = inodes_.find(ino);
  if (it != inodes_.end()) return &it->second.inode;
  if (std::optional<InodeCache::Versioned> cached = impl_->inodes->Find(ino)) {
    std::string original = EncodeInode(cached->inode);
    auto [pos, inserted] = inodes_.emplace(
        ino,
        Loaded{std::move(cached->inode), std::move(original), cached->version, cached->no_xattrs});
    return &pos->second.inode;
  }
  const std::string key = encoding::InodeKey(ino);
  auto raw = impl_->GetRaw(key);
  if (!raw.ok()) return raw.status();
  if (!raw->has_value())
    return Status::NotFound("inode " + std::to_string(ino) + " does not exist");
  auto inode = DecodeInode(key, ino, **raw);
  if (!inode.ok()) return inode.status();
  auto [pos, inserted] = inodes_.emplace(ino, Loaded{std::move(*inode), std::move(**raw)});
  return &pos->second.inode;
}

Result<Inode*> Mutation::LoadDirectory(Ino ino) {
  auto inode = Load(ino);
  if (inode.ok() && !S_ISDIR((*inode)->mode)) {
    return Status::FromErrno(ENOTDIR, "inode " + std::to_string(ino) + " is not a directory");
  }
  return inode;
}

Result<Inode*> Mutation::LoadChild(Ino parent, const DirEntry& entry) {
  auto child = Load(entry.ino);
  if (child.error() == ENOENT) {
    return Status::Corruption("metadata entry " +
                              encoding::DescribeKey(encoding::DirEntryKey(parent, entry.name)) +
                              " points to missing inode " + std::to_string(entry.ino));
  }
  if (child.ok() && ((*child)->mode & S_IFMT) != entry.type) {
    return Status::Corruption(
        "metadata entry " + encoding::DescribeKey(encoding::DirEntryKey(parent, entry.name)) +
        " has type " + std::to_string(entry.type) + " but inode " + std::to_string(entry.ino) +
        " has mode " + std::to_string((*child)->mode));
  }
  return child;
}

Result<Mutation::NamedChild> Mutation::LoadNamedChild(Ino parent, std::string_view name) {
  auto dir = LoadDirectory(parent);
  if (!dir.ok()) return dir.status();
  auto entry = impl_->ReadEntry(parent, name);
  if (!entry.ok()) return entry.status();
  if (!entry->has_value()) return NoEntry(parent, name);
  auto child = LoadChild(parent, **entry);
  if (!child.ok()) return child.status();
  return NamedChild{*dir, *child};
}

Inode* Mutation::Allocate() {
  Ino ino = superblock_.next_ino++;
  ++superblock_.inode_count;
  auto [pos, inserted] = inodes_.emplace(ino, Loaded{});
  pos->second.inode.ino = ino;
  pos->second.no_xattrs = true;  // numbers are never reused: nothing can be keyed by it yet
  return &pos->second.inode;
}

void Mutation::XattrAdded(Ino ino) {
  auto it = inodes_.find(ino);
  if (it != inodes_.end()) it->second.no_xattrs = false;
}

bool Mutation::KnownWithoutXattrs(Ino ino) const {
  auto it = inodes_.find(ino);
  return it != inodes_.end() && it->second.no_xattrs;
}

void Mutation::PutEntry(Ino parent, std::string_view name, const Inode& child) {
  Put(encoding::DirEntryKey(parent, name),
      encoding::EncodeDirEntry(child.ino, child.mode & S_IFMT));
}

void Mutation::DeleteEntry(Ino parent, std::string_view name) {
  Delete(encoding::DirEntryKey(parent, name));
}

void Mutation::DropLink(Inode* inode, Time now) {
  inode->ctime = now;
  if (S_ISDIR(inode->mode)) {
    inode->nlink = 0;  // its "." and its entry in the parent go together
  } else if (inode->nlink > 0) {
    --inode->nlink;
  }
  if (inode->nlink == 0) Put(encoding::OrphanKey(inode->ino), EncodeBlob(""));
}

void Mutation::DeleteInodeRecord(Ino ino) {
  inodes_.erase(ino);
  deleted_.push_back(ino);
  --superblock_.inode_count;
  Delete(encoding::InodeKey(ino));
}

Result<bool> Mutation::IsAncestorOrSelf(Ino ancestor, Ino dir) {
  // Every directory's parent chain ends at the root, so the walk is bounded by the tree depth;
  // the step limit only turns a damaged (cyclic) chain into an error instead of a hang.
  constexpr int kMaxSteps = 1 << 20;
  Ino current = dir;
  for (int step = 0; step < kMaxSteps; ++step) {
    if (current == ancestor) return true;
    if (current == kRootIno) return false;
    auto inode = Load(current);
    if (!inode.ok()) return inode.status();
    current = (*inode)->parent;
  }
  return Status::Corruption("metadata store " + impl_->path + ": directory " + std::to_string(dir) +
                            " has a cyclic parent chain");
}

Status Mutation::Commit() {
  impl_->mu.AssertHeld();  // held by this Mutation since its constructor
  rocksdb::WriteBatch batch;
  // Attributes that earlier writes changed go first: they happened before this mutation.
  std::vector<InodeCache::Versioned> dirty = impl_->inodes->CollectDirty();
  for (const InodeCache::Versioned& d : dirty) {
    if (std::find(deleted_.begin(), deleted_.end(), d.inode.ino) != deleted_.end()) continue;
    (void)batch.Put(encoding::InodeKey(d.inode.ino), EncodeInode(d.inode));
  }
  for (const auto& [key, value] : ops_) {
    if (value) {
      (void)batch.Put(key, *value);
    } else {
      (void)batch.Delete(key);
    }
  }
  std::vector<InodeCache::Versioned> committed;
  committed.reserve(inodes_.size());
  for (auto& [ino, loaded] : inodes_) {
    std::string encoded = EncodeInode(loaded.inode);
    if (encoded != loaded.original) (void)batch.Put(encoding::InodeKey(ino), encoded);
    committed.push_back(InodeCache::Versioned{loaded.inode, loaded.version, loaded.no_xattrs});
  }
  if (superblock_.next_ino != impl_->superblock.next_ino ||
      superblock_.inode_count != impl_->superblock.inode_count) {
    (void)batch.Put(encoding::SuperblockKey(), encoding::EncodeSuperblock(superblock_));
  }
  if (batch.Count() == 0) return Status::OK();
  impl_->batches.fetch_add(1, std::memory_order_relaxed);
  rocksdb::Status s = impl_->db->Write(impl_->write_options, &batch);
  if (!s.ok()) return impl_->FromRocks(s, "write");
  impl_->superblock = superblock_;
  impl_->inode_count.store(superblock_.inode_count, std::memory_order_relaxed);
  impl_->inodes->AfterCommit(dirty, committed, deleted_);
  return Status::OK();
}

// ---- Open / Create ----------------------------------------------------------------------------

MetaStore::MetaStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetaStore::~MetaStore() = default;

Result<std::unique_ptr<MetaStore>> MetaStore::Create(const std::string& path,
                                                     const std::string& volume_uuid, uint32_t uid,
                                                     uint32_t gid,
                                                     const MetaStoreOptions& options) {
  if (volume_uuid.empty())
    return Status::InvalidArgument("metadata store " + path + ": empty UUID");
  if (PathExists(path + "/CURRENT")) {
    return Status::Exists("metadata store " + path + " already exists");
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->after_sync = options.after_sync;
  impl->inodes = std::make_unique<InodeCache>(options.inode_cache_entries);
  rocksdb::Options rocks_options = MakeRocksOptions(options, &impl->block_cache);
  rocks_options.create_if_missing = true;
  rocks_options.error_if_exists = true;
  TIPFS_RETURN_IF_ERROR(OpenDb(path, rocks_options, &impl->db));

  MutexLock lock(&impl->mu);  // not shared yet; the lock only states what guards the superblock
  impl->superblock.volume_uuid = volume_uuid;
  impl->superblock.next_ino = kRootIno + 1;
  impl->superblock.inode_count = 1;
  Inode root;
  root.ino = kRootIno;
  root.mode = S_IFDIR | 0755;
  root.uid = uid;
  root.gid = gid;
  root.nlink = 2;
  root.parent = kRootIno;
  root.atime = root.mtime = root.ctime = Time::Now();
  rocksdb::WriteBatch batch;
  (void)batch.Put(encoding::SuperblockKey(), encoding::EncodeSuperblock(impl->superblock));
  (void)batch.Put(encoding::InodeKey(kRootIno), EncodeInode(root));
  rocksdb::WriteOptions sync_write;
  sync_write.sync = true;  // a new volume is durable before mkfs reports success
  rocksdb::Status s = impl->db->Write(sync_write, &batch);
  if (!s.ok()) return impl->FromRocks(s, "write superblock");
  impl->inode_count.store(1);
  impl->StartWriteBack(options.write_back_interval_ms);
  return std::unique_ptr<MetaStore>(new MetaStore(std::move(impl)));
}

Result<std::unique_ptr<MetaStore>> MetaStore::Open(const std::string& path,
                                                   const std::string& volume_uuid,
                                                   const MetaStoreOptions& options) {
  if (!PathExists(path)) return Status::NotFound("metadata store " + path + " does not exist");
  if (!PathExists(path + "/CURRENT")) {
    return Status::NotFound("no metadata store at " + path + " (no CURRENT file)");
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->after_sync = options.after_sync;
  impl->inodes = std::make_unique<InodeCache>(options.inode_cache_entries);
  rocksdb::Options rocks_options = MakeRocksOptions(options, &impl->block_cache);
  TIPFS_RETURN_IF_ERROR(OpenDb(path, rocks_options, &impl->db));

  auto damaged = [&](const std::string& what) {
    return Status::Corruption("metadata store " + path + " is damaged: " + what);
  };
  auto raw = impl->GetRaw(encoding::SuperblockKey());
  if (!raw.ok()) return raw.status();
  if (!raw->has_value()) return damaged("superblock missing");
  auto superblock = encoding::DecodeSuperblock(**raw);
  if (!superblock.ok()) return superblock.status().WithContext("metadata store " + path);
  if (superblock->format_version != encoding::kFormatVersion) {
    return damaged("format version " + std::to_string(superblock->format_version) +
                   " (this tipfs reads version " + std::to_string(encoding::kFormatVersion) + ")");
  }
  if (superblock->volume_uuid != volume_uuid) {
    return Status::InvalidArgument("metadata store " + path + " belongs to volume " +
                                   superblock->volume_uuid + ", not to volume " + volume_uuid);
  }
  auto root = impl->ReadInode(kRootIno);
  if (root.error() == ENOENT) return damaged("root directory missing");
  if (!root.ok()) return root.status().WithContext("metadata store " + path);
  if (!S_ISDIR(root->mode)) return damaged("root inode is not a directory");
  MutexLock lock(&impl->mu);  // not shared yet; the lock only states what guards the superblock
  impl->superblock = std::move(*superblock);
  impl->inode_count.store(impl->superblock.inode_count);
  impl->StartWriteBack(options.write_back_interval_ms);
  return std::unique_ptr<MetaStore>(new MetaStore(std::move(impl)));
}

// ---- Attributes -------------------------------------------------------------------------------

Result<Inode> MetaStore::Get(Ino ino) { return impl_->ReadInode(ino); }

Result<Inode> MetaStore::SetAttr(Ino ino, const AttrChange& change) {
  Mutation m(impl_.get());
  auto loaded = m.Load(ino);
  if (!loaded.ok()) return loaded.status();
  Inode* inode = *loaded;
  if (change.size) {
    if (S_ISDIR(inode->mode)) {
      return Status::FromErrno(EISDIR,
                               "truncate: inode " + std::to_string(ino) + " is a directory");
    }
    if (!S_ISREG(inode->mode)) {
      return Status::InvalidArgument("truncate: inode " + std::to_string(ino) +
                                     " is not a regular file");
    }
  }
  bool changed = false;
  if (change.mode) {
    inode->mode = (inode->mode & S_IFMT) | (*change.mode & 07777);
    changed = true;
  }
  if (change.uid) inode->uid = *change.uid, changed = true;
  if (change.gid) inode->gid = *change.gid, changed = true;
  if (change.size) inode->size = *change.size, inode->mtime = change.now, changed = true;
  if (change.atime) inode->atime = *change.atime, changed = true;
  if (change.mtime) inode->mtime = *change.mtime, changed = true;
  if (S_ISREG(inode->mode) && (change.clear_setid || change.clear_setgid)) {
    uint32_t mode = inode->mode;
    if (change.clear_setid) {
      mode &= ~uint32_t{S_ISUID};
      if (mode & S_IXGRP) mode &= ~uint32_t{S_ISGID};
    }
    if (change.clear_setgid) mode &= ~uint32_t{S_ISGID};
    if (mode != inode->mode) inode->mode = mode, changed = true;
  }
  if (changed) inode->ctime = change.now;
  Inode result = *inode;
  TIPFS_RETURN_IF_ERROR(m.Commit());
  return result;
}

template <typename Record>
Result<Inode> MetaStore::RecordInMemory(Ino ino, Record record) {
  // In memory only: the next batch, fsync, last close or the write-back timer writes it.
  Result<Inode> recorded = record(impl_->inodes.get());
  if (recorded.error() != ENOENT) return recorded;
  {
    // Not cached: load it while no mutation can commit, so the record cannot be stale.
    MutexLock lock(&impl_->mu);
    Result<Inode> stored = impl_->ReadStoredInode(ino);
    if (!stored.ok()) return stored.status();
    impl_->inodes->Insert(*stored);
  }
  return record(impl_->inodes.get());
}

Result<Inode> MetaStore::RecordWrite(Ino ino, uint64_t end, Time now) {
  return RecordInMemory(ino,
                        [&](InodeCache* inodes) { return inodes->RecordWrite(ino, end, now); });
}

Result<Inode> MetaStore::RecordAccess(Ino ino, Time now) {
  return RecordInMemory(ino, [&](InodeCache* inodes) { return inodes->RecordAccess(ino, now); });
}

Status MetaStore::WriteBack() { return impl_->WriteBack(); }

Result<std::string> MetaStore::ReadLink(Ino ino) {
  // One snapshot for the inode and its target: a concurrent DeleteInode removes both.
  rocksdb::ManagedSnapshot snapshot(impl_->db.get());
  auto inode = impl_->ReadInode(ino, snapshot.snapshot());
  if (!inode.ok()) return inode.status();
  if (!S_ISLNK(inode->mode)) {
    return Status::InvalidArgument("readlink: inode " + std::to_string(ino) + " is not a symlink");
  }
  const std::string key = encoding::SymlinkKey(ino);
  auto raw = impl_->GetRaw(key, snapshot.snapshot());
  if (!raw.ok()) return raw.status();
  if (!raw->has_value()) {
    return Status::Corruption("metadata record " + encoding::DescribeKey(key) +
                              " (symlink target) is missing");
  }
  return DecodeBlob(key, **raw);
}

Result<std::vector<DirEntry>> MetaStore::ListDir(Ino dir) {
  auto inode = impl_->ReadDirectory(dir);
  if (!inode.ok()) return inode.status();
  std::vector<DirEntry> entries;
  const std::string prefix = encoding::DirEntryPrefix(dir);
  TIPFS_RETURN_IF_ERROR(
      impl_->ScanPrefix(prefix, [&](std::string_view key, std::string_view value, bool*) {
        auto entry = encoding::DecodeDirEntry(key, key.substr(prefix.size()), value);
        if (!entry.ok()) return entry.status();
        entries.push_back(std::move(*entry));
        return Status::OK();
      }));
  return entries;
}

// ---- Extended attributes ----------------------------------------------------------------------

Result<std::string> MetaStore::GetXattr(Ino ino, std::string_view name) {
  TIPFS_RETURN_IF_ERROR(CheckXattrName(name));
  const std::string key = encoding::XattrKey(ino, name);
  auto raw = impl_->GetRaw(key);
  if (!raw.ok()) return raw.status();
  if (raw->has_value()) return DecodeBlob(key, **raw);
  auto inode = impl_->ReadInode(ino);  // ENOENT for a missing inode beats ENODATA
  if (!inode.ok()) return inode.status();
  return Status::FromErrno(ENODATA,
                           "inode " + std::to_string(ino) + " has no xattr " + std::string(name));
}

Status MetaStore::SetXattr(Ino ino, std::string_view name, std::string_view value, int flags,
                           Time now) {
  TIPFS_RETURN_IF_ERROR(CheckXattrName(name));
  if (value.size() > kMaxXattrValueSize) {
    return Status::FromErrno(E2BIG, "xattr value of " + std::to_string(value.size()) +
                                        " bytes (at most " + std::to_string(kMaxXattrValueSize) +
                                        ")");
  }
  if ((flags & ~(XATTR_CREATE | XATTR_REPLACE)) != 0 || flags == (XATTR_CREATE | XATTR_REPLACE)) {
    return Status::InvalidArgument("setxattr: invalid flags " + std::to_string(flags));
  }
  Mutation m(impl_.get());
  auto inode = m.Load(ino);
  if (!inode.ok()) return inode.status();
  const std::string key = encoding::XattrKey(ino, name);
  auto exists = impl_->HasKey(key);
  if (!exists.ok()) return exists.status();
  if ((flags & XATTR_CREATE) && *exists) {
    return Status::Exists("xattr " + std::string(name) + " exists on inode " + std::to_string(ino));
  }
  if ((flags & XATTR_REPLACE) && !*exists) {
    return Status::FromErrno(ENODATA,
                             "inode " + std::to_string(ino) + " has no xattr " + std::string(name));
  }
  m.Put(key, EncodeBlob(value));
  m.XattrAdded(ino);
  (*inode)->ctime = now;
  return m.Commit();
}

Result<std::vector<std::string>> MetaStore::ListXattrs(Ino ino) {
  auto inode = impl_->ReadInode(ino);
  if (!inode.ok()) return inode.status();
  std::vector<std::string> names;
  const std::string prefix = encoding::XattrPrefix(ino);
  TIPFS_RETURN_IF_ERROR(
      impl_->ScanPrefix(prefix, [&](std::string_view key, std::string_view, bool*) {
        names.emplace_back(key.substr(prefix.size()));
        return Status::OK();
      }));
  return names;
}

Status MetaStore::RemoveXattr(Ino ino, std::string_view name, Time now) {
  TIPFS_RETURN_IF_ERROR(CheckXattrName(name));
  Mutation m(impl_.get());
  auto inode = m.Load(ino);
  if (!inode.ok()) return inode.status();
  const std::string key = encoding::XattrKey(ino, name);
  auto exists = impl_->HasKey(key);
  if (!exists.ok()) return exists.status();
  if (!*exists) {
    return Status::FromErrno(ENODATA,
                             "inode " + std::to_string(ino) + " has no xattr " + std::string(name));
  }
  m.Delete(key);
  (*inode)->ctime = now;
  return m.Commit();
}

// ---- Orphans, counts, durability --------------------------------------------------------------

Result<std::vector<Ino>> MetaStore::ListOrphans() {
  std::vector<Ino> orphans;
  TIPFS_RETURN_IF_ERROR(impl_->ScanPrefix(
      std::string(1, encoding::kOrphanTag), [&](std::string_view key, std::string_view, bool*) {
        if (key.size() != 9) {
          return Status::Corruption("metadata record " + encoding::DescribeKey(key) +
                                    " is damaged: orphan key of " + std::to_string(key.size()) +
                                    " bytes");
        }
        orphans.push_back(encoding::KeyIno(key));
        return Status::OK();
      }));
  return orphans;
}

Status MetaStore::DeleteInode(Ino ino) {
  Mutation m(impl_.get());
  auto loaded = m.Load(ino);
  if (!loaded.ok()) return loaded.status();
  const Inode& inode = **loaded;
  if (inode.nlink > 0) {
    return Status::Busy("delete inode " + std::to_string(ino) + ": it still has " +
                        std::to_string(inode.nlink) + " links");
  }
  if (S_ISDIR(inode.mode)) {
    auto has_entries = impl_->HasKeyWithPrefix(encoding::DirEntryPrefix(ino));
    if (!has_entries.ok()) return has_entries.status();
    if (*has_entries) {
      return Status::Corruption("metadata store " + impl_->path + ": removed directory " +
                                std::to_string(ino) + " still has entries");
    }
  }
  // A file this store made and gave no xattr (most files unlinked in a session) has no X records
  // to look for; only a symlink has a target record. Each skipped step is an iterator or a
  // tombstone less per unlinked file.
  if (!m.KnownWithoutXattrs(ino)) {
    TIPFS_RETURN_IF_ERROR(impl_->ScanPrefix(encoding::XattrPrefix(ino),
                                            [&](std::string_view key, std::string_view, bool*) {
                                              m.Delete(std::string(key));
                                              return Status::OK();
                                            }));
  }
  if (S_ISLNK(inode.mode)) m.Delete(encoding::SymlinkKey(ino));
  m.Delete(encoding::OrphanKey(ino));
  m.DeleteInodeRecord(ino);
  return m.Commit();
}

Activity MetaStore::GetActivity() const {
  Activity activity;
  activity.point_reads = impl_->point_reads.load(std::memory_order_relaxed);
  activity.batches = impl_->batches.load(std::memory_order_relaxed);
  activity.scans = impl_->scans.load(std::memory_order_relaxed);
  return activity;
}

Result<Counts> MetaStore::GetCounts() {
  Counts counts;
  counts.inodes = impl_->inode_count.load(std::memory_order_relaxed);
  return counts;
}

Status MetaStore::Sync() {
  TIPFS_RETURN_IF_ERROR(impl_->WriteBack());
  rocksdb::Status s = impl_->db->FlushWAL(/*sync=*/true);
  if (!s.ok()) return impl_->FromRocks(s, "sync write-ahead log");
  if (impl_->after_sync) impl_->after_sync();
  return Status::OK();
}

}  // namespace tipfs::meta
