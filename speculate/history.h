// Hints from the last run (source `history`). In the program (never in a speculating child, nor
// in a fork child that did not exec), HistoryRecorder notes each read of a watched file by the
// thread speculation follows, coalescing sequential reads of a file, within the bounds of
// history_file.h; the recording is saved when the program exits through exit() or a return from
// main (and before an exec), replacing the last one; a killed program keeps the old one.
//
// HistoryReplay discloses the last run's recording of the same command ahead of the program:
// path hints (TIPFS_IOC_HINT_PATHS, issued by the program itself, so the daemon checks the
// reader's own permissions: a file it may not read is not hinted) on the named stream
// kHistoryStream, at most SpecOptions::max_ahead_hints recorded reads and max_ahead_bytes bytes
// ahead of the program's position. Each of the program's reads is looked for among the next
// kHistoryMatchWindow recorded reads; found, the position moves there and the window refills.
// kHistoryMissesToCancel reads in a row not found there (the program does something else now)
// cancel the rest of the history hints and end the replay. A file whose inode, size or mtime
// differs from the recording (or that is gone) is never hinted; its reads still count as
// positions. Both classes: not thread-safe (the Speculator calls them under its lock).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "speculate/history_file.h"
#include "speculate/mount_watch.h"

struct tipfs_hint_paths;

namespace tipfs::spec {

inline constexpr uint64_t kHistoryStream = (uint64_t{1} << 32) | 0x68697374;  // "hist"
inline constexpr size_t kHistoryMatchWindow = 64;
inline constexpr uint32_t kHistoryMissesToCancel = 16;
// Files a refill checks (a stat each, see Hintable) at most; the rest wait for the next refill,
// at the program's next matched read. A file not in the kernel's dentry cache costs a LOOKUP round
// trip in the program's thread, and at the start nothing is cached: checking a recording of 400
// files before the program began took 0.1-0.3 s on RADOS disks (bench/rados/README.md), where a
// program that lists its directories first (a search) would have made the later checks free.
inline constexpr size_t kHistoryChecksPerRefill = 16;

class HistoryRecorder {
 public:
  void Start(const std::string& executable, const std::vector<std::string>& argv,
             const std::string& cwd);
  void Disable() { enabled_ = false; }
  bool enabled() const { return enabled_; }
  // A read by the program of `length` bytes at `offset` of the watched file open on `fd`
  // (dev, ino).
  void OnRead(int fd, uint64_t dev, uint64_t ino, uint64_t offset, uint64_t length);
  // Saves the recording under `key` (nothing when disabled).
  void Save(uint64_t key);
  size_t reads() const { return recording_.reads.size(); }

 private:
  bool enabled_ = false;
  bool full_ = false;  // a bound was reached: later reads of new files are not recorded
  size_t path_bytes_ = 0;
  Recording recording_;
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> file_index_;  // (dev, ino) -> files[i]
};

struct HistoryCounters {
  uint64_t entries = 0;  // recorded reads replayed (the recording's length)
  uint64_t hints = 0;    // recorded reads disclosed
  uint64_t hint_bytes = 0;
  uint64_t cancelled = 0;      // disclosed and not reached when the replay was cancelled
  uint64_t files_changed = 0;  // recorded files not hinted: changed since, gone, or off the mount
  uint64_t refused = 0;        // recorded reads the mount refused (not readable, say)
};

class HistoryReplay {
 public:
  ~HistoryReplay();
  // Loads the recording of `key` (made by the same executable, arguments and directory) and
  // discloses its first window. Nothing to replay is not an error.
  void Start(uint64_t key, const Recording& expected_command, const MountWatch* watch,
             const HintSink* sink, uint32_t max_ahead_reads, uint64_t max_ahead_bytes);
  bool active() const { return active_; }
  // A read by the program of [offset, offset + length) of (dev, ino).
  void OnRead(uint64_t dev, uint64_t ino, uint64_t offset, uint64_t length);
  // Cancels what is still disclosed and ends the replay.
  void Stop();
  // Ends the replay without a word to the mount (a fork child: the stream is the parent's).
  void Forget() { active_ = false; }
  const HistoryCounters& counters() const { return counters_; }

 private:
  struct File {
    int mount = -1;        // index into the MountWatch; -1: off the watched mounts
    std::string path;      // relative to that mount's root
    bool checked = false;  // stat'ed against the recording (when first due to be hinted)
    bool unchanged = false;
  };
  // Whether recorded read `index`'s file is as recorded (stat'ed once, when first needed).
  bool Hintable(size_t index);
  void Refill();
  // Sends the records built so far to `mount`; on a refusal, one by one (the others still go).
  void Send(int mount);
  void Cancel();

  bool active_ = false;
  const HintSink* sink_ = nullptr;
  uint32_t max_ahead_reads_ = 0;
  uint64_t max_ahead_bytes_ = 0;
  Recording recording_;
  std::vector<File> files_;
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> file_index_;  // (mount dev, ino) -> file
  size_t next_ = 0;    // the next recorded read the program should make
  size_t issued_ = 0;  // recorded reads before this one were disclosed (or skipped)
  uint64_t ahead_bytes_ = 0;
  uint32_t misses_ = 0;
  tipfs_hint_paths* request_ = nullptr;
  std::vector<size_t> in_request_;  // the recorded reads in request_
  HistoryCounters counters_;
};

}  // namespace tipfs::spec
