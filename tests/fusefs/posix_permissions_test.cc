// Permission checks on a tipfs mount compared with a native directory: root prepares files and
// directories with owners and modes, then unprivileged users (forked children) try to read,
// write, create, remove, rename, chmod, chown, set times and xattrs, in plain, private, group-
// writable and sticky directories. Both must allow and refuse exactly the same, with the same
// errno. Needs root (to act as other users); instantiated for both data cache modes in
// posix_files_test.cc.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <string>

#include "tests/fusefs/posix_compare_fixture.h"

namespace tipfs::testing {
namespace {

constexpr uid_t kUser = 1000;
constexpr gid_t kGroup = 1000;
constexpr uid_t kOther = 2000;

long Call(PosixTrace& t, const std::string& step, const std::function<long()>& op) {
  return t.Do(step, op);
}

void Prepare(PosixTrace& t) {
  auto dir = [&](const std::string& rel, mode_t mode) {
    Call(t, "mkdir " + rel, [&] { return static_cast<long>(mkdir(t.P(rel).c_str(), mode)); });
    Call(t, "chmod " + rel, [&] { return static_cast<long>(chmod(t.P(rel).c_str(), mode)); });
  };
  auto file = [&](const std::string& rel, mode_t mode, uid_t uid, gid_t gid) {
    t.Note("make " + rel, WriteFileBytes(t.P(rel), "contents of " + rel) ? "ok" : "failed");
    Call(t, "chmod " + rel, [&] { return static_cast<long>(chmod(t.P(rel).c_str(), mode)); });
    Call(t, "chown " + rel, [&] { return static_cast<long>(chown(t.P(rel).c_str(), uid, gid)); });
  };
  dir("pub", 0777);
  dir("priv", 0700);
  dir("ro", 0755);
  dir("sticky", 01777);
  file("ro/readable", 0644, 0, 0);
  file("ro/secret", 0600, 0, 0);
  file("ro/exec", 0755, 0, 0);
  file("ro/noexec", 0644, 0, 0);
  file("priv/hidden", 0644, 0, 0);
  file("pub/group_rw", 0660, 0, kGroup);
  file("sticky/roots", 0666, 0, 0);
  Call(t, "xattr on secret",
       [&] { return static_cast<long>(setxattr(t.P("ro/secret").c_str(), "user.k", "v", 1, 0)); });
}

void AsUser(PosixTrace& t) {
  auto open_as = [&](const std::string& step, const std::string& rel, int flags) {
    long fd = OpenAt(t, step, rel, flags, 0644);
    if (fd >= 0) close(static_cast<int>(fd));
  };
  open_as("read a 0644 file", "ro/readable", O_RDONLY);
  t.Contents("contents of a 0644 file", "ro/readable");
  open_as("write a 0644 file", "ro/readable", O_WRONLY);
  open_as("read a 0600 file", "ro/secret", O_RDONLY);
  open_as("create in a 0755 dir", "ro/new", O_CREAT | O_WRONLY);
  Call(t, "unlink in a 0755 dir",
       [&] { return static_cast<long>(unlink(t.P("ro/readable").c_str())); });
  Call(t, "mkdir in a 0755 dir",
       [&] { return static_cast<long>(mkdir(t.P("ro/d").c_str(), 0755)); });
  Call(t, "rename out of a 0755 dir", [&] {
    return static_cast<long>(rename(t.P("ro/readable").c_str(), t.P("pub/taken").c_str()));
  });
  t.Stat("stat through a 0700 dir", "priv/hidden");
  t.Listing("list a 0700 dir", "priv");
  Call(t, "truncate a 0644 file",
       [&] { return static_cast<long>(truncate(t.P("ro/readable").c_str(), 0)); });
  Call(t, "access X_OK 0755",
       [&] { return static_cast<long>(access(t.P("ro/exec").c_str(), X_OK)); });
  Call(t, "access X_OK 0644",
       [&] { return static_cast<long>(access(t.P("ro/noexec").c_str(), X_OK)); });
  Call(t, "access W_OK 0644",
       [&] { return static_cast<long>(access(t.P("ro/readable").c_str(), W_OK)); });

  open_as("create in a 0777 dir", "pub/mine", O_CREAT | O_WRONLY);
  t.Stat("owner of the new file", "pub/mine");
  Call(t, "chmod own file",
       [&] { return static_cast<long>(chmod(t.P("pub/mine").c_str(), 0600)); });
  Call(t, "chown own file to self",
       [&] { return static_cast<long>(chown(t.P("pub/mine").c_str(), kUser, kGroup)); });
  Call(t, "chown own file to root",
       [&] { return static_cast<long>(chown(t.P("pub/mine").c_str(), 0, -1)); });
  Call(t, "chgrp own file to a foreign group",
       [&] { return static_cast<long>(chown(t.P("pub/mine").c_str(), -1, 0)); });
  Call(t, "chmod root's file",
       [&] { return static_cast<long>(chmod(t.P("ro/readable").c_str(), 0666)); });
  Call(t, "utimensat now on a file not writable", [&] {
    return static_cast<long>(utimensat(AT_FDCWD, t.P("ro/readable").c_str(), nullptr, 0));
  });
  timespec times[2] = {{1, 0}, {2, 0}};
  Call(t, "utimensat explicit on a file not owned", [&] {
    return static_cast<long>(utimensat(AT_FDCWD, t.P("pub/group_rw").c_str(), times, 0));
  });
  Call(t, "utimensat now on a group-writable file", [&] {
    return static_cast<long>(utimensat(AT_FDCWD, t.P("pub/group_rw").c_str(), nullptr, 0));
  });
  open_as("write a group-writable file", "pub/group_rw", O_WRONLY);
  Call(t, "setxattr on a file not writable", [&] {
    return static_cast<long>(setxattr(t.P("ro/readable").c_str(), "user.x", "1", 1, 0));
  });
  char value[16];
  Call(t, "getxattr on a file not readable", [&] {
    return static_cast<long>(getxattr(t.P("ro/secret").c_str(), "user.k", value, sizeof(value)));
  });
  Call(t, "setxattr on own file",
       [&] { return static_cast<long>(setxattr(t.P("pub/mine").c_str(), "user.x", "1", 1, 0)); });
  Call(t, "trusted xattr as a user", [&] {
    return static_cast<long>(setxattr(t.P("pub/mine").c_str(), "trusted.x", "1", 1, 0));
  });
  Call(t, "hard link to a file not owned",
       [&] { return static_cast<long>(link(t.P("ro/secret").c_str(), t.P("pub/hl").c_str())); });
  open_as("create in the sticky dir", "sticky/users", O_CREAT | O_WRONLY);
  Call(t, "unlink root's file in the sticky dir",
       [&] { return static_cast<long>(unlink(t.P("sticky/roots").c_str())); });
  Call(t, "rename root's file in the sticky dir", [&] {
    return static_cast<long>(rename(t.P("sticky/roots").c_str(), t.P("sticky/moved").c_str()));
  });
  open_as("write root's 0666 file in the sticky dir", "sticky/roots", O_WRONLY);
}

void AsOtherUser(PosixTrace& t) {
  Call(t, "unlink another user's file in the sticky dir",
       [&] { return static_cast<long>(unlink(t.P("sticky/users").c_str())); });
  long fd = OpenAt(t, "write a file of a group not mine", "pub/group_rw", O_WRONLY);
  if (fd >= 0) close(static_cast<int>(fd));
  fd = OpenAt(t, "read another user's 0600 file", "pub/mine", O_RDONLY);
  if (fd >= 0) close(static_cast<int>(fd));
  Call(t, "remove a file from a 0777 dir",
       [&] { return static_cast<long>(unlink(t.P("pub/mine").c_str())); });
}

TEST_P(PosixCompareTest, PermissionChecksAsOtherUsers) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as other users";
  Compare([](PosixTrace& t) {
    Prepare(t);
    t.AsUser(kUser, kGroup, AsUser);
    t.AsUser(kOther, kOther, AsOtherUser);
    t.Listing("pub at the end", "pub");
    t.Listing("sticky at the end", "sticky");
  });
}

}  // namespace
}  // namespace tipfs::testing
