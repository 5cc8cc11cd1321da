// PosixTrace: runs a scripted sequence of system calls under one root directory and records one
// line per step (the result or the errno, and the stat fields a user can rely on), so that the
// same script run on a native directory and on a tipfs mount can be compared step by step.
//
// What is recorded is what must agree between two POSIX file systems. Deliberately left out,
// because it legitimately differs: inode numbers and st_dev, st_blocks and st_blksize, the size
// of directories (ext4 reports 4096-byte blocks, tipfs a byte count), and absolute timestamps
// (times are recorded as "same" / "now" relative to a mark taken before the step).
//
// Not thread-safe: one trace per thread.
#pragma once

#include <sys/stat.h>
#include <time.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tipfs::testing {

class PosixTrace {
 public:
  explicit PosixTrace(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  // root + "/" + rel.
  std::string P(std::string_view rel) const;

  // Runs `op` (a system call returning -1 and setting errno on failure) and records
  // "step: ok", "step: ok=<value>" when `record_value`, or "step: <ERRNO>". Returns op's value.
  long Do(const std::string& step, const std::function<long()>& op, bool record_value = false);
  // Records a value the script computed (bytes read, a listing, ...).
  void Note(const std::string& step, const std::string& value);

  // lstat (stat when `follow`) of `rel`: type, permission bits, nlink, uid, gid, rdev, and the
  // size of non-directories; or the errno.
  void Stat(const std::string& step, std::string_view rel, bool follow = false);
  void FStat(const std::string& step, int fd);
  // The whole contents (size and hash), or the errno of open/read.
  void Contents(const std::string& step, std::string_view rel);
  // readdir of `rel`: sorted "name:type" pairs (d_type letters), "." and ".." included.
  void Listing(const std::string& step, std::string_view rel);

  // Times before a step. Mark waits until the coarse realtime clock (what local file systems
  // stamp with) has passed every current time of the file, so that a time the step sets is
  // distinguishable from the old one without asserting anything about durations.
  struct Mark {
    timespec atime{}, mtime{}, ctime{};
    timespec t0{};  // the coarse clock right before the step
    int error = 0;
  };
  Mark MarkTimes(std::string_view rel);
  // Records for atime, mtime and ctime of `rel` whether each is the "same" as at the mark or
  // "now" (at or after the mark's clock), e.g. "a=same m=now c=now".
  void TimesSince(const std::string& step, std::string_view rel, const Mark& mark);

  // Runs `script` in a child process with the given credentials (no supplementary groups) on a
  // trace of the same root, and appends its lines to this trace. REQUIRES: running as root.
  void AsUser(uid_t uid, gid_t gid, const std::function<void(PosixTrace&)>& script);

  const std::vector<std::string>& lines() const { return lines_; }

 private:
  std::string root_;
  std::vector<std::string> lines_;
};

// Runs `script` on a trace rooted at `native_root` and on one rooted at `mount_root`, and expects
// the two traces to agree line by line (gtest failures name the differing steps). With the
// environment variable TIPFS_TRACE set, both traces are printed side by side.
void ExpectSameBehaviour(const std::string& native_root, const std::string& mount_root,
                         const std::function<void(PosixTrace&)>& script);

}  // namespace tipfs::testing
