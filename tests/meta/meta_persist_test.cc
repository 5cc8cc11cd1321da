// MetaStore on disk: reopen, never-reused inode numbers, recovery after a killed process, the
// lock against a second opener, wrong volume, missing or damaged stores, corrupt records.
#include <fcntl.h>
#include <rocksdb/db.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "meta/meta_encoding.h"
#include "tests/meta/meta_test_util.h"

extern char** environ;

namespace tipfs::meta::testing {
namespace {

constexpr char kChildEnv[] = "TIPFS_META_TEST_CHILD";

// Runs this test binary again as a separate process executing ChildProcess.Run with
// "<mode>:<store path>:<report file>" in the environment; returns its exit code (-1 on failure).
int RunChild(const std::string& mode, const std::string& store, const std::string& report) {
  std::string env_entry = std::string(kChildEnv) + "=" + mode + ":" + store + ":" + report;
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(env_entry.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe";
  std::string filter = "--gtest_filter=ChildProcess.Run";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  // The child's gtest banner would only clutter this test's output; its result is the exit code.
  ::posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  int spawned = ::posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int wstatus = 0;
  if (::waitpid(pid, &wstatus, 0) != pid || !WIFEXITED(wstatus)) return -1;
  return WEXITSTATUS(wstatus);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The child side of RunChild. "lock": opens the store and exits with the errno (0 if it opened),
// writing the message to the report file. "crash": creates 100 files and exits without closing
// the store (as a killed daemon would), exit code 0 when all were created.
TEST(ChildProcess, Run) {
  const char* spec = std::getenv(kChildEnv);
  if (spec == nullptr) GTEST_SKIP() << "runs only as a child process of the lock/crash tests";
  std::string s(spec);
  size_t first = s.find(':');
  size_t last = s.rfind(':');
  std::string mode = s.substr(0, first);
  std::string store = s.substr(first + 1, last - first - 1);
  std::string report = s.substr(last + 1);
  auto opened = MetaStore::Open(store, kUuid);
  std::ofstream(report) << (opened.ok() ? "opened" : opened.status().message());
  if (mode == "lock" || !opened.ok()) ::_exit(opened.error());
  for (int i = 0; i < 100; ++i) {
    if (!(*opened)->MakeNode(kRootIno, "crash" + std::to_string(i), File()).ok()) ::_exit(1);
  }
  ::_exit(0);  // no destructor: the store is never closed
}

TEST(MetaStorePersistence, DataSurvivesReopen) {
  TempDir dir;
  Ino d, f, l, orphan;
  {
    auto store = MetaStore::Create(dir.store(), kUuid, 7, 8);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    MetaStore& s = **store;
    d = s.MakeNode(kRootIno, "dir", Dir(T(11)))->ino;
    f = s.MakeNode(d, "file", File(T(12)))->ino;
    l = s.MakeNode(d, "link", Symlink("../dir/file", T(13)))->ino;
    orphan = s.MakeNode(kRootIno, "tmp", File())->ino;
    ASSERT_TRUE(s.Unlink(kRootIno, "tmp", T(14)).ok());
    ASSERT_TRUE(s.RecordWrite(f, 65536, T(15)).ok());
    ASSERT_TRUE(s.SetXattr(f, "user.k", std::string("v\0v", 3), 0, T(16)).ok());
    ASSERT_TRUE(s.Link(f, kRootIno, "hard", T(17)).ok());
  }
  auto reopened = MetaStore::Open(dir.store(), kUuid);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  MetaStore& s = **reopened;
  EXPECT_EQ(s.Get(kRootIno)->uid, 7u);
  EXPECT_EQ(s.Get(kRootIno)->gid, 8u);
  EXPECT_EQ(s.Lookup(kRootIno, "dir")->ino, d);
  Inode file = *s.Lookup(d, "file");
  EXPECT_EQ(file.ino, f);
  EXPECT_EQ(file.size, 65536u);
  EXPECT_EQ(file.nlink, 2u);
  EXPECT_EQ(file.mtime.sec, 15);
  EXPECT_EQ(file.ctime.sec, 17);
  EXPECT_EQ(*s.ReadLink(l), "../dir/file");
  EXPECT_EQ(*s.GetXattr(f, "user.k"), std::string("v\0v", 3));
  EXPECT_EQ(*s.ListOrphans(), std::vector<Ino>{orphan});
  EXPECT_EQ(s.Lookup(kRootIno, "hard")->ino, f);
  EXPECT_EQ(s.GetCounts()->inodes, 5u);
  EXPECT_TRUE(StoreIsConsistent(s));
}

TEST(MetaStorePersistence, InodeNumbersAreNeverReusedAcrossReopen) {
  TempDir dir;
  Ino highest = 0;
  {
    auto store = MetaStore::Create(dir.store(), kUuid, 0, 0);
    ASSERT_TRUE(store.ok());
    for (int i = 0; i < 20; ++i) {
      highest = (*store)->MakeNode(kRootIno, "f" + std::to_string(i), File())->ino;
    }
    // Free the newest numbers: a counter derived from the live inodes would hand them out again.
    for (int i = 10; i < 20; ++i) {
      auto gone = (*store)->Unlink(kRootIno, "f" + std::to_string(i), T(1));
      ASSERT_TRUE(gone.ok());
      ASSERT_TRUE((*store)->DeleteInode(gone->ino).ok());
    }
  }
  for (int round = 0; round < 3; ++round) {
    auto store = MetaStore::Open(dir.store(), kUuid);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ((*store)->GetCounts()->inodes, 11u + round);
    Ino made = (*store)->MakeNode(kRootIno, "new" + std::to_string(round), File())->ino;
    EXPECT_GT(made, highest);
    highest = made;
  }
}

TEST(MetaStorePersistence, CompletedOperationsSurviveAKilledProcess) {
  TempDir dir;
  { ASSERT_TRUE(MetaStore::Create(dir.store(), kUuid, 0, 0).ok()); }
  const std::string report = dir.path() + "/report";
  ASSERT_EQ(RunChild("crash", dir.store(), report), 0) << ReadFile(report);
  auto store = MetaStore::Open(dir.store(), kUuid);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->ListDir(kRootIno)->size(), 100u);
  EXPECT_EQ((*store)->GetCounts()->inodes, 101u);
  Ino last = (*store)->Lookup(kRootIno, "crash99")->ino;
  EXPECT_GT((*store)->MakeNode(kRootIno, "after", File())->ino, last);
  EXPECT_TRUE(StoreIsConsistent(**store));
}

// RecordWrite (and RecordAccess, a read's atime) changes the inode in memory only; the record
// reaches the write-ahead log with the next batch of any operation (or WriteBack), always before
// that operation: a crash image (a copy of the store's files while it runs, as a killed daemon
// leaves them) never holds an operation without the writes that came before it.
TEST(MetaStorePersistence, WritesReachTheLogBeforeAnyLaterOperation) {
  TempDir dir;
  MetaStoreOptions options;
  options.write_back_interval_ms = 0;  // no timer: the test decides when batches happen
  auto store = MetaStore::Create(dir.store(), kUuid, 0, 0, options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  MetaStore& s = **store;
  const Ino f = s.MakeNode(kRootIno, "f", File(T(10)))->ino;
  ASSERT_TRUE(s.RecordWrite(f, 4096, T(20)).ok());
  ASSERT_TRUE(s.RecordAccess(f, T(25)).ok());
  EXPECT_EQ(s.Get(f)->size, 4096u);  // what stat sees at once
  EXPECT_EQ(s.Lookup(kRootIno, "f")->mtime.sec, 20);
  EXPECT_EQ(s.Get(f)->atime.sec, 25);
  EXPECT_EQ(s.Get(f)->ctime.sec, 20) << "an access is not a change of the inode";
  int images = 0;
  auto crash_image = [&]() {
    auto image = OpenCrashImage(dir.store(), dir.Sub("image" + std::to_string(images++)));
    if (image == nullptr) std::abort();  // OpenCrashImage said why
    return image;
  };
  {
    auto image = crash_image();
    EXPECT_EQ(image->Get(f)->size, 0u) << "no record is written per write(2)";
    EXPECT_EQ(image->Get(f)->atime.sec, 10) << "a read wrote a metadata record";
  }
  ASSERT_TRUE(s.MakeNode(kRootIno, "g", File(T(30))).ok());
  {
    auto image = crash_image();
    EXPECT_TRUE(image->Lookup(kRootIno, "g").ok());
    EXPECT_EQ(image->Get(f)->size, 4096u) << "the later create went to the log without the write";
    EXPECT_EQ(image->Get(f)->mtime.sec, 20);
    EXPECT_EQ(image->Get(f)->atime.sec, 25);
  }
  ASSERT_TRUE(s.RecordWrite(f, 8192, T(40)).ok());
  ASSERT_TRUE(s.WriteBack().ok());
  EXPECT_EQ(crash_image()->Get(f)->size, 8192u);
  // A write racing a chmod keeps both: the chmod's batch does not put the old size back.
  ASSERT_TRUE(s.RecordWrite(f, 12288, T(50)).ok());
  AttrChange chmod;
  chmod.mode = 0600;
  chmod.now = T(60);
  ASSERT_TRUE(s.SetAttr(f, chmod).ok());
  ASSERT_TRUE(s.RecordWrite(f, 16384, T(70)).ok());
  ASSERT_TRUE(s.Sync().ok());
  Inode stored = *crash_image()->Get(f);
  EXPECT_EQ(stored.size, 16384u);
  EXPECT_EQ(stored.mode & 07777, 0600u);
  EXPECT_EQ(stored.mtime.sec, 70);
}

// With no other operation, fsync or close to carry them, the write-back timer
// (MetaStoreOptions::write_back_interval_ms) writes the attributes of writes to the log: a
// process killed a moment later keeps the size and mtime its writes set.
TEST(MetaStorePersistence, TheWriteBackTimerPutsWritesInTheLogWithoutAnyOtherOperation) {
  TempDir dir;
  MetaStoreOptions options;
  options.write_back_interval_ms = 10;
  auto store = MetaStore::Create(dir.store(), kUuid, 0, 0, options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  MetaStore& s = **store;
  const Ino f = s.MakeNode(kRootIno, "f", File(T(10)))->ino;
  ASSERT_TRUE(s.RecordWrite(f, 4096, T(20)).ok());
  // Nothing else happens to the store from here on; the timer is its only writer. The deadline
  // only turns a missing write-back into a failure instead of a hang.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  Inode stored;
  for (int images = 0;; ++images) {
    const std::string copy = dir.Sub("image" + std::to_string(images));
    {
      auto image = OpenCrashImage(dir.store(), copy);
      ASSERT_NE(image, nullptr);
      auto inode = image->Get(f);
      ASSERT_TRUE(inode.ok()) << inode.status().ToString();
      stored = *inode;
    }
    std::filesystem::remove_all(copy);
    if (stored.size == 4096u || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(stored.size, 4096u) << "the write's size never reached the log";
  EXPECT_EQ(stored.mtime.sec, 20);
}

TEST(MetaStorePersistence, SecondOpenerIsRefusedWithEbusy) {
  TempDir dir;
  auto first = MetaStore::Create(dir.store(), kUuid, 0, 0);
  ASSERT_TRUE(first.ok());
  const std::string expected = "metadata store " + dir.store() + " is locked by a running mount";

  auto second = MetaStore::Open(dir.store(), kUuid);
  EXPECT_EQ(second.error(), EBUSY);
  EXPECT_EQ(second.status().message(), expected);

  // From another process (RocksDB's fcntl lock rather than its in-process table).
  const std::string report = dir.path() + "/report";
  EXPECT_EQ(RunChild("lock", dir.store(), report), EBUSY);
  EXPECT_EQ(ReadFile(report), expected);

  // The first opener is unaffected, and after it closes the store opens again.
  EXPECT_TRUE((*first)->MakeNode(kRootIno, "still-works", File()).ok());
  first->reset();
  EXPECT_EQ(RunChild("lock", dir.store(), report), 0) << ReadFile(report);
  auto third = MetaStore::Open(dir.store(), kUuid);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_TRUE((*third)->Lookup(kRootIno, "still-works").ok());
}

TEST(MetaStorePersistence, CreateOnAnExistingStoreIsEexist) {
  TempDir dir;
  {
    auto store = MetaStore::Create(dir.store(), kUuid, 0, 0);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->MakeNode(kRootIno, "keep", File()).ok());
    // Also while it is open.
    EXPECT_EQ(MetaStore::Create(dir.store(), kUuid, 0, 0).error(), EEXIST);
  }
  auto again = MetaStore::Create(dir.store(), "other-uuid", 0, 0);
  EXPECT_EQ(again.error(), EEXIST);
  EXPECT_NE(again.status().message().find(dir.store()), std::string::npos);
  auto store = MetaStore::Open(dir.store(), kUuid);
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE((*store)->Lookup(kRootIno, "keep").ok());
}

TEST(MetaStorePersistence, MissingStoreIsEnoentNamingThePath) {
  TempDir dir;
  auto missing = MetaStore::Open(dir.store(), kUuid);
  EXPECT_EQ(missing.error(), ENOENT);
  EXPECT_NE(missing.status().message().find(dir.store()), std::string::npos);
  // An empty directory is not a store either, and Open does not create one.
  ASSERT_EQ(::mkdir(dir.store().c_str(), 0755), 0);
  auto empty = MetaStore::Open(dir.store(), kUuid);
  EXPECT_EQ(empty.error(), ENOENT);
  EXPECT_NE(empty.status().message().find(dir.store()), std::string::npos);
  EXPECT_EQ(::access((dir.store() + "/CURRENT").c_str(), F_OK), -1);
}

TEST(MetaStorePersistence, WrongVolumeIsEinvalNamingBothUuids) {
  TempDir dir;
  { ASSERT_TRUE(MetaStore::Create(dir.store(), kUuid, 0, 0).ok()); }
  const std::string other = "ffffffff-0000-4000-8000-000000000000";
  auto opened = MetaStore::Open(dir.store(), other);
  EXPECT_EQ(opened.error(), EINVAL);
  EXPECT_NE(opened.status().message().find(kUuid), std::string::npos);
  EXPECT_NE(opened.status().message().find(other), std::string::npos);
  EXPECT_TRUE(MetaStore::Open(dir.store(), kUuid).ok());  // nothing was changed
}

// Writes raw key/values into a closed store, bypassing MetaStore.
void PokeRaw(const std::string& path, const std::vector<std::pair<std::string, std::string>>& puts,
             const std::vector<std::string>& deletes = {}) {
  rocksdb::DB* raw = nullptr;
  rocksdb::Options options;
  ASSERT_TRUE(rocksdb::DB::Open(options, path, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  for (const auto& [key, value] : puts) ASSERT_TRUE(db->Put({}, key, value).ok());
  for (const auto& key : deletes) ASSERT_TRUE(db->Delete({}, key).ok());
  ASSERT_TRUE(db->Close().ok());
}

TEST(MetaStorePersistence, CorruptRecordsAreReportedNamingTheKey) {
  TempDir dir;
  Ino bad_version, truncated, dangling_target;
  {
    auto store = MetaStore::Create(dir.store(), kUuid, 0, 0);
    ASSERT_TRUE(store.ok());
    bad_version = (*store)->MakeNode(kRootIno, "bad-version", File())->ino;
    truncated = (*store)->MakeNode(kRootIno, "truncated", File())->ino;
    dangling_target = (*store)->MakeNode(kRootIno, "dangling", File())->ino;
    ASSERT_TRUE((*store)->MakeNode(kRootIno, "good", File()).ok());
  }
  std::string version_changed = encoding::EncodeInode(Inode{.mode = S_IFREG | 0644, .nlink = 1});
  version_changed[0] = 9;
  std::string cut = encoding::EncodeInode(Inode{.mode = S_IFREG | 0644, .nlink = 1});
  cut.resize(cut.size() - 3);
  PokeRaw(dir.store(),
          {{encoding::InodeKey(bad_version), version_changed},
           {encoding::InodeKey(truncated), cut},
           {encoding::DirEntryKey(kRootIno, "zz-bad-entry"), "\x01garbage"}},
          {encoding::InodeKey(dangling_target)});

  auto store = MetaStore::Open(dir.store(), kUuid);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  MetaStore& s = **store;
  auto got = s.Get(bad_version);
  EXPECT_EQ(got.error(), EUCLEAN);
  EXPECT_NE(got.status().message().find("I/" + std::to_string(bad_version)), std::string::npos)
      << got.status().message();
  EXPECT_NE(got.status().message().find("version 9"), std::string::npos);
  EXPECT_EQ(s.Lookup(kRootIno, "bad-version").error(), EUCLEAN);
  got = s.Get(truncated);
  EXPECT_EQ(got.error(), EUCLEAN);
  EXPECT_NE(got.status().message().find("I/" + std::to_string(truncated)), std::string::npos);
  // A mutation that reads the damaged record fails without writing anything.
  EXPECT_EQ(s.RecordWrite(truncated, 10, T(1)).error(), EUCLEAN);
  EXPECT_EQ(s.Unlink(kRootIno, "truncated", T(1)).error(), EUCLEAN);
  // An entry whose inode is gone.
  auto dangling = s.Lookup(kRootIno, "dangling");
  EXPECT_EQ(dangling.error(), EUCLEAN);
  EXPECT_NE(dangling.status().message().find("dangling"), std::string::npos);
  EXPECT_EQ(s.Rename(kRootIno, "dangling", kRootIno, "x", 0, T(1)).error(), EUCLEAN);
  // A damaged entry spoils the listing, and says which one.
  auto listing = s.ListDir(kRootIno);
  EXPECT_EQ(listing.error(), EUCLEAN);
  EXPECT_NE(listing.status().message().find("zz-bad-entry"), std::string::npos);
  EXPECT_EQ(s.Lookup(kRootIno, "zz-bad-entry").error(), EUCLEAN);
  // The healthy parts keep working.
  EXPECT_TRUE(s.Lookup(kRootIno, "good").ok());
  EXPECT_TRUE(s.MakeNode(kRootIno, "new", File()).ok());
}

TEST(MetaStorePersistence, DamagedOrMissingSuperblockIsEuclean) {
  TempDir dir;
  { ASSERT_TRUE(MetaStore::Create(dir.store(), kUuid, 0, 0).ok()); }
  PokeRaw(dir.store(), {{encoding::SuperblockKey(), "\x01short"}});
  auto opened = MetaStore::Open(dir.store(), kUuid);
  EXPECT_EQ(opened.error(), EUCLEAN);
  EXPECT_NE(opened.status().message().find("S"), std::string::npos);
  EXPECT_NE(opened.status().message().find(dir.store()), std::string::npos);

  PokeRaw(dir.store(), {}, {encoding::SuperblockKey()});
  opened = MetaStore::Open(dir.store(), kUuid);
  EXPECT_EQ(opened.error(), EUCLEAN);
  EXPECT_NE(opened.status().message().find("superblock missing"), std::string::npos);

  encoding::Superblock future;
  future.format_version = 99;
  future.volume_uuid = kUuid;
  PokeRaw(dir.store(), {{encoding::SuperblockKey(), encoding::EncodeSuperblock(future)}});
  opened = MetaStore::Open(dir.store(), kUuid);
  EXPECT_EQ(opened.error(), EUCLEAN);
  EXPECT_NE(opened.status().message().find("format version 99"), std::string::npos);
}

TEST(MetaStorePersistence, MissingRootIsEuclean) {
  TempDir dir;
  { ASSERT_TRUE(MetaStore::Create(dir.store(), kUuid, 0, 0).ok()); }
  PokeRaw(dir.store(), {}, {encoding::InodeKey(kRootIno)});
  auto opened = MetaStore::Open(dir.store(), kUuid);
  EXPECT_EQ(opened.error(), EUCLEAN);
  EXPECT_NE(opened.status().message().find("root"), std::string::npos);
}

// Every key of the store, decoded enough to see which inode it belongs to.
std::vector<std::string> AllKeys(const std::string& path) {
  rocksdb::DB* raw = nullptr;
  rocksdb::Options options;
  std::vector<std::string> keys;
  if (!rocksdb::DB::OpenForReadOnly(options, path, &raw).ok()) return {"<open failed>"};
  std::unique_ptr<rocksdb::DB> db(raw);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator({}));
  for (it->SeekToFirst(); it->Valid(); it->Next()) keys.push_back(it->key().ToString());
  return keys;
}

TEST(MetaStorePersistence, DeleteInodeLeavesNoKeysBehind) {
  TempDir dir;
  Ino f, l, d;
  {
    auto store = MetaStore::Create(dir.store(), kUuid, 0, 0);
    ASSERT_TRUE(store.ok());
    MetaStore& s = **store;
    f = s.MakeNode(kRootIno, "f", File())->ino;
    l = s.MakeNode(kRootIno, "l", Symlink("target"))->ino;
    d = s.MakeNode(kRootIno, "d", Dir())->ino;
    for (Ino ino : {f, l, d}) {
      ASSERT_TRUE(s.SetXattr(ino, "user.one", "1", 0, T(1)).ok());
      ASSERT_TRUE(s.SetXattr(ino, "user.two", "2", 0, T(1)).ok());
    }
    ASSERT_TRUE(s.Unlink(kRootIno, "f", T(2)).ok());
    ASSERT_TRUE(s.Unlink(kRootIno, "l", T(2)).ok());
    ASSERT_TRUE(s.Rmdir(kRootIno, "d", T(2)).ok());
    for (Ino ino : {f, l, d}) ASSERT_TRUE(s.DeleteInode(ino).ok());
  }
  std::vector<std::string> keys = AllKeys(dir.store());
  // What remains: the superblock and the root inode.
  EXPECT_EQ(keys,
            (std::vector<std::string>{encoding::InodeKey(kRootIno), encoding::SuperblockKey()}));
}

// Deleting a file the store made and gave no xattr needs no scan for X records, and a
// non-symlink no tombstone for a target it never had: one batch and nothing else. A file whose
// record came from RocksDB (after a reopen) may have xattrs and is scanned. Either way no key is
// left behind.
TEST(MetaStorePersistence, DeleteInodeScansForXattrsOnlyWhenTheFileMayHaveThem) {
  TempDir dir;
  Ino fresh, tagged, old;
  {
    auto store = MetaStore::Create(dir.store(), kUuid, 0, 0);
    ASSERT_TRUE(store.ok());
    MetaStore& s = **store;
    old = s.MakeNode(kRootIno, "old", File())->ino;
  }
  {
    auto store = MetaStore::Open(dir.store(), kUuid);
    ASSERT_TRUE(store.ok());
    MetaStore& s = **store;
    fresh = s.MakeNode(kRootIno, "fresh", File())->ino;
    tagged = s.MakeNode(kRootIno, "tagged", File())->ino;
    ASSERT_TRUE(s.SetXattr(tagged, "user.k", "v", 0, T(1)).ok());
    for (const char* name : {"fresh", "tagged", "old"}) {
      ASSERT_TRUE(s.Unlink(kRootIno, name, T(2)).ok());
    }
    auto cost_of_delete = [&s](Ino ino) {
      const Activity before = s.GetActivity();
      EXPECT_TRUE(s.DeleteInode(ino).ok());
      const Activity after = s.GetActivity();
      return Activity{after.point_reads - before.point_reads, after.batches - before.batches,
                      after.scans - before.scans};
    };
    Activity fresh_cost = cost_of_delete(fresh);
    EXPECT_EQ(fresh_cost.scans, 0u);
    EXPECT_EQ(fresh_cost.point_reads, 0u);  // the inode is in memory
    EXPECT_EQ(fresh_cost.batches, 1u);
    EXPECT_EQ(cost_of_delete(tagged).scans, 1u);
    EXPECT_EQ(cost_of_delete(old).scans, 1u);
    EXPECT_EQ(s.Get(fresh).error(), ENOENT);
  }
  EXPECT_EQ(AllKeys(dir.store()),
            (std::vector<std::string>{encoding::InodeKey(kRootIno), encoding::SuperblockKey()}));
}

TEST(MetaStorePersistence, SyncSucceedsAndKeepsWorking) {
  TempDir dir;
  auto store = MetaStore::Create(dir.store(), kUuid, 0, 0);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->MakeNode(kRootIno, "f", File()).ok());
  EXPECT_TRUE((*store)->Sync().ok());
  EXPECT_TRUE((*store)->MakeNode(kRootIno, "g", File()).ok());
  EXPECT_TRUE((*store)->Sync().ok());
}

}  // namespace
}  // namespace tipfs::meta::testing
