// POSIX namespace operations on a tipfs mount compared with the same script on a native
// directory: mkdir/rmdir, unlink, every rename case (plain, overwrite, directories, the errno
// cases, RENAME_NOREPLACE and RENAME_EXCHANGE), hard and symbolic links, special files, readdir
// names and types, extended attributes, long names, and statfs. Instantiated for both data cache
// modes in posix_files_test.cc.
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/fusefs/posix_compare_fixture.h"

namespace tipfs::testing {
namespace {

long Mkdir(PosixTrace& t, const std::string& rel, mode_t mode = 0755) {
  return t.Do("mkdir " + rel, [&] { return static_cast<long>(mkdir(t.P(rel).c_str(), mode)); });
}
long Rmdir(PosixTrace& t, const std::string& rel) {
  return t.Do("rmdir " + rel, [&] { return static_cast<long>(rmdir(t.P(rel).c_str())); });
}
long Unlink(PosixTrace& t, const std::string& rel) {
  return t.Do("unlink " + rel, [&] { return static_cast<long>(unlink(t.P(rel).c_str())); });
}
void MakeFile(PosixTrace& t, const std::string& rel, const std::string& contents) {
  t.Note("make " + rel, WriteFileBytes(t.P(rel), contents) ? "ok" : ErrnoName(errno));
}
long Rename(PosixTrace& t, const std::string& from, const std::string& to, unsigned flags = 0) {
  return t.Do("rename " + from + " -> " + to + " flags " + std::to_string(flags), [&] {
    return static_cast<long>(
        renameat2(AT_FDCWD, t.P(from).c_str(), AT_FDCWD, t.P(to).c_str(), flags));
  });
}

TEST_P(PosixCompareTest, DirectoriesAndUnlink) {
  Compare([](PosixTrace& t) {
    Mkdir(t, "a");
    Mkdir(t, "a/b", 0700);
    t.Stat("stat a (nlink counts subdirectories)", "a");
    t.Stat("stat a/b", "a/b");
    Mkdir(t, "a");            // EEXIST
    Mkdir(t, "a/missing/c");  // ENOENT
    MakeFile(t, "a/b/f", "x");
    Rmdir(t, "a");        // ENOTEMPTY
    Rmdir(t, "a/b/f");    // ENOTDIR
    Rmdir(t, "a/b/.");    // EINVAL
    Rmdir(t, "a/b/..");   // ENOTEMPTY
    Rmdir(t, "nothing");  // ENOENT
    Unlink(t, "a/b");     // EISDIR
    Unlink(t, "a/b/f");
    Unlink(t, "a/b/f");  // ENOENT
    Rmdir(t, "a/b");
    t.Stat("stat a after rmdir of its subdirectory", "a");
    t.Stat("stat removed", "a/b");
    Rmdir(t, "a");
    Mkdir(t, "x");
    int dirfd = OpenAt(t, "open x", "x", O_RDONLY | O_DIRECTORY);
    Rmdir(t, "x");
    // A removed directory that is still open: nothing can be created in it.
    t.Do("openat in removed dir", [&] {
      return static_cast<long>(openat(dirfd, "new", O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    });
    t.FStat("fstat of removed dir", dirfd);
    CloseFd(t, "close", dirfd);
    Mkdir(t, "y");
    t.Do("mkdir with trailing slash",
         [&] { return static_cast<long>(mkdir(t.P("z/").c_str(), 0755)); });
    t.Listing("listing", ".");
  });
}

TEST_P(PosixCompareTest, RenameCases) {
  Compare([](PosixTrace& t) {
    MakeFile(t, "x", "file x");
    Rename(t, "x", "y");
    t.Stat("old name gone", "x");
    t.Contents("new name has the data", "y");
    MakeFile(t, "x2", "file x2, longer");
    Rename(t, "x2", "y");  // overwrite
    t.Contents("overwritten target", "y");
    Rename(t, "y", "y");  // same name: no-op
    t.Contents("after self-rename", "y");
    Rename(t, "missing", "z");  // ENOENT
    Rename(t, "y", "nodir/z");  // ENOENT
    t.Do("link y h", [&] { return static_cast<long>(link(t.P("y").c_str(), t.P("h").c_str())); });
    Rename(t, "y", "h");  // two links of one inode: nothing happens
    t.Stat("both links remain", "y");
    t.Stat("both links remain", "h");

    Mkdir(t, "d1");
    MakeFile(t, "d1/inside", "in d1");
    Mkdir(t, "d2");
    Rename(t, "d1", "d2");  // directory over an empty directory
    t.Contents("moved directory content", "d2/inside");
    t.Stat("source gone", "d1");
    Mkdir(t, "d3");
    Rename(t, "d3", "d2");  // ENOTEMPTY
    Rename(t, "y", "d2");   // file over dir: EISDIR
    Rename(t, "d3", "y");   // dir over file: ENOTDIR
    Mkdir(t, "p");
    Mkdir(t, "p/q");
    Rename(t, "p", "p/q/r");  // into its own subtree: EINVAL
    Rename(t, "p", "p/q");    // onto its own child: EINVAL (or ENOTEMPTY)
    Rename(t, "p/q", "p");    // onto its own parent: ENOTEMPTY
    Rename(t, "d2/.", "d4");  // EBUSY or EINVAL
    Rename(t, "y", "y/z");    // ENOTDIR

    // Directory moved to another parent: link counts of both parents and its "..".
    Mkdir(t, "src");
    Mkdir(t, "dst");
    MakeFile(t, "src/marker", "src");
    MakeFile(t, "dst/marker", "dst");
    Mkdir(t, "src/mover");
    t.Stat("src before", "src");
    t.Stat("dst before", "dst");
    Rename(t, "src/mover", "dst/mover");
    t.Stat("src after", "src");
    t.Stat("dst after", "dst");
    t.Contents("moved dir's parent", "dst/mover/../marker");

    // RENAME_NOREPLACE.
    MakeFile(t, "n1", "n1");
    MakeFile(t, "n2", "n2");
    Rename(t, "n1", "n2", RENAME_NOREPLACE);  // EEXIST
    t.Contents("target untouched", "n2");
    Rename(t, "n1", "n3", RENAME_NOREPLACE);
    t.Contents("renamed", "n3");
    Mkdir(t, "nd");
    Rename(t, "n3", "nd", RENAME_NOREPLACE);  // EEXIST even for a directory target

    // RENAME_EXCHANGE of two files.
    Rename(t, "n2", "n3", RENAME_EXCHANGE);
    t.Contents("exchanged n2", "n2");
    t.Contents("exchanged n3", "n3");
    Rename(t, "n2", "absent", RENAME_EXCHANGE);                 // ENOENT
    Rename(t, "n2", "n3", RENAME_EXCHANGE | RENAME_NOREPLACE);  // EINVAL
    // Of two directories in one parent.
    Mkdir(t, "e1");
    Mkdir(t, "e2");
    MakeFile(t, "e1/one", "1");
    MakeFile(t, "e2/two", "2");
    Mkdir(t, "e2/sub");
    Rename(t, "e1", "e2", RENAME_EXCHANGE);
    t.Listing("e1 now", "e1");
    t.Listing("e2 now", "e2");
    t.Stat("e1 nlink", "e1");
    t.Stat("e2 nlink", "e2");
    // Across directories, a file with a directory: link counts of both parents change.
    Mkdir(t, "X");
    Mkdir(t, "Y");
    MakeFile(t, "X/marker", "X");
    MakeFile(t, "Y/marker", "Y");
    MakeFile(t, "X/file", "a file");
    Mkdir(t, "Y/dir");
    MakeFile(t, "Y/dir/content", "dir content");
    Rename(t, "X/file", "Y/dir", RENAME_EXCHANGE);
    t.Stat("X/file is the dir", "X/file");
    t.Stat("Y/dir is the file", "Y/dir");
    t.Contents("file moved", "Y/dir");
    t.Contents("dir content moved", "X/file/content");
    t.Contents("dir's parent is X now", "X/file/../marker");
    t.Stat("X nlink", "X");
    t.Stat("Y nlink", "Y");
    // Exchange of a directory with its own ancestor.
    Mkdir(t, "X/file/deeper");
    Rename(t, "X", "X/file/deeper", RENAME_EXCHANGE);  // EINVAL
    t.Listing("top listing", ".");
  });
}

TEST_P(PosixCompareTest, HardAndSymbolicLinks) {
  Compare([](PosixTrace& t) {
    MakeFile(t, "f", "linked data");
    t.Do("link f g", [&] { return static_cast<long>(link(t.P("f").c_str(), t.P("g").c_str())); });
    t.Stat("f nlink 2", "f");
    t.Stat("g", "g");
    t.Do("link f g again",
         [&] { return static_cast<long>(link(t.P("f").c_str(), t.P("g").c_str())); });
    Mkdir(t, "d");
    t.Do("link of a directory",
         [&] { return static_cast<long>(link(t.P("d").c_str(), t.P("dl").c_str())); });
    t.Do("link of missing",
         [&] { return static_cast<long>(link(t.P("nope").c_str(), t.P("n2").c_str())); });
    t.Do("link into subdir",
         [&] { return static_cast<long>(link(t.P("f").c_str(), t.P("d/h").c_str())); });
    t.Stat("nlink 3", "f");
    Unlink(t, "f");
    t.Stat("g after unlinking f", "g");
    t.Contents("data through g", "g");
    int fd = OpenAt(t, "open g", "g", O_WRONLY | O_APPEND);
    WriteNext(t, "append through g", fd, " more");
    CloseFd(t, "close", fd);
    t.Contents("same data through d/h", "d/h");

    t.Do("symlink", [&] { return static_cast<long>(symlink("target/path", t.P("s").c_str())); });
    t.Stat("lstat symlink (size = target length)", "s");
    t.Stat("stat dangling", "s", true);
    char buffer[64];
    ssize_t n = readlink(t.P("s").c_str(), buffer, sizeof(buffer));
    t.Note("readlink", n < 0 ? ErrnoName(errno) : std::string(buffer, n));
    n = readlink(t.P("s").c_str(), buffer, 4);
    t.Note("readlink into 4 bytes", n < 0 ? ErrnoName(errno) : std::string(buffer, n));
    n = readlink(t.P("g").c_str(), buffer, sizeof(buffer));
    t.Note("readlink of a file", n < 0 ? ErrnoName(errno) : std::string(buffer, n));
    t.Do("symlink over existing",
         [&] { return static_cast<long>(symlink("x", t.P("g").c_str())); });
    t.Do("symlink to g", [&] { return static_cast<long>(symlink("g", t.P("sg").c_str())); });
    t.Stat("stat through symlink", "sg", true);
    t.Contents("read through symlink", "sg");
    int through = OpenAt(t, "open through symlink", "sg", O_WRONLY | O_TRUNC);
    WriteNext(t, "write through symlink", through, "replaced");
    CloseFd(t, "close", through);
    t.Contents("target changed", "g");
    OpenAt(t, "O_NOFOLLOW on a symlink", "sg", O_RDONLY | O_NOFOLLOW);
    t.Do("symlink l1", [&] { return static_cast<long>(symlink("l2", t.P("l1").c_str())); });
    t.Do("symlink l2", [&] { return static_cast<long>(symlink("l1", t.P("l2").c_str())); });
    t.Stat("loop", "l1", true);
    std::string long_target(4000, 'T');
    t.Do("symlink with a 4000-byte target",
         [&] { return static_cast<long>(symlink(long_target.c_str(), t.P("long").c_str())); });
    t.Stat("lstat long", "long");
    t.Do("symlink to absolute path",
         [&] { return static_cast<long>(symlink("/etc/hostname", t.P("abs").c_str())); });
    t.Do("link of a symlink",
         [&] { return static_cast<long>(link(t.P("sg").c_str(), t.P("sg2").c_str())); });
    t.Stat("hard-linked symlink", "sg2");
    t.Do("symlink with empty target",
         [&] { return static_cast<long>(symlink("", t.P("empty").c_str())); });
    t.Do("symlink in subdir via dir link",
         [&] { return static_cast<long>(symlink("../g", t.P("d/up").c_str())); });
    t.Contents("relative target resolved from the link's dir", "d/up");
    t.Listing("listing with types", ".");
  });
}

TEST_P(PosixCompareTest, SpecialFilesAndListing) {
  Compare([](PosixTrace& t) {
    t.Do("mkfifo", [&] { return static_cast<long>(mkfifo(t.P("fifo").c_str(), 0640)); });
    t.Stat("stat fifo", "fifo");
    int fifo = OpenAt(t, "open fifo non-blocking", "fifo", O_RDONLY | O_NONBLOCK);
    CloseFd(t, "close fifo", fifo);
    t.Do("mknod regular",
         [&] { return static_cast<long>(mknod(t.P("reg").c_str(), S_IFREG | 0600, 0)); });
    t.Stat("stat mknod regular", "reg");
    if (geteuid() == 0) {
      t.Do("mknod char 1:3", [&] {
        return static_cast<long>(mknod(t.P("null").c_str(), S_IFCHR | 0666, makedev(1, 3)));
      });
      t.Stat("stat char device", "null");
      t.Do("mknod block 7:200", [&] {
        return static_cast<long>(mknod(t.P("blk").c_str(), S_IFBLK | 0600, makedev(7, 200)));
      });
      t.Stat("stat block device", "blk");
    }
    t.Do("mknod socket",
         [&] { return static_cast<long>(mknod(t.P("sock").c_str(), S_IFSOCK | 0644, 0)); });
    t.Stat("stat socket", "sock");
    t.Do("mknod over existing",
         [&] { return static_cast<long>(mkfifo(t.P("fifo").c_str(), 0640)); });
    t.Listing("listing with types", ".");

    // A directory with many entries (more than one readdir buffer), some with long names.
    Mkdir(t, "many");
    bool made = true;
    for (int i = 0; i < 600; ++i) {
      std::string name = "entry-" + std::to_string(i) + (i % 7 == 0 ? std::string(200, 'n') : "");
      made &= WriteFileBytes(t.P("many/" + name), "");
      if (i % 50 == 0) made &= mkdir(t.P("many/dir-" + std::to_string(i)).c_str(), 0755) == 0;
    }
    t.Note("made 612 entries", made ? "ok" : "failed");
    t.Listing("large listing", "many");
    t.Stat("many nlink", "many");
    // Removing entries while a listing is open must neither repeat nor lose the others.
    DIR* dir = opendir(t.P("many").c_str());
    std::vector<std::string> seen;
    int count = 0;
    while (dirent* d = dir ? readdir(dir) : nullptr) {
      seen.push_back(d->d_name);
      if (++count == 100) {
        for (int i = 300; i < 310; ++i) unlink(t.P("many/entry-" + std::to_string(i)).c_str());
      }
    }
    if (dir) closedir(dir);
    std::sort(seen.begin(), seen.end());
    bool unique = std::adjacent_find(seen.begin(), seen.end()) == seen.end();
    t.Note("no name repeated in a listing changed midway", unique ? "ok" : "repeated");
    t.Listing("listing after removal", "many");
  });
}

TEST_P(PosixCompareTest, ExtendedAttributes) {
  Compare([](PosixTrace& t) {
    MakeFile(t, "f", "xattr host");
    auto set = [&](const std::string& step, const std::string& rel, const std::string& name,
                   const std::string& value, int flags) {
      t.Do(step, [&] {
        return static_cast<long>(
            setxattr(t.P(rel).c_str(), name.c_str(), value.data(), value.size(), flags));
      });
    };
    auto get = [&](const std::string& step, const std::string& rel, const std::string& name,
                   size_t size) {
      std::string buffer(size, '\0');
      ssize_t n = getxattr(t.P(rel).c_str(), name.c_str(), size ? buffer.data() : nullptr, size);
      if (n < 0) return t.Note(step, ErrnoName(errno));
      t.Note(step, size == 0 ? "size " + std::to_string(n)
                             : "value " + HashBytes(buffer.substr(0, n)) + " (" +
                                   std::to_string(n) + ")");
    };
    auto list = [&](const std::string& step, const std::string& rel, size_t size) {
      std::string buffer(size, '\0');
      ssize_t n = listxattr(t.P(rel).c_str(), size ? buffer.data() : nullptr, size);
      if (n < 0) return t.Note(step, ErrnoName(errno));
      if (size == 0) return t.Note(step, "size " + std::to_string(n));
      std::vector<std::string> names;
      for (size_t i = 0; i < static_cast<size_t>(n); i += names.back().size() + 1) {
        names.push_back(buffer.c_str() + i);
      }
      std::sort(names.begin(), names.end());
      std::string text;
      for (const std::string& name : names) text += name + " ";
      t.Note(step, text);
    };
    set("set user.a", "f", "user.a", "1", 0);
    get("size of user.a", "f", "user.a", 0);
    get("get user.a", "f", "user.a", 100);
    get("get user.a into exactly its size", "f", "user.a", 1);
    set("set user.long", "f", "user.long", std::string(1000, 'v'), 0);
    get("get user.long into 10 bytes", "f", "user.long", 10);               // ERANGE
    set("XATTR_CREATE on existing", "f", "user.a", "2", XATTR_CREATE);      // EEXIST
    set("XATTR_REPLACE on missing", "f", "user.none", "2", XATTR_REPLACE);  // ENODATA
    set("XATTR_REPLACE on existing", "f", "user.a", "replaced", XATTR_REPLACE);
    get("get replaced", "f", "user.a", 100);
    set("XATTR_CREATE on new", "f", "user.b", "", XATTR_CREATE);
    get("size of empty value", "f", "user.b", 0);
    set("binary value", "f", "user.bin", std::string("\0\1\2\0\xff", 5), 0);
    get("get binary", "f", "user.bin", 100);
    list("list", "f", 1000);
    list("list size", "f", 0);
    list("list into 3 bytes", "f", 3);          // ERANGE
    get("get missing", "f", "user.none", 100);  // ENODATA
    t.Do("remove user.b",
         [&] { return static_cast<long>(removexattr(t.P("f").c_str(), "user.b")); });
    t.Do("remove missing",
         [&] { return static_cast<long>(removexattr(t.P("f").c_str(), "user.b")); });
    list("list after remove", "f", 1000);
    set("name of 255 bytes", "f", "user." + std::string(250, 'n'), "v", 0);
    set("name of 256 bytes", "f", "user." + std::string(251, 'n'), "v", 0);  // ERANGE
    set("empty name", "f", "", "v", 0);
    set("unknown namespace", "f", "nonsense.a", "v", 0);
    if (geteuid() == 0) {
      set("trusted namespace as root", "f", "trusted.t", "tv", 0);
      get("get trusted", "f", "trusted.t", 100);
    }
    Mkdir(t, "d");
    set("xattr on a directory", "d", "user.d", "dir value", 0);
    get("get on directory", "d", "user.d", 100);
    t.Do("symlink", [&] { return static_cast<long>(symlink("f", t.P("s").c_str())); });
    t.Do("lsetxattr user.* on a symlink",
         [&] { return static_cast<long>(lsetxattr(t.P("s").c_str(), "user.x", "1", 1, 0)); });
    get("getxattr follows the symlink", "s", "user.a", 100);
    get("on missing file", "missing", "user.a", 100);
    int fd = OpenAt(t, "open", "f", O_RDONLY);
    t.Do("fsetxattr", [&] { return static_cast<long>(fsetxattr(fd, "user.fd", "x", 1, 0)); });
    char value[16];
    ssize_t n = fgetxattr(fd, "user.fd", value, sizeof(value));
    t.Note("fgetxattr", n < 0 ? ErrnoName(errno) : std::string(value, n));
    CloseFd(t, "close", fd);
    // xattrs stay with the inode across rename and link.
    t.Do("link", [&] { return static_cast<long>(link(t.P("f").c_str(), t.P("g").c_str())); });
    Rename(t, "f", "renamed");
    list("list through the other link", "g", 1000);
  });
}

TEST_P(PosixCompareTest, NameLengths) {
  Compare([](PosixTrace& t) {
    const std::string name255(255, 'a');
    const std::string name256(256, 'b');
    MakeFile(t, name255, "255");
    t.Stat("stat 255-byte name", name255);
    t.Contents("read 255-byte name", name255);
    OpenAt(t, "creat 256-byte name", name256, O_CREAT | O_WRONLY, 0644);
    t.Stat("stat 256-byte name", name256);
    Mkdir(t, name256);
    Mkdir(t, std::string(255, 'd'));
    t.Do("symlink named 256 bytes",
         [&] { return static_cast<long>(symlink("x", t.P(name256).c_str())); });
    t.Do("link to a 256-byte name",
         [&] { return static_cast<long>(link(t.P(name255).c_str(), t.P(name256).c_str())); });
    Rename(t, name255, name256);
    t.Do("mkfifo 256", [&] { return static_cast<long>(mkfifo(t.P(name256).c_str(), 0644)); });
    t.Do("setxattr on 256 path",
         [&] { return static_cast<long>(setxattr(t.P(name256).c_str(), "user.a", "1", 1, 0)); });
    // 255 bytes of multi-byte UTF-8 (85 three-byte characters) and unusual bytes.
    std::string utf8;
    for (int i = 0; i < 85; ++i) utf8 += "\xe2\x82\xac";
    MakeFile(t, utf8, "euro");
    MakeFile(t, utf8 + "x", "too long");
    MakeFile(t, "space name\twith\ntabs", "odd");
    MakeFile(t, "\x01\x7f\xfe", "bytes");
    Rename(t, name255, std::string(255, 'r'));
    t.Listing("listing", ".");
    t.Stat("dot dot", "..");
  });
}

// No native comparison: the numbers describe the backing disks. What a user relies on is checked.
TEST_P(PosixCompareTest, StatfsIsSane) {
  struct statvfs st;
  ASSERT_EQ(statvfs(Path("work").c_str(), &st), 0) << ErrnoName(errno);
  EXPECT_EQ(st.f_namemax, 255u);
  EXPECT_GT(st.f_bsize, 0u);
  EXPECT_GT(st.f_frsize, 0u);
  EXPECT_LE(st.f_bfree, st.f_blocks);
  EXPECT_LE(st.f_bavail, st.f_bfree);
  EXPECT_LE(st.f_ffree, st.f_files);
  EXPECT_GT(st.f_ffree, 0u);
  // Space of RADOS disks is what the cluster's monitors report (tests/rados: none runs there).
  if (!DisksAreRados()) {
    struct statvfs backing;
    ASSERT_EQ(statvfs(mount_->disks()[0].c_str(), &backing), 0);
    // All four disks are directories of one local file system here: the volume reports its size
    // once, not four times (space_mount_test checks disks on several file systems).
    const double volume_bytes = static_cast<double>(st.f_blocks) * st.f_frsize;
    const double disk_bytes = static_cast<double>(backing.f_blocks) * backing.f_frsize;
    EXPECT_NEAR(volume_bytes / disk_bytes, 1.0, 0.01);
  }
  // Files count: after creating files, f_files - f_ffree (used inodes) grows.
  const uint64_t used_before = st.f_files - st.f_ffree;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(WriteFileBytes(Path("work/f" + std::to_string(i)), "x"));
  ASSERT_EQ(statvfs(Path("work").c_str(), &st), 0);
  EXPECT_GE(st.f_files - st.f_ffree, used_before + 5);
}

}  // namespace
}  // namespace tipfs::testing
