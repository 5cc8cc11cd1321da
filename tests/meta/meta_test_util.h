// Helpers for the MetaStore tests: a temporary store directory, short-hand node constructors and
// a whole-store invariant check (walks the tree from the root through the public API).
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "meta/meta_store.h"
#include "tests/support/temp_dir.h"

namespace tipfs::meta::testing {

constexpr char kUuid[] = "0b7e2d3c-5f0a-4c1e-9a8b-7d6c5e4f3a21";

// A fresh directory whose store lives in a subdirectory, so "missing store" and "empty
// directory" can be tested.
class TempDir : public tipfs::testing::TempDir {
 public:
  TempDir() : tipfs::testing::TempDir("tipfs-meta") {}
  std::string store() const { return Sub("meta"); }
};

inline Time T(int64_t sec) { return Time{sec, 0}; }

inline NewNode Node(uint32_t mode, Time now = T(100)) {
  NewNode n;
  n.mode = mode;
  n.uid = 1000;
  n.gid = 1000;
  n.now = now;
  return n;
}
inline NewNode File(Time now = T(100)) { return Node(S_IFREG | 0644, now); }
inline NewNode Dir(Time now = T(100)) { return Node(S_IFDIR | 0755, now); }
inline NewNode Symlink(std::string target, Time now = T(100)) {
  NewNode n = Node(S_IFLNK | 0777, now);
  n.symlink_target = std::move(target);
  return n;
}

// The store at `store` as a process killed at this instant leaves it: a copy of its directory
// (the write-ahead log's records are in the file once written, synced or not) without the lock
// of the running opener, opened as the next mount opens a store that was not closed cleanly.
// Null (and a test failure) when the copy does not open.
inline std::unique_ptr<MetaStore> OpenCrashImage(const std::string& store, const std::string& copy,
                                                 const std::string& volume_uuid = kUuid) {
  std::filesystem::copy(store, copy, std::filesystem::copy_options::recursive);
  std::filesystem::remove(copy + "/LOCK");
  MetaStoreOptions options;
  options.after_unclean_shutdown = true;
  options.write_back_interval_ms = 0;
  auto opened = MetaStore::Open(copy, volume_uuid, options);
  EXPECT_TRUE(opened.ok()) << "crash image of " << store << ": " << opened.status().ToString();
  return opened.ok() ? std::move(*opened) : nullptr;
}

// A Time as one comparable number.
inline int64_t Nanos(const Time& t) { return t.sec * 1'000'000'000 + t.nsec; }

// Checks, through the public API: every entry names a live inode of the entry's type; a
// directory is named exactly once, its parent pointer is the directory naming it and its nlink is
// 2 + its subdirectories; a non-directory's nlink is the number of entries naming it; no reachable
// inode is an orphan, every orphan has nlink 0; reachable inodes + orphans = GetCounts().inodes.
inline ::testing::AssertionResult StoreIsConsistent(MetaStore& store) {
  std::map<Ino, uint32_t> references;  // non-directories: entries naming them
  std::map<Ino, Inode> inodes;
  std::vector<Ino> pending{kRootIno};
  auto root = store.Get(kRootIno);
  if (!root.ok()) return ::testing::AssertionFailure() << "root: " << root.status().ToString();
  inodes[kRootIno] = *root;
  while (!pending.empty()) {
    Ino dir = pending.back();
    pending.pop_back();
    auto entries = store.ListDir(dir);
    if (!entries.ok()) {
      return ::testing::AssertionFailure()
             << "ListDir " << dir << ": " << entries.status().ToString();
    }
    uint32_t subdirs = 0;
    std::string previous;
    for (const DirEntry& e : *entries) {
      if (!previous.empty() && !(previous < e.name)) {
        return ::testing::AssertionFailure() << "ListDir " << dir << " not sorted at " << e.name;
      }
      previous = e.name;
      auto inode = store.Get(e.ino);
      if (!inode.ok()) {
        return ::testing::AssertionFailure() << "entry " << dir << "/" << e.name << " -> " << e.ino
                                             << ": " << inode.status().ToString();
      }
      if ((inode->mode & S_IFMT) != e.type) {
        return ::testing::AssertionFailure() << "entry " << e.name << " type mismatch";
      }
      if (S_ISDIR(inode->mode)) {
        ++subdirs;
        if (inodes.count(e.ino) != 0) {
          return ::testing::AssertionFailure() << "directory " << e.ino << " named twice";
        }
        if (inode->parent != dir) {
          return ::testing::AssertionFailure()
                 << "directory " << e.ino << " parent " << inode->parent << " but named in " << dir;
        }
        pending.push_back(e.ino);
      } else {
        ++references[e.ino];
      }
      inodes[e.ino] = *inode;
    }
    if (inodes[dir].nlink != 2 + subdirs) {
      return ::testing::AssertionFailure() << "directory " << dir << " nlink " << inodes[dir].nlink
                                           << " with " << subdirs << " subdirectories";
    }
  }
  for (const auto& [ino, count] : references) {
    if (inodes[ino].nlink != count) {
      return ::testing::AssertionFailure()
             << "inode " << ino << " nlink " << inodes[ino].nlink << " but " << count << " entries";
    }
  }
  auto orphans = store.ListOrphans();
  if (!orphans.ok()) return ::testing::AssertionFailure() << orphans.status().ToString();
  for (Ino orphan : *orphans) {
    if (inodes.count(orphan) != 0) {
      return ::testing::AssertionFailure() << "reachable inode " << orphan << " is an orphan";
    }
    auto inode = store.Get(orphan);
    if (!inode.ok() || inode->nlink != 0) {
      return ::testing::AssertionFailure() << "orphan " << orphan << " is not an unlinked inode";
    }
  }
  auto counts = store.GetCounts();
  if (!counts.ok() || counts->inodes != inodes.size() + orphans->size()) {
    return ::testing::AssertionFailure()
           << "inode count " << (counts.ok() ? counts->inodes : 0) << " but " << inodes.size()
           << " reachable + " << orphans->size() << " orphans";
  }
  return ::testing::AssertionSuccess();
}

// A fixture with a freshly created store in a temporary directory.
class MetaStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = MetaStore::Create(dir_.store(), kUuid, 1000, 1000);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    store_ = std::move(*created);
  }

  // Creates a node and returns its inode number (fails the test otherwise).
  Ino Make(Ino parent, const std::string& name, const NewNode& node) {
    auto made = store_->MakeNode(parent, name, node);
    EXPECT_TRUE(made.ok()) << name << ": " << made.status().ToString();
    return made.ok() ? made->ino : 0;
  }
  Inode MustGet(Ino ino) {
    auto inode = store_->Get(ino);
    EXPECT_TRUE(inode.ok()) << ino << ": " << inode.status().ToString();
    return inode.ok() ? *inode : Inode{};
  }
  std::vector<std::string> Names(Ino dir) {
    std::vector<std::string> names;
    auto entries = store_->ListDir(dir);
    EXPECT_TRUE(entries.ok()) << entries.status().ToString();
    if (entries.ok()) {
      for (const auto& e : *entries) names.push_back(e.name);
    }
    return names;
  }

  TempDir dir_;
  std::unique_ptr<MetaStore> store_;
};

}  // namespace tipfs::meta::testing
