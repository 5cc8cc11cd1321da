// MetaStore extended attributes: XATTR_CREATE/XATTR_REPLACE, ENODATA, size limits, listing.
#include <sys/xattr.h>

#include <string>
#include <vector>

#include "tests/meta/meta_test_util.h"

namespace tipfs::meta::testing {
namespace {

using XattrTest = MetaStoreTest;

TEST_F(XattrTest, SetGetReplaceRemove) {
  Ino f = Make(kRootIno, "f", File(T(1)));
  EXPECT_EQ(store_->GetXattr(f, "user.a").error(), ENODATA);
  ASSERT_TRUE(store_->SetXattr(f, "user.a", "one", 0, T(2)).ok());
  EXPECT_EQ(*store_->GetXattr(f, "user.a"), "one");
  EXPECT_EQ(MustGet(f).ctime.sec, 2);
  EXPECT_EQ(MustGet(f).mtime.sec, 1);

  ASSERT_TRUE(store_->SetXattr(f, "user.a", "two", 0, T(3)).ok());  // flags 0: create or replace
  EXPECT_EQ(*store_->GetXattr(f, "user.a"), "two");
  EXPECT_EQ(store_->SetXattr(f, "user.a", "x", XATTR_CREATE, T(4)).error(), EEXIST);
  EXPECT_EQ(store_->SetXattr(f, "user.b", "x", XATTR_REPLACE, T(4)).error(), ENODATA);
  EXPECT_EQ(store_->GetXattr(f, "user.b").error(), ENODATA);
  ASSERT_TRUE(store_->SetXattr(f, "user.a", "three", XATTR_REPLACE, T(5)).ok());
  ASSERT_TRUE(store_->SetXattr(f, "user.b", "new", XATTR_CREATE, T(5)).ok());
  EXPECT_EQ(*store_->GetXattr(f, "user.a"), "three");
  EXPECT_EQ(MustGet(f).ctime.sec, 5);
  EXPECT_EQ(store_->SetXattr(f, "user.c", "x", XATTR_CREATE | XATTR_REPLACE, T(6)).error(), EINVAL);

  ASSERT_TRUE(store_->RemoveXattr(f, "user.a", T(7)).ok());
  EXPECT_EQ(MustGet(f).ctime.sec, 7);
  EXPECT_EQ(store_->GetXattr(f, "user.a").error(), ENODATA);
  EXPECT_EQ(store_->RemoveXattr(f, "user.a", T(8)).error(), ENODATA);
  EXPECT_EQ(*store_->GetXattr(f, "user.b"), "new");
}

TEST_F(XattrTest, ListIsSortedAndPerInode) {
  Ino f = Make(kRootIno, "f", File());
  Ino g = Make(kRootIno, "g", File());  // the next inode number: its keys sort right after f's
  for (const char* name : {"user.z", "trusted.t", "user.a", "security.s"}) {
    ASSERT_TRUE(store_->SetXattr(f, name, "v", 0, T(1)).ok());
  }
  ASSERT_TRUE(store_->SetXattr(g, "user.g", "w", 0, T(1)).ok());
  EXPECT_EQ(*store_->ListXattrs(f),
            (std::vector<std::string>{"security.s", "trusted.t", "user.a", "user.z"}));
  EXPECT_EQ(*store_->ListXattrs(g), std::vector<std::string>{"user.g"});
  EXPECT_TRUE(store_->ListXattrs(kRootIno)->empty());
  EXPECT_EQ(store_->GetXattr(g, "user.a").error(), ENODATA);
}

TEST_F(XattrTest, NameAndValueLimits) {
  Ino f = Make(kRootIno, "f", File());
  std::string longest_name = "user." + std::string(250, 'n');
  ASSERT_EQ(longest_name.size(), 255u);
  EXPECT_TRUE(store_->SetXattr(f, longest_name, "v", 0, T(1)).ok());
  EXPECT_EQ(store_->SetXattr(f, longest_name + "x", "v", 0, T(1)).error(), ERANGE);
  EXPECT_EQ(store_->GetXattr(f, longest_name + "x").error(), ERANGE);
  EXPECT_EQ(store_->SetXattr(f, "", "v", 0, T(1)).error(), ERANGE);

  std::string biggest(64 * 1024, '\xab');
  EXPECT_TRUE(store_->SetXattr(f, "user.big", biggest, 0, T(1)).ok());
  EXPECT_EQ(*store_->GetXattr(f, "user.big"), biggest);
  EXPECT_EQ(store_->SetXattr(f, "user.bigger", biggest + "x", 0, T(1)).error(), E2BIG);
  EXPECT_EQ(store_->GetXattr(f, "user.bigger").error(), ENODATA);

  EXPECT_TRUE(store_->SetXattr(f, "user.empty", "", 0, T(1)).ok());
  auto empty = store_->GetXattr(f, "user.empty");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");
  std::string binary("\0\1\2\0", 4);
  EXPECT_TRUE(store_->SetXattr(f, "user.bin", binary, 0, T(1)).ok());
  EXPECT_EQ(*store_->GetXattr(f, "user.bin"), binary);
}

TEST_F(XattrTest, MissingInodeIsEnoent) {
  EXPECT_EQ(store_->GetXattr(999, "user.a").error(), ENOENT);
  EXPECT_EQ(store_->SetXattr(999, "user.a", "v", 0, T(1)).error(), ENOENT);
  EXPECT_EQ(store_->ListXattrs(999).error(), ENOENT);
  EXPECT_EQ(store_->RemoveXattr(999, "user.a", T(1)).error(), ENOENT);
}

TEST_F(XattrTest, DirectoriesAndSymlinksCarryXattrs) {
  Ino d = Make(kRootIno, "d", Dir());
  Ino l = Make(kRootIno, "l", Symlink("t"));
  ASSERT_TRUE(store_->SetXattr(d, "user.d", "1", 0, T(1)).ok());
  ASSERT_TRUE(store_->SetXattr(l, "trusted.l", "2", 0, T(1)).ok());
  EXPECT_EQ(*store_->GetXattr(d, "user.d"), "1");
  EXPECT_EQ(*store_->GetXattr(l, "trusted.l"), "2");
  // Removing the directory and deleting the orphan removes its xattrs with it.
  ASSERT_TRUE(store_->Rmdir(kRootIno, "d", T(2)).ok());
  ASSERT_TRUE(store_->DeleteInode(d).ok());
  EXPECT_EQ(store_->GetXattr(d, "user.d").error(), ENOENT);
}

}  // namespace
}  // namespace tipfs::meta::testing
