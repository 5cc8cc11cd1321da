// FileSystem operations without a mount: data round trips, the lifetime of unlinked files,
// crash recovery of orphans, truncation, set-group-ID directories, statfs.
#include "fusefs/filesystem.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/filesystem/fs_rig.h"
#include "tests/meta/meta_test_util.h"

namespace tipfs::testing {
namespace {

using fusefs::Caller;
using meta::kRootIno;

std::string Pattern(size_t size, char seed) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>(seed + i * 7 + i / 4096);
  return s;
}

class FileSystemTest : public ::testing::Test {
 protected:
  // Creates `name` in the root with `data`, leaving it open; returns its inode number.
  uint64_t CreateWith(const std::string& name, const std::string& data) {
    auto opened = rig_.fs()->Create(Caller{}, kRootIno, name, 0644, O_RDWR);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    if (!data.empty()) {
      auto n = rig_.fs()->Write(opened->inode.ino, 0, data.data(), data.size());
      EXPECT_TRUE(n.ok());
    }
    return opened->inode.ino;
  }
  std::string ReadAll(uint64_t ino, size_t max = 64 << 20) {
    std::string out(max, '\0');
    auto n = rig_.fs()->Read(cache::ReadContext{}, ino, 0, max, out.data());
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    out.resize(n.ok() ? *n : 0);
    return out;
  }

