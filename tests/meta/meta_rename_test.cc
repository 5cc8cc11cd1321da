// MetaStore::Rename: every case of rename(2)/renameat2(2), with the errnos ext4 gives.
#include <sys/stat.h>

#include <cstdio>
#include <optional>
#include <string>

#include "tests/meta/meta_test_util.h"

namespace tipfs::meta::testing {
namespace {

class RenameTest : public MetaStoreTest {
 protected:
  Result<std::optional<Inode>> Move(Ino from, const std::string& name, Ino to,
                                    const std::string& new_name, unsigned flags = 0,
                                    Time now = T(500)) {
    return store_->Rename(from, name, to, new_name, flags, now);
  }
  Ino Find(Ino parent, const std::string& name) {
    auto inode = store_->Lookup(parent, name);
    return inode.ok() ? inode->ino : 0;
  }
};

TEST_F(RenameTest, PlainRenameWithinADirectory) {
  Ino f = Make(kRootIno, "old", File(T(1)));
  auto r = Move(kRootIno, "old", kRootIno, "new");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->has_value());
  EXPECT_EQ(Find(kRootIno, "old"), 0u);
  EXPECT_EQ(Find(kRootIno, "new"), f);
  EXPECT_EQ(MustGet(f).ctime.sec, 500);  // ext4 sets the renamed inode's ctime
  EXPECT_EQ(MustGet(f).mtime.sec, 1);
  EXPECT_EQ(MustGet(kRootIno).mtime.sec, 500);
  EXPECT_EQ(MustGet(f).nlink, 1u);
  EXPECT_EQ(Move(kRootIno, "old", kRootIno, "x").error(), ENOENT);
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(RenameTest, FileAcrossDirectoriesTouchesBothParents) {
  Ino a = Make(kRootIno, "a", Dir(T(1)));
  Ino b = Make(kRootIno, "b", Dir(T(1)));
  Ino f = Make(a, "f", File(T(1)));
  ASSERT_TRUE(Move(a, "f", b, "g", 0, T(9)).ok());
  EXPECT_EQ(Find(b, "g"), f);
  EXPECT_EQ(MustGet(a).mtime.sec, 9);
  EXPECT_EQ(MustGet(b).ctime.sec, 9);
  EXPECT_EQ(MustGet(a).nlink, 2u);
  EXPECT_EQ(MustGet(b).nlink, 2u);
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(RenameTest, DirectoryAcrossParentsMovesItsDotDotLink) {
  Ino a = Make(kRootIno, "a", Dir());
  Ino b = Make(kRootIno, "b", Dir());
  Ino d = Make(a, "d", Dir());
  Make(d, "inner", File());
  EXPECT_EQ(MustGet(a).nlink, 3u);
  ASSERT_TRUE(Move(a, "d", b, "d2").ok());
  EXPECT_EQ(MustGet(a).nlink, 2u);
  EXPECT_EQ(MustGet(b).nlink, 3u);
  EXPECT_EQ(MustGet(d).parent, b);
  EXPECT_EQ(store_->Lookup(d, "..")->ino, b);
  EXPECT_EQ(Names(d), std::vector<std::string>{"inner"});
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(RenameTest, ReplacingAFileOrphansItAtItsLastLink) {
  Ino src = Make(kRootIno, "src", File());
  Ino dst = Make(kRootIno, "dst", File());
  auto r = Move(kRootIno, "src", kRootIno, "dst");
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->ino, dst);
  EXPECT_EQ((*r)->nlink, 0u);
  EXPECT_EQ((*r)->ctime.sec, 500);
  EXPECT_EQ(Find(kRootIno, "dst"), src);
  EXPECT_EQ(*store_->ListOrphans(), std::vector<Ino>{dst});
  EXPECT_TRUE(StoreIsConsistent(*store_));

  // A target with another name left is not an orphan.
  Ino keep = Make(kRootIno, "keep", File());
  ASSERT_TRUE(store_->Link(keep, kRootIno, "keep2", T(1)).ok());
  r = Move(kRootIno, "dst", kRootIno, "keep");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->nlink, 1u);
  EXPECT_EQ(MustGet(keep).nlink, 1u);
  EXPECT_EQ(*store_->ListOrphans(), std::vector<Ino>{dst});
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(RenameTest, ReplacingAnEmptyDirectory) {
  Ino a = Make(kRootIno, "a", Dir());
  Ino b = Make(kRootIno, "b", Dir());
  Ino src = Make(a, "src", Dir());
  Ino dst = Make(b, "dst", Dir());
  auto r = Move(a, "src", b, "dst");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->ino, dst);
  EXPECT_EQ((*r)->nlink, 0u);
  EXPECT_EQ(Find(b, "dst"), src);
  EXPECT_EQ(MustGet(a).nlink, 2u);
  EXPECT_EQ(MustGet(b).nlink, 3u);  // one subdirectory replaced by another
  EXPECT_EQ(*store_->ListOrphans(), std::vector<Ino>{dst});
  EXPECT_TRUE(StoreIsConsistent(*store_));

  // Same parent: the parent loses one subdirectory.
  Make(kRootIno, "x", Dir());
  Make(kRootIno, "y", Dir());
  EXPECT_EQ(MustGet(kRootIno).nlink, 6u);
  ASSERT_TRUE(Move(kRootIno, "x", kRootIno, "y").ok());
  EXPECT_EQ(MustGet(kRootIno).nlink, 5u);
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(RenameTest, NonEmptyDirectoryTargetIsRefused) {
  Make(kRootIno, "src", Dir());
  Ino dst = Make(kRootIno, "dst", Dir());
  Make(dst, "content", File());
  EXPECT_EQ(Move(kRootIno, "src", kRootIno, "dst").error(), ENOTEMPTY);
  EXPECT_EQ(Names(dst), std::vector<std::string>{"content"});
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(RenameTest, TypeMismatches) {
  Make(kRootIno, "file", File());
  Make(kRootIno, "dir", Dir());
  EXPECT_EQ(Move(kRootIno, "file", kRootIno, "dir").error(), EISDIR);
  EXPECT_EQ(Move(kRootIno, "dir", kRootIno, "file").error(), ENOTDIR);
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(RenameTest, DirectoryIntoItsOwnSubtreeIsEinval) {
  Ino a = Make(kRootIno, "a", Dir());
  Ino b = Make(a, "b", Dir());
  Ino c = Make(b, "c", Dir());
  EXPECT_EQ(Move(kRootIno, "a", c, "d").error(), EINVAL);
  EXPECT_EQ(Move(kRootIno, "a", b, "x").error(), EINVAL);
  EXPECT_EQ(Move(kRootIno, "a", a, "x").error(), EINVAL);
  EXPECT_EQ(Move(a, "b", c, "x").error(), EINVAL);
  // Onto an existing directory inside itself: still EINVAL (ext4: rename("a", "a/b")).
  EXPECT_EQ(Move(kRootIno, "a", a, "b").error(), EINVAL);
  EXPECT_EQ(Move(a, "b", b, "c").error(), EINVAL);
  // The target an ancestor of the source: ENOTEMPTY, even for a file source.
  Make(b, "f", File());
  EXPECT_EQ(Move(b, "f", a, "b").error(), ENOTEMPTY);
  EXPECT_EQ(Move(b, "c", kRootIno, "a").error(), ENOTEMPTY);
  EXPECT_EQ(Move(b, "f", a, "b", RENAME_EXCHANGE).error(), EINVAL);
  EXPECT_EQ(Move(kRootIno, "a", b, "c", RENAME_EXCHANGE).error(), EINVAL);
  EXPECT_EQ(Move(b, "c", kRootIno, "a", RENAME_EXCHANGE).error(), EINVAL);
  // Moving up (out of its own subtree) is fine.
  ASSERT_TRUE(Move(b, "c", kRootIno, "c").ok());
  EXPECT_EQ(MustGet(c).parent, kRootIno);
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(RenameTest, NoReplace) {
  Ino src = Make(kRootIno, "src", File());
  Ino dst = Make(kRootIno, "dst", File());
  EXPECT_EQ(Move(kRootIno, "src", kRootIno, "dst", RENAME_NOREPLACE).error(), EEXIST);
  EXPECT_EQ(Move(kRootIno, "src", kRootIno, "src", RENAME_NOREPLACE).error(), EEXIST);
  EXPECT_EQ(Find(kRootIno, "dst"), dst);
  ASSERT_TRUE(Move(kRootIno, "src", kRootIno, "free", RENAME_NOREPLACE).ok());
  EXPECT_EQ(Find(kRootIno, "free"), src);
  EXPECT_EQ(Move(kRootIno, "free", kRootIno, "x", RENAME_NOREPLACE | RENAME_EXCHANGE).error(),
            EINVAL);
  EXPECT_EQ(Move(kRootIno, "free", kRootIno, "x", 1u << 7).error(), EINVAL);
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(RenameTest, ExchangeTwoFiles) {
  Ino x = Make(kRootIno, "x", File(T(1)));
  Ino y = Make(kRootIno, "y", File(T(1)));
  auto r = Move(kRootIno, "x", kRootIno, "y", RENAME_EXCHANGE, T(7));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->has_value());
  EXPECT_EQ(Find(kRootIno, "x"), y);
  EXPECT_EQ(Find(kRootIno, "y"), x);
  EXPECT_EQ(MustGet(x).ctime.sec, 7);
  EXPECT_EQ(MustGet(y).ctime.sec, 7);
  EXPECT_EQ(MustGet(x).nlink, 1u);
  EXPECT_TRUE(store_->ListOrphans()->empty());
  EXPECT_EQ(Move(kRootIno, "x", kRootIno, "missing", RENAME_EXCHANGE).error(), ENOENT);
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(RenameTest, ExchangeDirectoryAndFileAcrossParents) {
  Ino a = Make(kRootIno, "a", Dir());
  Ino b = Make(kRootIno, "b", Dir());
  Ino d = Make(a, "d", Dir());
  Make(d, "inside", File());
  Ino f = Make(b, "f", File());
  EXPECT_EQ(MustGet(a).nlink, 3u);
  EXPECT_EQ(MustGet(b).nlink, 2u);
  ASSERT_TRUE(Move(a, "d", b, "f", RENAME_EXCHANGE).ok());
  EXPECT_EQ(Find(a, "d"), f);
  EXPECT_EQ(Find(b, "f"), d);
  EXPECT_EQ(MustGet(d).parent, b);
  EXPECT_EQ(MustGet(a).nlink, 2u);
  EXPECT_EQ(MustGet(b).nlink, 3u);
  EXPECT_EQ(Names(d), std::vector<std::string>{"inside"});
  EXPECT_TRUE(StoreIsConsistent(*store_));

  // And back the other way, with the file as the source.
  ASSERT_TRUE(Move(a, "d", b, "f", RENAME_EXCHANGE).ok());
  EXPECT_EQ(MustGet(d).parent, a);
  EXPECT_EQ(MustGet(a).nlink, 3u);
  EXPECT_EQ(MustGet(b).nlink, 2u);
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(RenameTest, ExchangeTwoDirectoriesAcrossParents) {
  Ino a = Make(kRootIno, "a", Dir());
  Ino b = Make(kRootIno, "b", Dir());
  Ino da = Make(a, "d", Dir());
  Ino db = Make(b, "e", Dir());
  Make(b, "e2", Dir());
  ASSERT_TRUE(Move(a, "d", b, "e", RENAME_EXCHANGE).ok());
  EXPECT_EQ(MustGet(da).parent, b);
  EXPECT_EQ(MustGet(db).parent, a);
  EXPECT_EQ(MustGet(a).nlink, 3u);
  EXPECT_EQ(MustGet(b).nlink, 4u);
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(RenameTest, HardLinksOfOneInodeAreLeftAlone) {
  Ino f = Make(kRootIno, "f", File(T(1)));
  ASSERT_TRUE(store_->Link(f, kRootIno, "g", T(1)).ok());
  for (unsigned flags : {0u, unsigned{RENAME_EXCHANGE}}) {
    auto r = Move(kRootIno, "f", kRootIno, "g", flags, T(99));
    ASSERT_TRUE(r.ok()) << flags;
    EXPECT_FALSE(r->has_value());
  }
  EXPECT_EQ(Move(kRootIno, "f", kRootIno, "g", RENAME_NOREPLACE).error(), EEXIST);
  // Nothing happened: both names remain, nothing changed time.
  EXPECT_EQ(Find(kRootIno, "f"), f);
  EXPECT_EQ(Find(kRootIno, "g"), f);
  EXPECT_EQ(MustGet(f).nlink, 2u);
  EXPECT_EQ(MustGet(f).ctime.sec, 1);
  // Onto itself.
  ASSERT_TRUE(Move(kRootIno, "f", kRootIno, "f").ok());
  Ino d = Make(kRootIno, "d", Dir());
  ASSERT_TRUE(Move(kRootIno, "d", kRootIno, "d").ok());
  EXPECT_EQ(Find(kRootIno, "d"), d);
  EXPECT_TRUE(store_->ListOrphans()->empty());
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

TEST_F(RenameTest, IntoARemovedDirectoryIsEnoent) {
  Ino gone = Make(kRootIno, "gone", Dir());
  Make(kRootIno, "f", File());
  ASSERT_TRUE(store_->Rmdir(kRootIno, "gone", T(1)).ok());
  EXPECT_EQ(Move(kRootIno, "f", gone, "f").error(), ENOENT);
  EXPECT_TRUE(StoreIsConsistent(*store_));
}

}  // namespace
}  // namespace tipfs::meta::testing
