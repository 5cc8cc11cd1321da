// POSIX file operations on a tipfs mount compared with the same script on a native directory:
// open flags, read/write/pwrite, truncation, fsync, attributes (chmod, chown, utimensat) and how
// atime/mtime/ctime move. Each script runs in both data cache modes.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <string>

#include "tests/fusefs/posix_compare_fixture.h"

namespace tipfs::testing {
namespace {

const std::string kHello = "hello, tipfs";

TEST_P(PosixCompareTest, ReadWriteAndOffsets) {
  Compare([](PosixTrace& t) {
    int fd = OpenAt(t, "creat f 0640 excl", "f", O_CREAT | O_EXCL | O_RDWR, 0640);
    t.Stat("stat new f", "f");
    WriteNext(t, "write hello", fd, kHello);
    // Past the first 64 KiB stripe unit, leaving a hole that must read as zeros.
    WriteAt(t, "pwrite at 100000", fd, "xyz", 100000);
    t.FStat("fstat after sparse write", fd);
    ReadAt(t, "pread across hole", fd, 20, 99990);
    ReadAt(t, "pread hole only", fd, 4096, 8192);
    ReadAt(t, "pread at EOF", fd, 10, 100003);
    ReadAt(t, "pread past EOF", fd, 10, 1 << 20);
    // Unaligned write across the stripe unit boundary at 65536.
    WriteAt(t, "pwrite across unit boundary", fd, PatternBytes(100, 1), 65500);
    ReadAt(t, "pread across unit boundary", fd, 200, 65450);
    // One large write over many stripe units, not aligned at either end.
    WriteAt(t, "pwrite 1 MiB+7 at 12345", fd, PatternBytes((1 << 20) + 7, 2), 12345);
    ReadAt(t, "pread it back", fd, (1 << 20) + 7, 12345);
    ReadAt(t, "pread straddling its end", fd, 4096, 12345 + (1 << 20) - 100);
    WriteAt(t, "write of 0 bytes", fd, "", 5);
    t.Do(
        "lseek SEEK_END", [&] { return static_cast<long>(lseek(fd, 0, SEEK_END)); }, true);
    t.Do(
        "lseek SEEK_SET", [&] { return static_cast<long>(lseek(fd, 3, SEEK_SET)); }, true);
    WriteNext(t, "write at the seek offset", fd, "ABC");
    t.Do("fsync", [&] { return static_cast<long>(fsync(fd)); });
    t.Do("fdatasync", [&] { return static_cast<long>(fdatasync(fd)); });
    CloseFd(t, "close", fd);
    t.Contents("contents of f", "f");
    t.Stat("stat f", "f");
  });
}

TEST_P(PosixCompareTest, TruncateGrowAndShrink) {
  Compare([](PosixTrace& t) {
    int fd = OpenAt(t, "creat f", "f", O_CREAT | O_RDWR, 0644);
    WriteAt(t, "write 300000 bytes", fd, PatternBytes(300000, 3), 0);
    t.Do("ftruncate shrink to 70000", [&] { return static_cast<long>(ftruncate(fd, 70000)); });
    t.FStat("fstat", fd);
    ReadAt(t, "read up to the new end", fd, 100000, 60000);
    t.Do("ftruncate grow to 200000", [&] { return static_cast<long>(ftruncate(fd, 200000)); });
    // The bytes cut off must not come back when the file grows again.
    ReadAt(t, "read grown range", fd, 200000, 0);
    t.Do("truncate path shrink to 10",
         [&] { return static_cast<long>(truncate(t.P("f").c_str(), 10)); });
    t.Stat("stat", "f");
    t.Do("truncate path grow to 5 MiB",
         [&] { return static_cast<long>(truncate(t.P("f").c_str(), 5 << 20)); });
    ReadAt(t, "read inside grown hole", fd, 8192, 3 << 20);
    WriteAt(t, "write in the middle of the hole", fd, "mid", 4 << 20);
    t.Do("ftruncate to 0", [&] { return static_cast<long>(ftruncate(fd, 0)); });
    ReadAt(t, "read empty", fd, 10, 0);
    t.Do("ftruncate to 1 byte past a unit",
         [&] { return static_cast<long>(ftruncate(fd, 65537)); });
    t.FStat("fstat", fd);
    CloseFd(t, "close", fd);
    t.Contents("contents", "f");
    t.Do("truncate negative", [&] { return static_cast<long>(truncate(t.P("f").c_str(), -1)); });
    int ro = OpenAt(t, "open read-only", "f", O_RDONLY);
    t.Do("ftruncate read-only fd", [&] { return static_cast<long>(ftruncate(ro, 1)); });
    CloseFd(t, "close", ro);
    // Far out: 1 TiB (ext4 with 4 KiB blocks allows 16 TiB files; the objects stay sparse).
    int huge = OpenAt(t, "creat huge", "huge", O_CREAT | O_RDWR, 0644);
    WriteAt(t, "pwrite 5 bytes at 1 TiB", huge, "tail!", off_t{1} << 40);
    t.FStat("fstat huge", huge);
    ReadAt(t, "pread across the end at 1 TiB", huge, 10, (off_t{1} << 40) - 5);
    ReadAt(t, "pread in the hole at 512 GiB", huge, 100, off_t{1} << 39);
    t.Do("ftruncate huge to 1 GiB", [&] { return static_cast<long>(ftruncate(huge, 1 << 30)); });
    ReadAt(t, "pread at the new end", huge, 10, (1 << 30) - 5);
    CloseFd(t, "close huge", huge);
    t.Do("mkdir d", [&] { return static_cast<long>(mkdir(t.P("d").c_str(), 0755)); });
    t.Do("truncate a directory", [&] { return static_cast<long>(truncate(t.P("d").c_str(), 0)); });
  });
}

TEST_P(PosixCompareTest, OpenFlags) {
  Compare([](PosixTrace& t) {
    int fd = OpenAt(t, "creat f", "f", O_CREAT | O_WRONLY, 0644);
    WriteNext(t, "write", fd, kHello);
    CloseFd(t, "close", fd);
    OpenAt(t, "O_CREAT|O_EXCL on existing", "f", O_CREAT | O_EXCL | O_WRONLY, 0644);
    int keep = OpenAt(t, "O_CREAT on existing keeps data", "f", O_CREAT | O_RDONLY, 0600);
    CloseFd(t, "close", keep);
    t.Contents("contents kept", "f");
    t.Stat("mode unchanged by O_CREAT on existing", "f");

    // O_APPEND writes at the end even after another descriptor made the file longer.
    int append = OpenAt(t, "open O_APPEND", "f", O_WRONLY | O_APPEND);
    int other = OpenAt(t, "open O_WRONLY", "f", O_WRONLY);
    WriteAt(t, "other extends to 70000", other, "Z", 69999);
    WriteNext(t, "append", append, "APPENDED");
    WriteAt(t, "pwrite on O_APPEND fd", append, "P", 0);  // Linux appends anyway
    t.Do(
        "lseek of append fd", [&] { return static_cast<long>(lseek(append, 0, SEEK_CUR)); }, true);
    CloseFd(t, "close append", append);
    CloseFd(t, "close other", other);
    t.Contents("contents after appends", "f");

    int rdonly = OpenAt(t, "open O_RDONLY", "f", O_RDONLY);
    WriteNext(t, "write on read-only fd", rdonly, "x");
    CloseFd(t, "close", rdonly);
    int wronly = OpenAt(t, "open O_WRONLY", "f", O_WRONLY);
    ReadAt(t, "read on write-only fd", wronly, 4, 0);
    CloseFd(t, "close", wronly);

    int trunc = OpenAt(t, "open O_TRUNC", "f", O_WRONLY | O_TRUNC);
    t.FStat("fstat after O_TRUNC", trunc);
    CloseFd(t, "close", trunc);
    int trunc_ro = OpenAt(t, "open O_RDONLY|O_TRUNC of empty", "f", O_RDONLY | O_TRUNC);
    CloseFd(t, "close", trunc_ro);

    t.Do("mkdir d", [&] { return static_cast<long>(mkdir(t.P("d").c_str(), 0755)); });
    OpenAt(t, "open dir O_WRONLY", "d", O_WRONLY);
    OpenAt(t, "open dir O_RDWR", "d", O_RDWR);
    OpenAt(t, "open dir O_CREAT", "d", O_CREAT | O_RDONLY, 0644);
    int dir = OpenAt(t, "open dir O_RDONLY", "d", O_RDONLY);
    ReadAt(t, "read on a dir fd", dir, 10, 0);
    t.Do("fsync dir", [&] { return static_cast<long>(fsync(dir)); });
    CloseFd(t, "close dir", dir);
    OpenAt(t, "O_DIRECTORY on a file", "f", O_RDONLY | O_DIRECTORY);
    OpenAt(t, "open missing", "missing", O_RDONLY);
    OpenAt(t, "open in missing dir", "missing/f", O_CREAT | O_WRONLY, 0644);
    OpenAt(t, "open through a file", "f/x", O_RDONLY);
    OpenAt(t, "creat through a file", "f/x", O_CREAT | O_WRONLY, 0644);
    t.Do("mkdir through a file",
         [&] { return static_cast<long>(mkdir(t.P("f/x").c_str(), 0755)); });
    t.Stat("stat through a file", "f/x");
    t.Stat("stat through a file, trailing slash", "f/");
    t.Do("unlink through a file", [&] { return static_cast<long>(unlink(t.P("f/x").c_str())); });
    t.Do("rename through a file",
         [&] { return static_cast<long>(rename(t.P("f/x").c_str(), t.P("y").c_str())); });
  });
}

TEST_P(PosixCompareTest, ModesAndOwners) {
  Compare([](PosixTrace& t) {
    int fd = OpenAt(t, "creat f 0777", "f", O_CREAT | O_WRONLY, 0777);  // umask applies
    t.Stat("stat", "f");
    t.Do("chmod 0600", [&] { return static_cast<long>(chmod(t.P("f").c_str(), 0600)); });
    t.Stat("stat", "f");
    t.Do("fchmod 04755", [&] { return static_cast<long>(fchmod(fd, 04755)); });
    t.Stat("stat setuid", "f");
    t.Do("chmod 07777", [&] { return static_cast<long>(chmod(t.P("f").c_str(), 07777)); });
    t.Stat("stat all bits", "f");
    if (geteuid() == 0) {
      t.Do("chown 1234:5678",
           [&] { return static_cast<long>(chown(t.P("f").c_str(), 1234, 5678)); });
      // chown of a regular file drops set-user-ID and set-group-ID, also for root.
      t.Stat("stat after chown", "f");
      t.Do("fchown -1:42", [&] { return static_cast<long>(fchown(fd, -1, 42)); });
      t.Stat("stat after fchown", "f");
      t.Do("symlink", [&] { return static_cast<long>(symlink("f", t.P("s").c_str())); });
      t.Do("lchown link 7:8", [&] { return static_cast<long>(lchown(t.P("s").c_str(), 7, 8)); });
      t.Stat("lstat link", "s");
      t.Stat("stat target unchanged", "f");
      t.Do("mkdir d", [&] { return static_cast<long>(mkdir(t.P("d").c_str(), 0755)); });
      t.Do("chmod d 02775", [&] { return static_cast<long>(chmod(t.P("d").c_str(), 02775)); });
      t.Do("chown d :999", [&] { return static_cast<long>(chown(t.P("d").c_str(), -1, 999)); });
      t.Stat("stat d", "d");  // set-group-ID stays on directories
      // BSD group semantics under a set-group-ID directory.
      int inner = OpenAt(t, "creat in sgid dir", "d/inner", O_CREAT | O_WRONLY, 0644);
      CloseFd(t, "close", inner);
      t.Stat("file inherits group", "d/inner");
      t.Do("mkdir in sgid dir",
           [&] { return static_cast<long>(mkdir(t.P("d/sub").c_str(), 0755)); });
      t.Stat("subdir inherits group and sgid", "d/sub");
    }
    CloseFd(t, "close", fd);
    t.Do("chmod missing", [&] { return static_cast<long>(chmod(t.P("missing").c_str(), 0644)); });
  });
}

TEST_P(PosixCompareTest, ExplicitTimes) {
  Compare([](PosixTrace& t) {
    int fd = OpenAt(t, "creat f", "f", O_CREAT | O_WRONLY, 0644);
    WriteNext(t, "write", fd, kHello);
    auto exact = [&](const std::string& step) {
      struct stat st;
      if (lstat(t.P("f").c_str(), &st) != 0) return t.Note(step, ErrnoName(errno));
      t.Note(step, "atime=" + std::to_string(st.st_atim.tv_sec) + "." +
                       std::to_string(st.st_atim.tv_nsec) +
                       " mtime=" + std::to_string(st.st_mtim.tv_sec) + "." +
                       std::to_string(st.st_mtim.tv_nsec));
    };
    timespec both[2] = {{1000000000, 123456789}, {1200000000, 987654321}};
    t.Do("utimensat explicit",
         [&] { return static_cast<long>(utimensat(AT_FDCWD, t.P("f").c_str(), both, 0)); });
    exact("times after explicit");
    PosixTrace::Mark mark = t.MarkTimes("f");
    timespec omit_m[2] = {{1100000000, 5}, {0, UTIME_OMIT}};
    t.Do("utimensat atime, UTIME_OMIT mtime",
         [&] { return static_cast<long>(utimensat(AT_FDCWD, t.P("f").c_str(), omit_m, 0)); });
    exact("times after omit");
    t.TimesSince("ctime moves, mtime kept", "f", mark);
    mark = t.MarkTimes("f");
    timespec now_m[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    t.Do("utimensat UTIME_NOW mtime",
         [&] { return static_cast<long>(utimensat(AT_FDCWD, t.P("f").c_str(), now_m, 0)); });
    t.TimesSince("mtime now, atime kept", "f", mark);
    mark = t.MarkTimes("f");
    t.Do("utimensat NULL",
         [&] { return static_cast<long>(utimensat(AT_FDCWD, t.P("f").c_str(), nullptr, 0)); });
    t.TimesSince("both now", "f", mark);
    timespec omit_both[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};
    mark = t.MarkTimes("f");
    t.Do("utimensat both UTIME_OMIT",
         [&] { return static_cast<long>(utimensat(AT_FDCWD, t.P("f").c_str(), omit_both, 0)); });
    t.TimesSince("nothing moves", "f", mark);
    t.Do("futimens explicit", [&] { return static_cast<long>(futimens(fd, both)); });
    exact("times after futimens");
    timespec pre_epoch[2] = {{-1000, 0}, {4000000000LL, 999999999}};
    t.Do("utimensat before 1970 and after 2038",
         [&] { return static_cast<long>(utimensat(AT_FDCWD, t.P("f").c_str(), pre_epoch, 0)); });
    exact("times outside 32-bit range");
    timespec bad[2] = {{0, 1000000000}, {0, 0}};
    t.Do("utimensat bad nsec",
         [&] { return static_cast<long>(utimensat(AT_FDCWD, t.P("f").c_str(), bad, 0)); });
    t.Do("symlink", [&] { return static_cast<long>(symlink("f", t.P("s").c_str())); });
    t.Do("utimensat on the link itself", [&] {
      return static_cast<long>(utimensat(AT_FDCWD, t.P("s").c_str(), both, AT_SYMLINK_NOFOLLOW));
    });
    struct stat st;
    lstat(t.P("s").c_str(), &st);
    t.Note("link mtime",
           std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec));
    CloseFd(t, "close", fd);
  });
}

// Which times each operation moves, on the file and on its directory.
TEST_P(PosixCompareTest, TimesMoveWithOperations) {
  Compare([](PosixTrace& t) {
    t.Do("mkdir d", [&] { return static_cast<long>(mkdir(t.P("d").c_str(), 0755)); });
    t.Do("mkdir e", [&] { return static_cast<long>(mkdir(t.P("e").c_str(), 0755)); });
    PosixTrace::Mark dir = t.MarkTimes("d");
    int fd = OpenAt(t, "creat d/f", "d/f", O_CREAT | O_RDWR, 0644);
    t.TimesSince("dir after create", "d", dir);
    PosixTrace::Mark file = t.MarkTimes("d/f");
    WriteNext(t, "write", fd, kHello);
    t.TimesSince("file after write", "d/f", file);
    file = t.MarkTimes("d/f");
    t.Do("ftruncate", [&] { return static_cast<long>(ftruncate(fd, 3)); });
    t.TimesSince("file after truncate", "d/f", file);
    file = t.MarkTimes("d/f");
    t.Do("ftruncate to the same size", [&] { return static_cast<long>(ftruncate(fd, 3)); });
    t.TimesSince("file after same-size truncate", "d/f", file);
    file = t.MarkTimes("d/f");
    t.Do("chmod", [&] { return static_cast<long>(chmod(t.P("d/f").c_str(), 0600)); });
    t.TimesSince("file after chmod", "d/f", file);
    file = t.MarkTimes("d/f");
    t.Do("setxattr",
         [&] { return static_cast<long>(setxattr(t.P("d/f").c_str(), "user.t", "1", 1, 0)); });
    t.TimesSince("file after setxattr", "d/f", file);
    file = t.MarkTimes("d/f");
    dir = t.MarkTimes("d");
    t.Do("link d/f d/g",
         [&] { return static_cast<long>(link(t.P("d/f").c_str(), t.P("d/g").c_str())); });
    t.TimesSince("file after link", "d/f", file);
    t.TimesSince("dir after link", "d", dir);
    file = t.MarkTimes("d/f");
    dir = t.MarkTimes("d");
    PosixTrace::Mark target_dir = t.MarkTimes("e");
    t.Do("rename d/g e/g",
         [&] { return static_cast<long>(rename(t.P("d/g").c_str(), t.P("e/g").c_str())); });
    t.TimesSince("file after rename", "d/f", file);
    t.TimesSince("source dir after rename", "d", dir);
    t.TimesSince("target dir after rename", "e", target_dir);
    file = t.MarkTimes("d/f");
    target_dir = t.MarkTimes("e");
    t.Do("unlink e/g", [&] { return static_cast<long>(unlink(t.P("e/g").c_str())); });
    t.TimesSince("file after unlinking a link", "d/f", file);
    t.TimesSince("dir after unlink", "e", target_dir);
    dir = t.MarkTimes("d");
    t.Do("mkdir d/sub", [&] { return static_cast<long>(mkdir(t.P("d/sub").c_str(), 0755)); });
    t.TimesSince("dir after mkdir", "d", dir);
    dir = t.MarkTimes("d");
    t.Do("rmdir d/sub", [&] { return static_cast<long>(rmdir(t.P("d/sub").c_str())); });
    t.TimesSince("dir after rmdir", "d", dir);
    dir = t.MarkTimes("d");
    t.Do("symlink d/s", [&] { return static_cast<long>(symlink("f", t.P("d/s").c_str())); });
    t.TimesSince("dir after symlink", "d", dir);
    file = t.MarkTimes("d/f");
    dir = t.MarkTimes("d");
    int again = OpenAt(t, "open O_TRUNC", "d/f", O_WRONLY | O_TRUNC);
    t.TimesSince("file after O_TRUNC", "d/f", file);
    t.TimesSince("dir after opening a file", "d", dir);
    CloseFd(t, "close", again);
    file = t.MarkTimes("d/f");
    t.Do("fsync", [&] { return static_cast<long>(fsync(fd)); });
    t.TimesSince("file after fsync", "d/f", file);
    CloseFd(t, "close", fd);
  });
}

// relatime (the mount option both file systems show): a read updates atime when atime is not
// newer than mtime. Once for a short file, whose last page is partial, and once for a file of
// whole pages, which a write leaves in the kernel page cache (kernel mode): the read after it
// is served by the kernel, and must still count as an access.
TEST_P(PosixCompareTest, ReadUpdatesAtimeUnderRelatime) {
  Compare([](PosixTrace& t) {
    for (const auto& [name, bytes] : {std::pair<std::string, size_t>{"short", 12},
                                      std::pair<std::string, size_t>{"whole_pages", 65536}}) {
      int fd = OpenAt(t, "creat " + name, name, O_CREAT | O_WRONLY, 0644);
      WriteNext(t, "write " + std::to_string(bytes), fd, PatternBytes(bytes, 5));
      CloseFd(t, "close", fd);
      timespec old_atime[2] = {{1000000000, 0}, {0, UTIME_OMIT}};
      const std::string path = t.P(name);  // clang 14 cannot capture a structured binding
      t.Do("set atime older than mtime",
           [&] { return static_cast<long>(utimensat(AT_FDCWD, path.c_str(), old_atime, 0)); });
      PosixTrace::Mark mark = t.MarkTimes(name);
      t.Contents("read " + name, name);
      t.TimesSince("after read of " + name, name, mark);
      mark = t.MarkTimes(name);
      t.Contents("read again", name);
      t.TimesSince("after a second read (atime newer than mtime now)", name, mark);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(DataCache, PosixCompareTest, ::testing::ValuesIn(AllDataCacheModes()),
                         DataCacheName);

}  // namespace
}  // namespace tipfs::testing
