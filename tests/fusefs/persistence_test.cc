// A tree with every kind of node and attribute survives unmount + mount exactly: the full
// listing (modes, owners, link counts, sizes, times to the nanosecond, inode numbers, symlink
// targets, contents hashes, xattrs, hard-link identity) is the same after each remount.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <string>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

class PersistenceTest : public MountedTest {
 protected:
  // Builds the tree under the mount root; every step must succeed.
  void BuildTree() {
    auto dir = [&](const std::string& rel, mode_t mode) {
      ASSERT_EQ(mkdir(Path(rel).c_str(), 0700), 0) << rel << ": " << ErrnoName(errno);
      ASSERT_EQ(chmod(Path(rel).c_str(), mode), 0) << rel;  // no umask in the way
    };
    auto file = [&](const std::string& rel, const std::string& data, mode_t mode) {
      ASSERT_TRUE(WriteFileBytes(Path(rel), data)) << rel << ": " << ErrnoName(errno);
      ASSERT_EQ(chmod(Path(rel).c_str(), mode), 0) << rel;
    };
    auto xattr = [&](const std::string& rel, const std::string& name, const std::string& value) {
      ASSERT_EQ(lsetxattr(Path(rel).c_str(), name.c_str(), value.data(), value.size(), 0), 0)
          << rel << " " << name << ": " << ErrnoName(errno);
    };
    auto times = [&](const std::string& rel, timespec atime, timespec mtime) {
      timespec both[2] = {atime, mtime};
      ASSERT_EQ(utimensat(AT_FDCWD, Path(rel).c_str(), both, AT_SYMLINK_NOFOLLOW), 0)
          << rel << ": " << ErrnoName(errno);
    };

    dir("a", 0755);
    dir("a/b", 0750);
    dir("a/b/c", 0700);
    dir("empty", 0555);
    dir("sticky", 01777);
    dir("sgid", 02775);
    file("zero", "", 0644);
    file("one", "1", 0600);
    file("a/unit", PatternBytes(65536, 1), 0644);
    file("a/unit_plus_one", PatternBytes(65537, 2), 0640);
    file("a/b/big", PatternBytes(3 * 1000 * 1000 + 7, 3), 0444);
    file("a/b/c/setuid", "#!/bin/sh\n", 04755);
    file("no_access", "secret", 0000);
    file("sticky/in_sticky", "s", 0666);
    // Sparse: 10 bytes at 5 MiB, a hole before them.
    int fd = open(Path("sparse").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, "0123456789", 10, 5 << 20), 10);
    ASSERT_EQ(close(fd), 0);
    // Truncated below its written length, then grown again: the cut bytes must stay zero.
    file("regrown", PatternBytes(200000, 4), 0644);
    ASSERT_EQ(truncate(Path("regrown").c_str(), 1000), 0);
    ASSERT_EQ(truncate(Path("regrown").c_str(), 150000), 0);
    if (geteuid() == 0) {
      ASSERT_EQ(chown(Path("one").c_str(), 1234, 5678), 0);
      ASSERT_EQ(chown(Path("a/b").c_str(), 42, 43), 0);
      ASSERT_EQ(mknod(Path("chardev").c_str(), S_IFCHR | 0600, makedev(1, 3)), 0);
    }
    ASSERT_EQ(mkfifo(Path("fifo").c_str(), 0620), 0);
    ASSERT_EQ(symlink("../one", Path("a/rel_link").c_str()), 0);
    ASSERT_EQ(symlink("/etc/passwd", Path("abs_link").c_str()), 0);
    ASSERT_EQ(symlink("nowhere/at/all", Path("a/b/dangling").c_str()), 0);
    ASSERT_EQ(link(Path("a/b/big").c_str(), Path("hard_big").c_str()), 0);
    ASSERT_EQ(link(Path("a/b/big").c_str(), Path("a/b/c/hard_big2").c_str()), 0);
    ASSERT_EQ(link(Path("one").c_str(), Path("empty_sibling_link").c_str()), 0);
    xattr("one", "user.k", "v");
    xattr("one", "user.empty", "");
    xattr("one", "user.bin", std::string("\0\xff\0", 3));
    xattr("a", "user.dir_attr", std::string(500, 'x'));
    xattr("a/b/big", "user.on_hardlinked", "shared");
    // A file renamed over another and a directory moved: the old names must be gone for good.
    file("old_name", "renamed", 0644);
    file("victim", "replaced", 0644);
    ASSERT_EQ(rename(Path("old_name").c_str(), Path("victim").c_str()), 0);
    dir("moving", 0755);
    file("moving/inside", "in", 0644);
    ASSERT_EQ(rename(Path("moving").c_str(), Path("a/b/moved").c_str()), 0);
    file("deleted", "gone", 0644);
    ASSERT_EQ(unlink(Path("deleted").c_str()), 0);
    // Times last (creating children moves a directory's mtime); nanoseconds matter.
    times("one", {1000000000, 1}, {1100000000, 999999999});
    times("a/b/big", {1500000000, 123}, {1400000000, 456});
    times("a/rel_link", {1300000000, 7}, {1300000001, 8});
    times("a/b", {1200000000, 0}, {1200000000, 500});
    times("fifo", {2000000000, 2}, {2000000001, 3});
  }

  // Two views of the tree: every stat field (atime included) without reading any file, and the
  // contents without atime, because a read may move atime (relatime) and that is not a change
  // the remount made.
  static SnapshotOptions StatFields() {
    SnapshotOptions options;
    options.inode_numbers = true;
    options.ctime = true;
    options.atime = true;
    options.contents = false;
    return options;
  }
  static SnapshotOptions Contents() {
    SnapshotOptions options;
    options.inode_numbers = true;
    return options;
  }

  // Unmounts and mounts, and expects both views to be exactly what they were before.
  void ExpectRemountKeepsEverything(const std::string& when) {
    const std::vector<std::string> contents = SnapshotTree(mount_->mountpoint(), Contents());
    const std::vector<std::string> stats = SnapshotTree(mount_->mountpoint(), StatFields());
    Remount();
    if (HasFatalFailure()) return;
    const std::vector<std::string> stats_after = SnapshotTree(mount_->mountpoint(), StatFields());
    EXPECT_EQ(stats, stats_after) << when << ":\n" << DiffLines(stats, stats_after);
    const std::vector<std::string> contents_after = SnapshotTree(mount_->mountpoint(), Contents());
    EXPECT_EQ(contents, contents_after) << when << ":\n" << DiffLines(contents, contents_after);
  }

  void Remount() {
    ASSERT_EQ(UnmountRetryingWhileBusy(*mount_), "");
    ASSERT_FALSE(IsMountPoint(mount_->mountpoint()));
    ASSERT_EQ(mount_->Mount(), "");
  }
};

