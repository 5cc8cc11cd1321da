// MetaStore: create/lookup/get, node types, names, link counts, times, orphans, setattr, writes.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "tests/meta/meta_test_util.h"

namespace tipfs::meta::testing {
namespace {

TEST_F(MetaStoreTest, RootIsAnEmptyDirectoryOwnedByCreator) {
  Inode root = MustGet(kRootIno);
  EXPECT_EQ(root.mode, static_cast<uint32_t>(S_IFDIR | 0755));
  EXPECT_EQ(root.uid, 1000u);
  EXPECT_EQ(root.gid, 1000u);
  EXPECT_EQ(root.nlink, 2u);
  EXPECT_EQ(root.parent, kRootIno);
  EXPECT_TRUE(Names(kRootIno).empty());
  EXPECT_EQ(store_->GetCounts()->inodes, 1u);
  EXPECT_TRUE(store_->ListOrphans()->empty());
}

// The kernel looks a name up before it creates it: the create after a negative lookup does not
// read the entry from RocksDB again, unless something may have added the name since.
TEST_F(MetaStoreTest, CreateAfterANegativeLookupReadsNoEntryAgain) {
  EXPECT_EQ(store_->Lookup(kRootIno, "x").error(), ENOENT);
  const Activity before = store_->GetActivity();
  auto x = store_->MakeNode(kRootIno, "x", File());
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  EXPECT_EQ(store_->GetActivity().point_reads, before.point_reads);
  // The note is used once: a second create of the name reads the entry and finds it.
  EXPECT_EQ(store_->MakeNode(kRootIno, "x", File()).error(), EEXIST);
  // A name another operation added after the lookup is not taken for absent.
  EXPECT_EQ(store_->Lookup(kRootIno, "y").error(), ENOENT);
  ASSERT_TRUE(store_->Link(x->ino, kRootIno, "y", T(2)).ok());
  EXPECT_EQ(store_->MakeNode(kRootIno, "y", File()).error(), EEXIST);
  EXPECT_EQ(store_->Lookup(kRootIno, "z").error(), ENOENT);
  ASSERT_TRUE(store_->Rename(kRootIno, "y", kRootIno, "z", 0, T(3)).ok());
  EXPECT_EQ(store_->MakeNode(kRootIno, "z", File()).error(), EEXIST);
  // Nor is a note of another directory.
  auto d = store_->MakeNode(kRootIno, "d", Dir());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(store_->Lookup(d->ino, "x").error(), ENOENT);
  EXPECT_EQ(store_->MakeNode(kRootIno, "x", File()).error(), EEXIST);
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(MetaStoreTest, MakeNodeThenLookupAndGetAgree) {
  auto made = store_->MakeNode(kRootIno, "hello.txt", File(T(42)));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_GT(made->ino, kRootIno);
  EXPECT_EQ(made->mode, static_cast<uint32_t>(S_IFREG | 0644));
  EXPECT_EQ(made->nlink, 1u);
  EXPECT_EQ(made->size, 0u);
  EXPECT_EQ(made->atime.sec, 42);
  EXPECT_EQ(made->mtime.sec, 42);
  EXPECT_EQ(made->ctime.sec, 42);

  auto looked = store_->Lookup(kRootIno, "hello.txt");
  ASSERT_TRUE(looked.ok());
  EXPECT_EQ(looked->ino, made->ino);
  Inode got = MustGet(made->ino);
  EXPECT_EQ(got.mode, made->mode);
  EXPECT_EQ(got.uid, 1000u);
  EXPECT_EQ(Nanos(got.ctime), Nanos(T(42)));

  // The parent's content changed at 42.
  Inode root = MustGet(kRootIno);
  EXPECT_EQ(root.mtime.sec, 42);
  EXPECT_EQ(root.ctime.sec, 42);
  EXPECT_EQ(root.nlink, 2u);  // a file does not add a link to its parent
  EXPECT_EQ(store_->GetCounts()->inodes, 2u);
}

TEST_F(MetaStoreTest, LookupErrors) {
  Ino file = Make(kRootIno, "f", File());
  EXPECT_EQ(store_->Lookup(kRootIno, "missing").error(), ENOENT);
  EXPECT_EQ(store_->Lookup(file, "x").error(), ENOTDIR);
  EXPECT_EQ(store_->Lookup(999, "x").error(), ENOENT);
  EXPECT_EQ(store_->Lookup(kRootIno, std::string(256, 'n')).error(), ENAMETOOLONG);
  EXPECT_EQ(store_->Get(999).error(), ENOENT);
}

TEST_F(MetaStoreTest, LookupDotAndDotDot) {
  Ino a = Make(kRootIno, "a", Dir());
  Ino b = Make(a, "b", Dir());
  EXPECT_EQ(store_->Lookup(b, ".")->ino, b);
  EXPECT_EQ(store_->Lookup(b, "..")->ino, a);
  EXPECT_EQ(store_->Lookup(kRootIno, "..")->ino, kRootIno);
}

TEST_F(MetaStoreTest, EveryNodeType) {
  NewNode dev = Node(S_IFCHR | 0600);
  dev.rdev = makedev(1, 3);
  Ino c = Make(kRootIno, "null", dev);
  Ino p = Make(kRootIno, "pipe", Node(S_IFIFO | 0600));
  Ino s = Make(kRootIno, "sock", Node(S_IFSOCK | 0600));
  Ino b = Make(kRootIno, "blk", Node(S_IFBLK | 0600));
  Ino l = Make(kRootIno, "link", Symlink("some/where"));
  EXPECT_EQ(MustGet(c).rdev, makedev(1, 3));
  EXPECT_TRUE(S_ISFIFO(MustGet(p).mode));
  EXPECT_TRUE(S_ISSOCK(MustGet(s).mode));
  EXPECT_TRUE(S_ISBLK(MustGet(b).mode));
  Inode link = MustGet(l);
  EXPECT_TRUE(S_ISLNK(link.mode));
  EXPECT_EQ(link.size, 10u);
  EXPECT_EQ(*store_->ReadLink(l), "some/where");
  EXPECT_EQ(store_->ReadLink(c).error(), EINVAL);
  EXPECT_EQ(store_->MakeNode(kRootIno, "empty", Symlink("")).error(), ENOENT);
  EXPECT_EQ(store_->MakeNode(kRootIno, "bad", Node(0644)).error(), EINVAL);

  auto entries = store_->ListDir(kRootIno);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 5u);
  EXPECT_EQ((*entries)[0].name, "blk");
  EXPECT_EQ((*entries)[0].type, static_cast<uint32_t>(S_IFBLK));
  EXPECT_EQ((*entries)[1].name, "link");
  EXPECT_EQ((*entries)[1].type, static_cast<uint32_t>(S_IFLNK));
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(MetaStoreTest, ListDirIsSortedByNameAndComplete) {
  Ino d = Make(kRootIno, "d", Dir());
  std::vector<std::string> expected;
  for (int i = 0; i < 300; ++i) {
    std::string name = "n" + std::to_string((i * 7919) % 300);
    Make(d, name, File());
    expected.push_back(name);
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Names(d), expected);
  // A sibling directory's entries do not leak in (keys of ino d and d+1 are adjacent).
  EXPECT_TRUE(Names(kRootIno) == std::vector<std::string>{"d"});
  EXPECT_EQ(store_->ListDir(MustGet(store_->Lookup(d, "n1")->ino).ino).error(), ENOTDIR);
  EXPECT_EQ(store_->ListDir(12345).error(), ENOENT);
}

TEST_F(MetaStoreTest, NameRules) {
  Ino file = Make(kRootIno, "f", File());
  std::string longest(255, 'x');
  EXPECT_TRUE(store_->MakeNode(kRootIno, longest, File()).ok());
  std::string too_long(256, 'x');
  EXPECT_EQ(store_->MakeNode(kRootIno, too_long, File()).error(), ENAMETOOLONG);
  EXPECT_EQ(store_->MakeNode(kRootIno, too_long, Dir()).error(), ENAMETOOLONG);
  EXPECT_EQ(store_->Link(file, kRootIno, too_long, T(1)).error(), ENAMETOOLONG);
  EXPECT_EQ(store_->Unlink(kRootIno, too_long, T(1)).error(), ENAMETOOLONG);
  EXPECT_EQ(store_->Rmdir(kRootIno, too_long, T(1)).error(), ENAMETOOLONG);
  EXPECT_EQ(store_->Rename(kRootIno, "f", kRootIno, too_long, 0, T(1)).error(), ENAMETOOLONG);
  EXPECT_EQ(store_->MakeNode(kRootIno, "", File()).error(), ENOENT);
  EXPECT_EQ(store_->MakeNode(kRootIno, "a/b", File()).error(), EINVAL);
  EXPECT_EQ(store_->MakeNode(kRootIno, "f", File()).error(), EEXIST);
  EXPECT_EQ(store_->MakeNode(kRootIno, "f", Dir()).error(), EEXIST);
  // A path through a file.
  EXPECT_EQ(store_->MakeNode(file, "x", File()).error(), ENOTDIR);
  EXPECT_EQ(store_->MakeNode(file, "x", Dir()).error(), ENOTDIR);
  EXPECT_EQ(store_->Unlink(file, "x", T(1)).error(), ENOTDIR);
  EXPECT_EQ(store_->Rmdir(file, "x", T(1)).error(), ENOTDIR);
  EXPECT_EQ(store_->Rename(file, "x", kRootIno, "y", 0, T(1)).error(), ENOTDIR);
  EXPECT_EQ(store_->Rename(kRootIno, "f", file, "y", 0, T(1)).error(), ENOTDIR);
  EXPECT_EQ(store_->Link(file, file, "y", T(1)).error(), ENOTDIR);
  EXPECT_EQ(store_->MakeNode(777, "x", File()).error(), ENOENT);
}

TEST_F(MetaStoreTest, DotNamesGiveLinuxErrnos) {
  Ino file = Make(kRootIno, "f", File());
  Make(kRootIno, "d", Dir());
  // Values observed on ext4: mkdir/mknod/symlink/link onto "." or "..": EEXIST.
  for (const char* dot : {".", ".."}) {
    EXPECT_EQ(store_->MakeNode(kRootIno, dot, Dir()).error(), EEXIST) << dot;
    EXPECT_EQ(store_->MakeNode(kRootIno, dot, File()).error(), EEXIST) << dot;
    EXPECT_EQ(store_->Link(file, kRootIno, dot, T(1)).error(), EEXIST) << dot;
    EXPECT_EQ(store_->Unlink(kRootIno, dot, T(1)).error(), EISDIR) << dot;
    EXPECT_EQ(store_->Rename(kRootIno, dot, kRootIno, "z", 0, T(1)).error(), EBUSY) << dot;
    EXPECT_EQ(store_->Rename(kRootIno, "f", kRootIno, dot, 0, T(1)).error(), EBUSY) << dot;
    EXPECT_EQ(store_->Rename(kRootIno, "f", kRootIno, dot, RENAME_NOREPLACE, T(1)).error(), EEXIST)
        << dot;
    EXPECT_EQ(store_->Rename(kRootIno, dot, kRootIno, "z", RENAME_NOREPLACE, T(1)).error(), EBUSY)
        << dot;
  }
  EXPECT_EQ(store_->Rmdir(kRootIno, ".", T(1)).error(), EINVAL);
  EXPECT_EQ(store_->Rmdir(kRootIno, "..", T(1)).error(), ENOTEMPTY);
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(MetaStoreTest, LinkCountsFollowMkdirRmdirLinkUnlink) {
  Ino a = Make(kRootIno, "a", Dir());
  EXPECT_EQ(MustGet(kRootIno).nlink, 3u);
  EXPECT_EQ(MustGet(a).nlink, 2u);
  EXPECT_EQ(MustGet(a).parent, kRootIno);
  Ino b = Make(a, "b", Dir());
  Make(a, "c", Dir());
  EXPECT_EQ(MustGet(a).nlink, 4u);
  EXPECT_EQ(MustGet(b).parent, a);

  Ino f = Make(a, "f", File());
  auto linked = store_->Link(f, kRootIno, "f2", T(200));
  ASSERT_TRUE(linked.ok()) << linked.status().ToString();
  EXPECT_EQ(linked->nlink, 2u);
  EXPECT_EQ(linked->ctime.sec, 200);
  EXPECT_EQ(MustGet(kRootIno).mtime.sec, 200);
  EXPECT_EQ(MustGet(kRootIno).nlink, 3u);  // a hard link to a file adds none to the directory
  EXPECT_EQ(store_->Lookup(kRootIno, "f2")->ino, f);
  EXPECT_TRUE(StoreIsConsistent(*store_));

  auto removed = store_->Rmdir(a, "b", T(300));
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(removed->ino, b);
  EXPECT_EQ(removed->nlink, 0u);
  EXPECT_EQ(MustGet(a).nlink, 3u);
  EXPECT_EQ(MustGet(a).mtime.sec, 300);
  EXPECT_EQ(MustGet(a).ctime.sec, 300);

  auto unlinked = store_->Unlink(a, "f", T(400));
  ASSERT_TRUE(unlinked.ok());
  EXPECT_EQ(unlinked->nlink, 1u);
  EXPECT_EQ(unlinked->ctime.sec, 400);
  EXPECT_EQ(MustGet(f).nlink, 1u);
  EXPECT_EQ(store_->Lookup(a, "f").error(), ENOENT);
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(MetaStoreTest, RemovalErrors) {
  Ino d = Make(kRootIno, "d", Dir());
  Ino f = Make(d, "f", File());
  EXPECT_EQ(store_->Rmdir(kRootIno, "d", T(1)).error(), ENOTEMPTY);
  EXPECT_EQ(store_->Rmdir(d, "f", T(1)).error(), ENOTDIR);
  EXPECT_EQ(store_->Unlink(kRootIno, "d", T(1)).error(), EISDIR);
  EXPECT_EQ(store_->Unlink(kRootIno, "nothing", T(1)).error(), ENOENT);
  EXPECT_EQ(store_->Rmdir(kRootIno, "nothing", T(1)).error(), ENOENT);
  EXPECT_EQ(store_->Link(d, kRootIno, "d2", T(1)).error(), EPERM);
  EXPECT_EQ(store_->Link(f, kRootIno, "d", T(1)).error(), EEXIST);
  EXPECT_EQ(store_->Link(4242, kRootIno, "x", T(1)).error(), ENOENT);
  EXPECT_EQ(MustGet(f).nlink, 1u);
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(MetaStoreTest, OrphansAppearAtZeroLinksAndGoAtDeleteInode) {
  Ino f = Make(kRootIno, "f", File());
  ASSERT_TRUE(store_->Link(f, kRootIno, "g", T(1)).ok());
  ASSERT_TRUE(store_->SetXattr(f, "user.tag", "v", 0, T(1)).ok());
  ASSERT_TRUE(store_->Unlink(kRootIno, "f", T(2)).ok());
  EXPECT_TRUE(store_->ListOrphans()->empty());       // still one link
  EXPECT_EQ(store_->DeleteInode(f).error(), EBUSY);  // a linked inode is never deleted

  auto last = store_->Unlink(kRootIno, "g", T(3));
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->nlink, 0u);
  EXPECT_EQ(*store_->ListOrphans(), std::vector<Ino>{f});
  // An orphan is still readable (an open file keeps its attributes) but has no names.
  EXPECT_EQ(MustGet(f).nlink, 0u);
  EXPECT_EQ(*store_->GetXattr(f, "user.tag"), "v");
  EXPECT_EQ(store_->Link(f, kRootIno, "again", T(4)).error(), ENOENT);
  EXPECT_TRUE(StoreIsConsistent(*store_));

  Ino l = Make(kRootIno, "l", Symlink("target"));
  Ino d = Make(kRootIno, "d", Dir());
  ASSERT_TRUE(store_->Unlink(kRootIno, "l", T(5)).ok());
  ASSERT_TRUE(store_->Rmdir(kRootIno, "d", T(5)).ok());
  EXPECT_EQ(*store_->ListOrphans(), (std::vector<Ino>{f, l, d}));
  EXPECT_EQ(store_->GetCounts()->inodes, 4u);
  // A removed directory that is still open accepts no new entries.
  EXPECT_EQ(store_->MakeNode(d, "x", File()).error(), ENOENT);

  for (Ino ino : {f, l, d}) ASSERT_TRUE(store_->DeleteInode(ino).ok()) << ino;
  EXPECT_TRUE(store_->ListOrphans()->empty());
  EXPECT_EQ(store_->Get(f).error(), ENOENT);
  EXPECT_EQ(store_->GetXattr(f, "user.tag").error(), ENOENT);
  EXPECT_EQ(store_->ReadLink(l).error(), ENOENT);
  EXPECT_EQ(store_->DeleteInode(f).error(), ENOENT);
  EXPECT_EQ(store_->GetCounts()->inodes, 1u);
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(MetaStoreTest, SetAttrChangesOnlyWhatIsAsked) {
  Ino f = Make(kRootIno, "f", File(T(10)));
  AttrChange chmod;
  chmod.mode = S_IFDIR | 04711;  // the type bits are ignored
  chmod.now = T(20);
  auto after = store_->SetAttr(f, chmod);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->mode, static_cast<uint32_t>(S_IFREG | 04711));
  EXPECT_EQ(after->ctime.sec, 20);
  EXPECT_EQ(after->mtime.sec, 10);
  EXPECT_EQ(after->uid, 1000u);

  AttrChange chown;
  chown.uid = 0;
  chown.gid = 5;
  chown.now = T(30);
  after = store_->SetAttr(f, chown);
  EXPECT_EQ(after->uid, 0u);
  EXPECT_EQ(after->gid, 5u);
  EXPECT_EQ(after->mode, static_cast<uint32_t>(S_IFREG | 04711));

  AttrChange truncate;
  truncate.size = 12345;
  truncate.now = T(40);
  after = store_->SetAttr(f, truncate);
  EXPECT_EQ(after->size, 12345u);
  EXPECT_EQ(after->mtime.sec, 40);
  EXPECT_EQ(after->ctime.sec, 40);
  EXPECT_EQ(after->atime.sec, 10);

  AttrChange utimens;
  utimens.atime = Time{7, 8};
  utimens.mtime = Time{9, 10};
  utimens.now = T(50);
  after = store_->SetAttr(f, utimens);
  EXPECT_EQ(Nanos(after->atime), Nanos(Time{7, 8}));
  EXPECT_EQ(Nanos(after->mtime), Nanos(Time{9, 10}));
  EXPECT_EQ(after->ctime.sec, 50);
  EXPECT_EQ(after->size, 12345u);

  AttrChange nothing;
  nothing.now = T(60);
  EXPECT_EQ(store_->SetAttr(f, nothing)->ctime.sec, 50);

  Inode persisted = MustGet(f);
  EXPECT_EQ(persisted.size, 12345u);
  EXPECT_EQ(persisted.uid, 0u);

  AttrChange dir_truncate;
  dir_truncate.size = 0;
  EXPECT_EQ(store_->SetAttr(kRootIno, dir_truncate).error(), EISDIR);
  EXPECT_EQ(store_->SetAttr(999, chmod).error(), ENOENT);
}

TEST_F(MetaStoreTest, RecordWriteGrowsSizeAndNeverShrinksIt) {
  Ino f = Make(kRootIno, "f", File(T(1)));
  auto after = store_->RecordWrite(f, 4096, T(2));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->size, 4096u);
  EXPECT_EQ(after->mtime.sec, 2);
  EXPECT_EQ(after->ctime.sec, 2);
  EXPECT_EQ(store_->RecordWrite(f, 100, T(3))->size, 4096u);  // overwrite inside the file
  EXPECT_EQ(MustGet(f).mtime.sec, 3);
  EXPECT_EQ(store_->RecordWrite(f, uint64_t{1} << 40, T(4))->size, uint64_t{1} << 40);
  EXPECT_EQ(MustGet(f).size, uint64_t{1} << 40);
  EXPECT_EQ(MustGet(f).atime.sec, 1);
  EXPECT_EQ(store_->RecordWrite(999, 1, T(5)).error(), ENOENT);
  EXPECT_EQ(store_->RecordWrite(kRootIno, 1, T(5)).error(), EISDIR);
}

TEST_F(MetaStoreTest, InodeNumbersAreNeverReusedWithinASession) {
  Ino first = Make(kRootIno, "a", File());
  ASSERT_TRUE(store_->Unlink(kRootIno, "a", T(1)).ok());
  ASSERT_TRUE(store_->DeleteInode(first).ok());
  Ino second = Make(kRootIno, "a", File());
  EXPECT_GT(second, first);
  EXPECT_EQ(store_->MakeNode(kRootIno, "a", File()).error(), EEXIST);
  EXPECT_GT(Make(kRootIno, "b", File()), second);
}

}  // namespace
}  // namespace tipfs::meta::testing
