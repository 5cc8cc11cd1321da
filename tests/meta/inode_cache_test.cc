// InodeCache's coherence rules at the interleavings a multi-threaded daemon can reach: a
// mutation (here: a truncation) loads an inode, the inode is dropped from the cache to make room,
// a reader (getattr, another request on the file) misses, reads the record from RocksDB before
// the mutation's batch lands and inserts it, and then the mutation commits. The cache is driven
// through its interface in the order MetaStore and its readers call it.
#include "meta/inode_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

namespace tipfs::meta {
namespace {

constexpr size_t kShards = 64;  // InodeCache's shard count: inodes kShards apart share a shard

Inode RegularFile(Ino ino, uint64_t size) {
  Inode inode;
  inode.ino = ino;
  inode.mode = S_IFREG | 0644;
  inode.nlink = 1;
  inode.size = size;
  return inode;
}

// Inserts other inodes of `ino`'s shard until `ino` is dropped (a full shard drops clean
// entries, in its hash map's order). Returns false if it never was.
bool PushOut(InodeCache* cache, Ino ino) {
  for (Ino other = ino + kShards; other < ino + kShards * 100'000; other += kShards) {
    if (!cache->Find(ino)) return true;
    cache->Insert(RegularFile(other, 1));
  }
  return !cache->Find(ino);
}

// A file written to 928,104 bytes, its attributes written back (clean, version from a write).
InodeCache::Versioned WrittenAndWrittenBack(InodeCache* cache, Ino ino) {
  cache->Insert(RegularFile(ino, 0));
  EXPECT_TRUE(cache->RecordWrite(ino, 928'104, Time{1, 0}).ok());
  cache->AfterCommit(cache->CollectDirty(), {}, {});
  std::optional<InodeCache::Versioned> loaded = cache->Find(ino);
  EXPECT_TRUE(loaded.has_value());
  return *loaded;
}

TEST(InodeCacheTest, ATruncationStaysWhenAReaderReinsertedTheOldRecordWhileItCommitted) {
  InodeCache cache(kShards * 16);  // 16 clean inodes per shard
  const Ino ino = 7;
  InodeCache::Versioned loaded = WrittenAndWrittenBack(&cache, ino);  // the truncation loads it
  ASSERT_TRUE(PushOut(&cache, ino));

  // A reader misses and reads the record RocksDB still holds: the truncation is not written yet.
  const uint64_t generation = cache.Generation(ino);
  cache.InsertIfUnchanged(RegularFile(ino, 928'104), generation);
  ASSERT_TRUE(cache.Find(ino).has_value());

  // The truncation's batch lands.
  InodeCache::Versioned truncated = loaded;
  truncated.inode.size = 97'273;
  cache.AfterCommit({}, {truncated}, {});

  std::optional<InodeCache::Versioned> now = cache.Find(ino);
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->inode.size, 97'273u) << "the file grew back to the size it had before truncate";
}

TEST(InodeCacheTest, AReadDuringAUtimesKeepsItsAtimeAndLeavesTheUtimesMtime) {
  // A read's access time (RecordAccess) that came while a utimes committed follows it and stays;
  // the utimes' older mtime stays too: nothing but a write moves mtime forward.
  InodeCache cache(kShards * 16);
  const Ino ino = 11;
  Inode file = RegularFile(ino, 4096);
  file.atime = file.mtime = file.ctime = Time{50, 0};
  cache.Insert(file);
  InodeCache::Versioned utimes = *cache.Find(ino);  // the mutation loads it
  ASSERT_TRUE(cache.RecordAccess(ino, Time{100, 0}).ok());
  utimes.inode.atime = utimes.inode.mtime = Time{5, 0};
  utimes.inode.ctime = Time{99, 0};
  cache.AfterCommit({}, {utimes}, {});

  std::optional<InodeCache::Versioned> now = cache.Find(ino);
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->inode.atime.sec, 100) << "the read's access time was lost";
  EXPECT_EQ(now->inode.mtime.sec, 5) << "the read undid the utimes' mtime";
  EXPECT_EQ(now->inode.ctime.sec, 99);
  EXPECT_EQ(now->inode.size, 4096u);
  EXPECT_EQ(cache.dirty_count(), 1u) << "the access still has to be written back";
}

TEST(InodeCacheTest, AWriteAfterTheReinsertStillFollowsAMutationThatChangedNoSize) {
  // The other side of the rule: a write that reached the re-read entry while a mutation that
  // changed no size (chmod) committed happened after it, and its size stays.
  InodeCache cache(kShards * 16);
  const Ino ino = 9;
  InodeCache::Versioned loaded = WrittenAndWrittenBack(&cache, ino);
  ASSERT_TRUE(PushOut(&cache, ino));
  cache.InsertIfUnchanged(RegularFile(ino, 928'104), cache.Generation(ino));
  ASSERT_TRUE(cache.RecordWrite(ino, 1'000'000, Time{2, 0}).ok());

  InodeCache::Versioned chmodded = loaded;
  chmodded.inode.mode = S_IFREG | 0600;
  cache.AfterCommit({}, {chmodded}, {});

  std::optional<InodeCache::Versioned> now = cache.Find(ino);
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->inode.size, 1'000'000u);
  EXPECT_EQ(now->inode.mode, S_IFREG | 0600u);
}

}  // namespace
}  // namespace tipfs::meta
