// MetaStore under concurrent use: mutators creating, linking, renaming and removing in the same
// directories, a reader walking them, a reaper deleting orphans. Afterwards (and after reopen)
// the store is consistent: every entry names a live inode, link counts equal the references,
// no linked inode is an orphan.
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/meta/meta_test_util.h"

namespace tipfs::meta::testing {
namespace {

// Errnos a racing namespace operation may legitimately get; anything else (EIO, EUCLEAN, ...)
// means the store broke.
bool IsExpectedRaceError(int err) {
  switch (err) {
    case ENOENT:
    case EEXIST:
    case ENOTEMPTY:
    case EISDIR:
    case ENOTDIR:
    case EINVAL:
    case EPERM:
    case EBUSY:  // DeleteInode of an inode that was linked again is refused
      return true;
    default:
      return false;
  }
}

TEST(MetaStoreConcurrency, RacingMutationsKeepTheStoreConsistent) {
  TempDir dir;
  auto created = MetaStore::Create(dir.store(), kUuid, 0, 0);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  MetaStore& store = **created;
  std::vector<Ino> tops;
  for (int i = 0; i < 3; ++i) {
    tops.push_back(store.MakeNode(kRootIno, "top" + std::to_string(i), Dir())->ino);
  }

  constexpr int kMutators = 4;
  constexpr int kOpsPerMutator = 1500;
  constexpr int kNames = 6;
  std::atomic<int> unexpected{0};
  std::atomic<bool> done{false};
  std::atomic<int> successes{0};
  auto check = [&](int err, const char* what) {
    if (err == 0) {
      ++successes;
    } else if (!IsExpectedRaceError(err)) {
      ++unexpected;
      ADD_FAILURE() << what << ": unexpected errno " << err;
    }
  };

  auto mutator = [&](unsigned seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % n); };
    auto name = [&] { return "n" + std::to_string(pick(kNames)); };
    // A parent: the root, a top directory, or a directory found one level below a top one
    // (so directories get moved into and out of each other's subtrees).
    auto parent = [&]() -> Ino {
      int choice = pick(6);
      if (choice == 0) return kRootIno;
      Ino top = tops[pick(static_cast<int>(tops.size()))];
      if (choice < 4) return top;
      auto child = store.Lookup(top, name());
      if (child.ok() && S_ISDIR(child->mode)) return child->ino;
      return top;
    };
    for (int op = 0; op < kOpsPerMutator; ++op) {
      Time now{1000 + op, 0};
      switch (pick(8)) {
        case 0:
        case 1:
          check(store.MakeNode(parent(), name(), File(now)).error(), "mknod");
          break;
        case 2:
          check(store.MakeNode(parent(), name(), Dir(now)).error(), "mkdir");
          break;
        case 3: {
          auto target = store.Lookup(parent(), name());
          if (target.ok()) check(store.Link(target->ino, parent(), name(), now).error(), "link");
          break;
        }
        case 4:
          check(store.Unlink(parent(), name(), now).error(), "unlink");
          break;
        case 5:
          check(store.Rmdir(parent(), name(), now).error(), "rmdir");
          break;
        default: {
          static const unsigned kFlags[] = {0, 0, RENAME_NOREPLACE, RENAME_EXCHANGE};
          check(store.Rename(parent(), name(), parent(), name(), kFlags[pick(4)], now).error(),
                "rename");
          break;
        }
      }
    }
  };

  // Readers must never see a half-done operation: lookups and listings give a live inode of
  // the entry's type or a clean ENOENT/ENOTDIR.
  auto reader = [&] {
    while (!done.load()) {
      for (Ino top : tops) {
        auto entries = store.ListDir(top);
        if (!entries.ok()) {
          check(entries.error(), "listdir");
          continue;
        }
        for (const DirEntry& e : *entries) {
          auto inode = store.Lookup(top, e.name);
          check(inode.error(), "lookup");
          if (inode.ok() && inode->ino == e.ino && (inode->mode & S_IFMT) != e.type) {
            ++unexpected;
            ADD_FAILURE() << "entry " << e.name << " type differs from its inode";
          }
        }
      }
    }
  };
  // Deletes orphans as the file system does at the last close, racing with everything else.
  auto reaper = [&] {
    while (!done.load()) {
      auto orphans = store.ListOrphans();
      if (!orphans.ok()) {
        check(orphans.error(), "listorphans");
        continue;
      }
      for (Ino ino : *orphans) check(store.DeleteInode(ino).error(), "deleteinode");
    }
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < kMutators; ++i) threads.emplace_back(mutator, 17u + i);
  std::thread read_thread(reader);
  std::thread reap_thread(reaper);
  for (auto& t : threads) t.join();
  done = true;
  read_thread.join();
  reap_thread.join();

  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_GT(successes.load(), kMutators * kOpsPerMutator / 10);  // the test did real work
  EXPECT_TRUE(StoreIsConsistent(store));

  created->reset();
  auto reopened = MetaStore::Open(dir.store(), kUuid);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_TRUE(StoreIsConsistent(**reopened));
  // Clearing the remaining orphans leaves exactly the reachable tree.
  auto orphans = (*reopened)->ListOrphans();
  ASSERT_TRUE(orphans.ok());
  for (Ino ino : *orphans) ASSERT_TRUE((*reopened)->DeleteInode(ino).ok());
  EXPECT_TRUE(StoreIsConsistent(**reopened));
}

}  // namespace
}  // namespace tipfs::meta::testing