  FsRig rig_;
};

TEST_F(FileSystemTest, WritesAcrossStripeUnitsReadBackAndSetTheSize) {
  std::string data = Pattern(1'000'003, 'a');
  uint64_t ino = CreateWith("f", data);
  EXPECT_EQ(ReadAll(ino), data);
  auto inode = rig_.fs()->GetAttr(ino);
  ASSERT_TRUE(inode.ok());
  EXPECT_EQ(inode->size, data.size());
  // Striped: every one of the 4 disks holds part of a 1 MB file.
  for (size_t d = 0; d < rig_.disk_count(); ++d) EXPECT_GT(rig_.disk(d)->Contents(ino).size(), 0u);
  EXPECT_EQ(rig_.ObjectsOf(ino), data.size());
}

TEST_F(FileSystemTest, UnlinkedOpenFileStaysReadableUntilTheLastRelease) {
  std::string data = Pattern(300'000, 'b');
  uint64_t ino = CreateWith("doomed", data);
  ASSERT_TRUE(rig_.fs()->Open(ino, O_RDONLY).ok());  // a second handle
  ASSERT_TRUE(rig_.fs()->Unlink(kRootIno, "doomed").ok());
  EXPECT_EQ(rig_.fs()->Lookup(kRootIno, "doomed").error(), ENOENT);
  EXPECT_EQ(ReadAll(ino), data);
  ASSERT_TRUE(rig_.fs()->Release(ino).ok());
  EXPECT_TRUE(rig_.HasObjects(ino));  // one handle still open
  EXPECT_EQ(ReadAll(ino), data);
  ASSERT_TRUE(rig_.fs()->Release(ino).ok());
  EXPECT_FALSE(rig_.HasObjects(ino));         // the space goes at the last close
  EXPECT_TRUE(rig_.fs()->GetAttr(ino).ok());  // the record while the kernel refers to it
  rig_.fs()->Forget(ino, 1);
  EXPECT_EQ(rig_.fs()->GetAttr(ino).error(), ENOENT);
}

TEST_F(FileSystemTest, UnlinkOfAClosedFileFreesItsSpaceAtOnce) {
  uint64_t ino = CreateWith("gone", Pattern(200'000, 'c'));
  ASSERT_TRUE(rig_.fs()->Release(ino).ok());
  ASSERT_TRUE(rig_.fs()->Unlink(kRootIno, "gone").ok());
  EXPECT_FALSE(rig_.HasObjects(ino));
  rig_.fs()->Forget(ino, 1);
  EXPECT_EQ(rig_.fs()->GetAttr(ino).error(), ENOENT);
}

// The FUSE ring serves an unlink or release on a worker when the file system expects it to wait
// for the metadata store's fdatasync: when it frees the data of a regular file that has some.
TEST_F(FileSystemTest, UnlinkAndReleaseWouldSyncOnlyWhenTheyFreeAClosedFilesBytes) {
  fusefs::FileSystem* fs = rig_.fs();
  ASSERT_TRUE(fs->Release(CreateWith("empty", "")).ok());
  EXPECT_FALSE(fs->UnlinkWouldSync(kRootIno, "empty"));
  const uint64_t full = CreateWith("full", Pattern(10'000, 'f'));
  EXPECT_FALSE(fs->UnlinkWouldSync(kRootIno, "full")) << "open: its last close frees it";
  ASSERT_TRUE(fs->Release(full).ok());
  EXPECT_TRUE(fs->UnlinkWouldSync(kRootIno, "full"));
  ASSERT_TRUE(fs->Link(full, kRootIno, "second").ok());
  EXPECT_FALSE(fs->UnlinkWouldSync(kRootIno, "full")) << "a second link keeps the bytes";
  EXPECT_FALSE(fs->UnlinkWouldSync(kRootIno, "missing"));
  ASSERT_TRUE(fs->MakeNode(Caller{}, kRootIno, "link", S_IFLNK | 0777, 0, "full").ok());
  EXPECT_FALSE(fs->UnlinkWouldSync(kRootIno, "link")) << "a symlink's target is metadata";
  ASSERT_TRUE(fs->MakeNode(Caller{}, kRootIno, "dir", S_IFDIR | 0755, 0).ok());
  EXPECT_FALSE(fs->UnlinkWouldSync(kRootIno, "dir"));

  // Unlinked while open twice: only the last release frees the bytes.
  const uint64_t doomed = CreateWith("doomed", Pattern(10'000, 'd'));
  ASSERT_TRUE(fs->Open(doomed, O_RDONLY).ok());
  EXPECT_FALSE(fs->ReleaseWouldSync(doomed)) << "linked";
  ASSERT_TRUE(fs->Unlink(kRootIno, "doomed").ok());
  EXPECT_FALSE(fs->ReleaseWouldSync(doomed)) << "open twice";
  ASSERT_TRUE(fs->Release(doomed).ok());
  EXPECT_TRUE(fs->ReleaseWouldSync(doomed));
  ASSERT_TRUE(fs->Release(doomed).ok());
  EXPECT_FALSE(rig_.HasObjects(doomed));
}

// The unlink (or last close) that freed the data leaves only the record for the kernel's forget
// to delete: the forget asks no disk to remove the objects a second time.
TEST(FileSystemFaultTest, ForgetAfterTheUnlinkFreedTheDataAsksNoDisk) {
  FsRig rig(4, 64 * 1024, /*faulty=*/true);
  auto opened = rig.fs()->Create(Caller{}, kRootIno, "f", 0644, O_RDWR);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  const uint64_t ino = opened->inode.ino;
  const std::string data = Pattern(300'000, 'f');
  ASSERT_TRUE(rig.fs()->Write(ino, 0, data.data(), data.size()).ok());
  ASSERT_TRUE(rig.fs()->Release(ino).ok());
  ASSERT_TRUE(rig.fs()->Unlink(kRootIno, "f").ok());
  EXPECT_FALSE(rig.HasObjects(ino));
  // Any remove now fails, and is counted.
  for (size_t d = 0; d < rig.disk_count(); ++d) {
    rig.faulty(d)->FailAlways(stripe::FaultyDisk::kWrites, EIO);
  }
  rig.fs()->Forget(ino, 1);
  for (size_t d = 0; d < rig.disk_count(); ++d) EXPECT_EQ(rig.faulty(d)->injected(), 0u) << d;
  EXPECT_EQ(rig.fs()->GetAttr(ino).error(), ENOENT);
}

// An unlinked inode the kernel still refers to can be opened again (by handle) and get data
// again: that data goes at its last close, as the first did.
TEST_F(FileSystemTest, AnUnlinkedFileOpenedAgainLosesItsNewDataAtItsLastClose) {
  uint64_t ino = CreateWith("again", Pattern(100'000, 'g'));
  ASSERT_TRUE(rig_.fs()->Release(ino).ok());
  ASSERT_TRUE(rig_.fs()->Unlink(kRootIno, "again").ok());
  EXPECT_FALSE(rig_.HasObjects(ino));
  ASSERT_TRUE(rig_.fs()->Open(ino, O_RDWR).ok());
  const std::string data = Pattern(70'000, 'h');
  ASSERT_TRUE(rig_.fs()->Write(ino, 0, data.data(), data.size()).ok());
  EXPECT_TRUE(rig_.HasObjects(ino));
  ASSERT_TRUE(rig_.fs()->Release(ino).ok());
  EXPECT_FALSE(rig_.HasObjects(ino));
  rig_.fs()->Forget(ino, 1);
  EXPECT_EQ(rig_.fs()->GetAttr(ino).error(), ENOENT);
}

// write(2) changes the size and times in memory only (meta/inode_cache.h); the last close
// writes them back, so a daemon killed after close(2) keeps the file's size, without fsync and
// without the write-back timer (off here).
TEST(FileSystemWriteBackTest, TheLastCloseWritesTheSizeBackToTheStore) {
  VolumeRig rig;
  meta::MetaStoreOptions options;
  options.write_back_interval_ms = 0;
  rig.set_store_options(options);
  ASSERT_TRUE(rig.Open().ok());
  int images = 0;
  auto stored_size = [&](uint64_t ino) -> uint64_t {
    auto image = meta::testing::OpenCrashImage(rig.meta_path(),
                                               rig.dir().Sub("image" + std::to_string(images++)),
                                               rig.label().volume_uuid);
    if (image == nullptr) return UINT64_MAX;  // OpenCrashImage failed the test
    auto inode = image->Get(ino);
    EXPECT_TRUE(inode.ok()) << inode.status().ToString();
    return inode.ok() ? inode->size : UINT64_MAX;
  };
  auto opened = rig.fs()->Create(Caller{}, kRootIno, "f", 0644, O_RDWR);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  const uint64_t ino = opened->inode.ino;
  const std::string data = Pattern(100'000, 'w');
  ASSERT_TRUE(rig.fs()->Write(ino, 0, data.data(), data.size()).ok());
  ASSERT_EQ(stored_size(ino), 0u) << "the write itself reached the store: nothing left to test";
  ASSERT_TRUE(rig.fs()->Release(ino).ok());
  EXPECT_EQ(stored_size(ino), data.size());
}

TEST_F(FileSystemTest, RecoverReclaimsFilesUnlinkedWhileOpenWhenTheDaemonDied) {
  uint64_t ino = CreateWith("orphan", Pattern(500'000, 'd'));
  uint64_t kept = CreateWith("kept", Pattern(100'000, 'e'));
  ASSERT_TRUE(rig_.fs()->Unlink(kRootIno, "orphan").ok());
  ASSERT_TRUE(rig_.HasObjects(ino));
  rig_.Reopen();  // the handle was never released: a crash
  ASSERT_TRUE(rig_.fs()->Recover().ok());
  EXPECT_FALSE(rig_.HasObjects(ino));
  EXPECT_EQ(rig_.fs()->GetAttr(ino).error(), ENOENT);
  EXPECT_EQ(ReadAll(kept), Pattern(100'000, 'e'));
}

// A namespace operation succeeds or fails as a whole: once the name is gone, a disk that
// cannot free the data does not turn the unlink or rename into an error (the program would
// think its file still there); the inode stays an orphan and the next mount frees it.
TEST(FileSystemFaultTest, UnlinkAndRenameOverSucceedWhenTheDataCannotBeFreedYet) {
  FsRig rig(4, 64 * 1024, /*faulty=*/true);
  std::vector<uint64_t> inos;
  for (const char* name : {"unlinked", "replaced", "mover"}) {
    auto opened = rig.fs()->Create(Caller{}, kRootIno, name, 0644, O_RDWR);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    const std::string data = Pattern(300'000, name[0]);
    ASSERT_TRUE(rig.fs()->Write(opened->inode.ino, 0, data.data(), data.size()).ok());
    ASSERT_TRUE(rig.fs()->Release(opened->inode.ino).ok());
    inos.push_back(opened->inode.ino);
  }
  rig.faulty(2)->FailAlways(stripe::FaultyDisk::kWrites, EIO);
  EXPECT_TRUE(rig.fs()->Unlink(kRootIno, "unlinked").ok());
  EXPECT_TRUE(rig.fs()->Rename(kRootIno, "mover", kRootIno, "replaced", 0).ok());
  EXPECT_EQ(rig.fs()->Lookup(kRootIno, "unlinked").error(), ENOENT);
  EXPECT_EQ(rig.fs()->Lookup(kRootIno, "mover").error(), ENOENT);
  auto replaced = rig.fs()->Lookup(kRootIno, "replaced");
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(replaced->ino, inos[2]);
  EXPECT_TRUE(rig.disk(2)->Stat(inos[0]).ok());  // the data could not go yet
  rig.faulty(2)->Heal();
  rig.Reopen();
  ASSERT_TRUE(rig.fs()->Recover().ok());
  EXPECT_FALSE(rig.HasObjects(inos[0]));
  EXPECT_FALSE(rig.HasObjects(inos[1]));
  EXPECT_TRUE(rig.HasObjects(inos[2]));
}

TEST_F(FileSystemTest, RenameOverAnOpenFileKeepsItReadableAndReclaimsItAtClose) {
  uint64_t victim = CreateWith("victim", Pattern(70'000, 'f'));
  uint64_t mover = CreateWith("mover", Pattern(80'000, 'g'));
  ASSERT_TRUE(rig_.fs()->Release(mover).ok());
  ASSERT_TRUE(rig_.fs()->Rename(kRootIno, "mover", kRootIno, "victim", 0).ok());
  EXPECT_EQ(rig_.fs()->Lookup(kRootIno, "victim")->ino, mover);
  EXPECT_EQ(ReadAll(victim), Pattern(70'000, 'f'));
  ASSERT_TRUE(rig_.fs()->Release(victim).ok());
  EXPECT_FALSE(rig_.HasObjects(victim));
  rig_.fs()->Forget(victim, 1);
  EXPECT_EQ(rig_.fs()->GetAttr(victim).error(), ENOENT);
}

TEST_F(FileSystemTest, TruncateShrinksTheObjectsAndGrowthReadsZeros) {
  std::string data = Pattern(400'000, 'h');
  uint64_t ino = CreateWith("t", data);
  meta::AttrChange shrink;
  shrink.size = 100'000;
  ASSERT_TRUE(rig_.fs()->SetAttr(ino, shrink).ok());
  EXPECT_EQ(rig_.ObjectsOf(ino), 100'000u);
  meta::AttrChange grow;
  grow.size = 300'000;
  ASSERT_TRUE(rig_.fs()->SetAttr(ino, grow).ok());
  std::string expected = data.substr(0, 100'000) + std::string(200'000, '\0');
  EXPECT_EQ(ReadAll(ino), expected);
}

TEST_F(FileSystemTest, OpenWithTruncEmptiesTheFile) {
  uint64_t ino = CreateWith("o", Pattern(90'000, 'i'));
  ASSERT_TRUE(rig_.fs()->Open(ino, O_WRONLY | O_TRUNC).ok());
  EXPECT_EQ(rig_.fs()->GetAttr(ino)->size, 0u);
  EXPECT_EQ(rig_.ObjectsOf(ino), 0u);
}

TEST_F(FileSystemTest, SetGroupIdDirectoryPassesItsGroupOn) {
  auto dir = rig_.fs()->MakeNode(Caller{0, 0, 0}, kRootIno, "shared", S_IFDIR | 02775, 0);
  ASSERT_TRUE(dir.ok());
  meta::AttrChange group;
  group.gid = 4242;
  ASSERT_TRUE(rig_.fs()->SetAttr(dir->ino, group).ok());
  auto file = rig_.fs()->MakeNode(Caller{1000, 1000, 0}, dir->ino, "f", S_IFREG | 0644, 0);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->gid, 4242u);
  auto sub = rig_.fs()->MakeNode(Caller{1000, 1000, 0}, dir->ino, "d", S_IFDIR | 0755, 0);
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(sub->gid, 4242u);
  EXPECT_TRUE(sub->mode & S_ISGID);
  auto plain = rig_.fs()->MakeNode(Caller{1000, 1000, 0}, kRootIno, "p", S_IFREG | 0644, 0);
  EXPECT_EQ(plain->gid, 1000u);
}

TEST_F(FileSystemTest, RemovedDirectoryKeepsItsRecordUntilTheKernelForgetsIt) {
  auto dir = rig_.fs()->MakeNode(Caller{}, kRootIno, "d", S_IFDIR | 0755, 0);
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(rig_.fs()->Rmdir(kRootIno, "d").ok());
  // Somebody's cwd: stat still works and shows no links.
  auto removed = rig_.fs()->GetAttr(dir->ino);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->nlink, 0u);
  rig_.fs()->Forget(dir->ino, 1);
  EXPECT_EQ(rig_.fs()->GetAttr(dir->ino).error(), ENOENT);
}

TEST_F(FileSystemTest, ReadMovesAnOldAtimeOnlyAsRelatimeSays) {
  uint64_t ino = CreateWith("a", "hello");
  meta::AttrChange old;
  old.atime = meta::Time{1'000'000'000, 0};
  old.now = meta::Time::Now();
  ASSERT_TRUE(rig_.fs()->SetAttr(ino, old).ok());
  ReadAll(ino);
  auto after = rig_.fs()->GetAttr(ino);
  EXPECT_GT(after->atime.sec, 1'000'000'000);
  // Now newer than mtime and ctime, and fresh: a second read leaves it alone.
  meta::Time first = after->atime;
  ReadAll(ino);
  EXPECT_EQ(rig_.fs()->GetAttr(ino)->atime.sec, first.sec);
  EXPECT_EQ(rig_.fs()->GetAttr(ino)->atime.nsec, first.nsec);
}

TEST_F(FileSystemTest, DataSurvivesReopen) {
  std::string data = Pattern(777'777, 'j');
  uint64_t ino = CreateWith("persist", data);
  ASSERT_TRUE(rig_.fs()->Release(ino).ok());
  rig_.Reopen();
  auto found = rig_.fs()->Lookup(kRootIno, "persist");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->ino, ino);
  EXPECT_EQ(ReadAll(ino), data);
}

TEST_F(FileSystemTest, StatFsReportsTheDisksAndTheInodes) {
  auto st = rig_.fs()->StatFs();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->f_bsize, 64u * 1024);
  EXPECT_EQ(st->f_namemax, 255u);
  EXPECT_GT(st->f_blocks, 0u);
  EXPECT_GE(st->f_files, 1u);
}

TEST_F(FileSystemTest, WritePastTheLargestFileSizeIsEFBIG) {
  uint64_t ino = CreateWith("big", "");
  char byte = 'x';
  EXPECT_EQ(rig_.fs()->Write(ino, uint64_t{INT64_MAX}, &byte, 1).error(), EFBIG);
}

}  // namespace
}  // namespace tipfs::testing