TEST_F(PersistenceTest, TreeSurvivesUnmountAndMountExactly) {
  BuildTree();
  if (HasFatalFailure()) return;
  ASSERT_GE(SnapshotTree(mount_->mountpoint(), StatFields()).size(), 27u);
  ExpectRemountKeepsEverything("first remount");
  ExpectRemountKeepsEverything("second remount");
}

// Changes made after a remount persist too, and inode numbers are never reused for new files.
TEST_F(PersistenceTest, ChangesAfterARemountPersistAndInodeNumbersStayUnique) {
  ASSERT_TRUE(WriteFileBytes(Path("first"), "1"));
  struct stat first;
  ASSERT_EQ(stat(Path("first").c_str(), &first), 0);
  ASSERT_EQ(unlink(Path("first").c_str()), 0);
  Remount();
  if (HasFatalFailure()) return;
  ASSERT_TRUE(WriteFileBytes(Path("second"), "2"));
  struct stat second;
  ASSERT_EQ(stat(Path("second").c_str(), &second), 0);
  EXPECT_NE(second.st_ino, first.st_ino) << "inode number reused after a remount";
  ASSERT_EQ(mkdir(Path("d").c_str(), 0755), 0);
  ASSERT_EQ(rename(Path("second").c_str(), Path("d/second").c_str()), 0);
  ASSERT_EQ(setxattr(Path("d").c_str(), "user.after", "remount", 7, 0), 0);
  ExpectRemountKeepsEverything("remount after changes");
  struct stat moved;
  ASSERT_EQ(stat(Path("d/second").c_str(), &moved), 0);
  EXPECT_EQ(moved.st_ino, second.st_ino);
}

}  // namespace
}  // namespace tipfs::testing
