// Inspection helpers for integration tests on a real tipfs mount: the daemon's process and pid
// file, the kernel mount table, the disks' object trees, commands with stdout and stderr apart,
// and snapshots of a directory tree (stat fields, contents hashes, xattrs) to compare two trees
// or one tree before and after a remount.
//
// Plain functions over the file system; safe to call from several threads.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tipfs::testing {

class TipfsMount;  // tests/support/mount_fixture.h

// "ENOENT" for ENOENT, "OK" for 0.
std::string ErrnoName(int err);

// ---- processes and mounts ----

// The pid in <disk0>/tipfs.pid, or 0 when there is no readable pid file.
pid_t ReadDaemonPid(const std::string& disk0);
// True while `pid` exists and is not a zombie.
bool ProcessAlive(pid_t pid);
// Waits (polling) until `pid` is gone or a zombie; false after `seconds`.
bool WaitForProcessExit(pid_t pid, double seconds);
// Processes (other than this one) whose command line contains `text`.
std::vector<pid_t> ProcessesMentioning(const std::string& text);
// True when the kernel mount table of this process lists `path` (canonicalised) as a mount point.
bool IsMountPoint(const std::string& path);
// Processes with a descriptor, cwd or root under `path`, as "pid (comm): what" lines: the
// explanation when an unmount fails with EBUSY.
std::string ProcessesUsing(const std::string& path);
// Unmounts `mount` like TipfsMount::Unmount, but when the kernel says the mount is busy it
// names who uses it (on stderr) and tries again, up to `attempts` times 200 ms apart: another
// process that walks /tmp (a `find`, a `du`, someone's cleanup) can hold any mount for a moment.
// Returns "" or the last error with the users seen.
std::string UnmountRetryingWhileBusy(TipfsMount& mount, int attempts = 10);
// Detaches whatever is mounted at `path` (umount -l / fusermount3 -uz). For dead FUSE mounts.
void LazyUnmount(const std::string& path);
// Sends the daemon SIGTERM and expects what SIGTERM promises: it exits within a minute and takes
// its mount at `mountpoint` with it (a failure otherwise; a mount left behind is detached).
void ExpectTerminatedDaemonUnmounts(pid_t daemon, const std::string& mountpoint);

struct CommandResult {
  int exit_code = -1;  // 128+signal when killed
  std::string out;
  std::string err;
};
// Runs `command` with /bin/sh, stdout and stderr captured separately.
CommandResult RunSplit(const std::string& command);
// Quotes a word for /bin/sh.
std::string ShellQuote(const std::string& word);

// ---- backing disks ----

// <disk>/objects/<ino & 0xff as 2 hex>/<ino as 16 hex>, the object of inode `ino` on that disk.
std::string ObjectPath(const std::string& disk, uint64_t ino);
// Every object file under <disk>/objects/: path relative to objects/ -> st_size.
std::map<std::string, uint64_t> ObjectFiles(const std::string& disk);
// Sum of the st_size of every object file on the disk.
uint64_t ObjectBytes(const std::string& disk);
// One line per entry under `dir` (recursively): "relpath type size", and for regular files
// named tipfs-label also a hash of their bytes. Sorted. `skip_sizes_under` lists relative
// directories (e.g. "meta") whose files are listed by name only, because a live process writes
// them.
std::string DiskListing(const std::string& dir,
                        const std::vector<std::string>& skip_sizes_under = {});

// ---- files ----

std::string ReadFileOrDie(const std::string& path);  // ADD_FAILURE and "" on error
bool WriteFileBytes(const std::string& path, const std::string& bytes, mode_t mode = 0644);
// FNV-1a 64 of the bytes, as 16 hex digits (collisions are irrelevant for test comparisons).
std::string HashBytes(const std::string& bytes);
std::string HashFile(const std::string& path);
// Deterministic pseudo-random bytes (splitmix64 from `seed`).
std::string PatternBytes(size_t length, uint64_t seed);

// ---- tree snapshots ----

struct SnapshotOptions {
  bool inode_numbers = false;  // st_ino (and hard links by inode identity either way)
  bool ctime = false;
  bool atime = false;
  bool mtime = true;  // of non-directories; directories see `dir_mtime`
  bool dir_mtime = true;
  bool dir_nlink = true;
  bool owner = true;
  bool xattrs = true;
  bool contents = true;  // reading moves atimes (relatime): take stat-only snapshots apart
};

// One line per entry below `root` (root itself excluded), sorted by path: path, type, mode,
// owner, nlink, size (not of directories: that legitimately differs between file systems),
// rdev, times as selected, the symlink target or the contents hash, the user.* xattrs, and which
// earlier path it is a hard link of.
std::vector<std::string> SnapshotTree(const std::string& root, const SnapshotOptions& options = {});

// Lines that differ, for failure messages ("- only in a", "+ only in b").
std::string DiffLines(const std::vector<std::string>& a, const std::vector<std::string>& b);

}  // namespace tipfs::testing
