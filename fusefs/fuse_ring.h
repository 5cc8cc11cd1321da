// FuseRing: FUSE requests over io_uring (the kernel's FUSE_OVER_IO_URING, Linux 6.14 and later),
// beside libfuse 3.14, which only reads /dev/fuse. A request then costs the daemon one
// io_uring_enter that both answers it and waits for the next, in place of a writev and a read, and
// is served on the CPU its program runs on.
//
// How it fits libfuse: the ring is the session's custom io (fuse_session_custom_io). Its read
// hook sees the kernel's INIT; its writev hook adds FUSE_OVER_IO_URING to the INIT reply, then
// starts one thread per CPU queue that registers the queue's entries. A request that arrives in
// an entry is rebuilt in place in front of its payload and handed to fuse_session_process_buf, so
// every handler stays libfuse's; its reply reaches the writev hook, from whichever thread replies
// (the asynchronous reads answer from their completions), which finds the entry by the request's
// unique, copies the reply into it and queues its commit (COMMIT_AND_FETCH, which also re-arms
// the entry) for the queue's serving thread, the ring's only submitter while it serves.
// Replies to /dev/fuse requests (INIT, FORGET and INTERRUPT stay there) and notifications are
// written to /dev/fuse as before, by libfuse's own loop, which keeps running.
//
// The kernel only offers the ring when fuse's module parameter enable_uring is Y; the ring is
// asked for by `tipfs mount --fuse-io-uring on`. No request waits long behind another's I/O: a
// queue's thread whose handler has waited for the disks longer than the grace (0.5 ms, timed by
// fusefs/wait_watchdog.h; util/wait_notice.h) has its ring passed to a spare thread, and the
// requests that may wait in other ways (fsync, the reclaims of unlink, rename and release,
// truncation, statfs, ioctls) go to a pool of workers (fusefs/ring_workers.h).
#pragma once

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "fusefs/fuse_ring_switch.h"
#include "fusefs/ring_workers.h"
#include "fusefs/wait_watchdog.h"
#include "util/statistics.h"
#include "util/status.h"

namespace tipfs::fusefs {

class FuseRing {
 public:
  // REQUIRES: `session` and `fs` outlive the ring; `statistics` may be null; `worker_threads` > 0
  // serve the requests that may wait for the disks, which `fs` helps tell (ServedInline in
  // fusefs/ring_workers.h).
  FuseRing(fuse_session* session, FileSystem* fs, Statistics* statistics, uint32_t worker_threads);
  ~FuseRing();  // StopServing(), Close()
  FuseRing(const FuseRing&) = delete;
  FuseRing& operator=(const FuseRing&) = delete;

  // Becomes the session's transport. REQUIRES: the session is mounted, not serving yet, and its
  // userdata is a FuseBridge whose ring() is this ring.
  Status Attach();

  // Stopping, in two steps, after the session loop and before the unmount: StopServing() makes
  // the queues' threads leave (requests sent after that wait for the unmount); the replies of
  // reads still in flight then commit themselves; Close() closes the rings, which takes the
  // entries back from the kernel (replies after it are dropped). Both idempotent.
  void StopServing();
  void Close();

  // libfuse's hooks (fuse_custom_io), public for the table in the .cc.
  ssize_t Read(int fd, void* buf, size_t len);
  ssize_t Write(int fd, struct iovec* iov, int count);

 private:
  struct Entry;
  class Queue;

  ssize_t WriteInit(int fd, struct iovec* iov, int count);
  Entry* Claim(uint64_t unique);
  Status MakeQueues(size_t payload_bytes);
  static void ServeRequest(void* ring, char* request, size_t bytes);  // RingWorkers::ServeFn
  static bool PassOnWaitingQueues(void* ring, int64_t deadline_ns);   // WaitWatchdog::CheckFn

  fuse_session* const session_;
  FileSystem* const fs_;
  Statistics* const statistics_;
  int fd_ = -1;
  // Whether the kernel's INIT offered the ring, and that request's unique until its reply (which
  // is patched) has gone.
  std::atomic<bool> kernel_offered_{false};
  std::atomic<uint64_t> init_unique_{0};
  // The queues are made once, by the INIT reply's writer, before queues_ready_ is set; every
  // entry of them is in entries_, for finding a reply's entry by its request's unique.
  std::vector<std::unique_ptr<Queue>> queues_;
  std::vector<Entry*> entries_;
  std::atomic<bool> queues_ready_{false};
  RingWorkers workers_;    // started with the queues, stopped after their threads
  WaitWatchdog watchdog_;  // started with the queues, stopped before them
};

}  // namespace tipfs::fusefs
