// Manual hints for the bench workloads, written directly against the frozen ioctl ABI of
// include/tipfs/hint.h (TIPFS_IOC_HINT_FD, TIPFS_IOC_HINT_PATHS, TIPFS_IOC_QUERY).
//
// A HintWindow holds a program's future reads in the order it will issue them and discloses them
// ahead of the reads: all at once when the mount's per-process cap on outstanding hinted bytes
// allows (agrep hints its 18 MiB at the start, as the paper's hinted agrep did), otherwise as a
// sliding window topped up as the program reports what it consumed, so a long disclosure (an
// epoch of samples, a sequence of slices) is never refused as a whole. Hints are advisory: when
// the file is not on a tipfs mount (the ioctls fail with ENOTTY) the window prints one warning to
// stderr and turns itself off, and the program runs exactly as the original. A refused call never
// stops the program either; the window retries after progress, then item by item, then drops.
// Not thread-safe: one window per reading thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>

namespace tipfs::bench {

class HintWindow {
 public:
  // `program` prefixes the warnings. `mount_fd` is any open file or directory on the file system
  // the reads go to; path hints and the cap query are issued on it. Not owned; must stay open
  // while the window is used.
  HintWindow(std::string program, int mount_fd);

  // The same, with the ioctl(2) call replaced: `ioctl_call` returns 0, or -1 with errno set,
  // like the system call. For tests that check what a tipfs mount would receive.
  using IoctlCall = std::function<int(int fd, unsigned long request, void* argument)>;
  HintWindow(std::string program, int mount_fd, IoctlCall ioctl_call);

  // Queue future reads, in the order they will be issued. `length` is the number of bytes that
  // will be read (the window's accounting uses it; it must not be 0).
  // AddPath: a file the program may not have opened yet, by absolute path.
  void AddPath(const std::string& absolute_path, uint64_t offset, uint64_t length);
  // AddFd: a range of an open file. `fd` must stay open until the range is disclosed.
  void AddFd(int fd, uint64_t offset, uint64_t length);

  // Discloses queued reads as far as the window allows. Call after queueing a batch.
  void Disclose();

  // The program has read `bytes` of hinted data since the last call; keeps the window full.
  void Consumed(uint64_t bytes);

  // Drops everything queued but not yet disclosed (the program changed its plans).
  void DropQueued() { queue_.clear(); }

  // False once the file system turned out not to take hints.
  bool active() const { return active_; }

  // For the stderr report: "hint_calls=.. hinted_bytes=.. refused=.. dropped=.. cap=.."
  std::string Summary() const;

 private:
  struct Item {
    bool by_path;
    int fd;  // by_path == false
    std::string path;
    uint64_t offset;
    uint64_t length;
  };

  void QueryCapOnce();
  // Sends items [0, n) of the queue as one ioctl (all of the same kind, and for fd items the same
  // fd). Returns 0 on success or the errno.
  int SendBatch(size_t n);
  // How many leading queue items fit in one ioctl and in `budget` bytes (at least one).
  size_t NextBatchSize(uint64_t budget) const;
  void HandleRefusal(int err, size_t batch_items);
  void WarnOnce(bool* warned, const std::string& message);

  std::string program_;
  int mount_fd_;
  IoctlCall ioctl_call_;

  bool active_ = true;
  bool cap_queried_ = false;
  uint64_t cap_bytes_ = 0;  // 0: unknown (no limit applied by the window itself)

  std::deque<Item> queue_;
  uint64_t disclosed_ = 0;  // bytes disclosed so far
  uint64_t consumed_ = 0;   // bytes the program reported read, capped at disclosed_
  // After a refusal with hints outstanding: wait until outstanding falls to this before retrying.
  bool waiting_for_progress_ = false;
  uint64_t retry_when_outstanding_at_most_ = 0;
  // After a refused batch: send its items one per call, to find and drop the one refused.
  size_t single_item_calls_left_ = 0;

  uint64_t calls_ = 0;
  uint64_t refused_ = 0;
  uint64_t dropped_ = 0;
  bool warned_unsupported_ = false;
  bool warned_refused_ = false;
  bool warned_dropped_ = false;
};

}  // namespace tipfs::bench
