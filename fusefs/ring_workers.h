// RingWorkers: the threads that serve the FUSE ring's requests that may wait for the disks in a
// way its queue thread could not hand on, so that they do not hold up the other requests of
// their CPU's queue.
//
// A queue of the ring (fusefs/fuse_ring.h) is served by one thread at a time, and the kernel puts
// every request of a program running on that CPU into it. Requests that never wait for a disk
// are served inline (ServedInline), and so are writes: their waits are futex waits that are
// noticed (util/wait_notice.h), and the ring passes to a spare thread if they last. So are
// unlinks, rmdirs, renames and releases unless the file system expects them to free a file's
// data after syncing the metadata store: its fdatasync is an uninterruptible sleep, during which
// the kernel could not deliver the requests of the entries this thread committed last. Those go
// to these workers, as /dev/fuse hands every request to one of libfuse's, and so do fsyncs,
// truncations, statfs, ioctls, and any opcode this list does not know. The entry holding a
// handed-off request is not reused before its reply, so the request is handed over in place,
// without a copy.
//
// Thread-safety: Hand() from any thread; Start() and Stop() from one owner.
#pragma once

#include <linux/fuse.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <thread>
#include <vector>

#include "util/mutex.h"
#include "util/status.h"

namespace tipfs::fusefs {

class FileSystem;

// Whether the queue's thread serves the request `in` (followed by its arguments, `args`,
// `args_bytes` of them) itself (see above): requests that never wait for the disks (reads,
// lookups, attributes and their changes other than the size, new names, listings, extended
// attributes, flush, an open or create without O_TRUNC), writes, whose waits are noticed, and
// unlinks, rmdirs, renames and releases that `fs` does not expect to sync (all of them go to the
// workers when `fs` is null).
bool ServedInline(const fuse_in_header& in, const void* args, size_t args_bytes, FileSystem* fs);

class RingWorkers {
 public:
  // Serves one request: `request` points at its fuse_in_header, `bytes` long.
  using ServeFn = void (*)(void* context, char* request, size_t bytes);

  // REQUIRES: `threads` > 0; `serve` is safe to call from several threads at once.
  RingWorkers(ServeFn serve, void* context, uint32_t threads);
  ~RingWorkers();  // Stop()
  RingWorkers(const RingWorkers&) = delete;
  RingWorkers& operator=(const RingWorkers&) = delete;

  Status Start();

  // Queues a request for the first idle worker. REQUIRES: Start() succeeded, Stop() not called,
  // and the request's memory stays valid until it has been served.
  void Hand(char* request, size_t bytes);

  // Serves what was handed and not yet taken, then joins the workers. Idempotent.
  void Stop();

 private:
  struct Request {
    char* data;
    size_t bytes;
  };

  void Run(uint32_t index);

  const ServeFn serve_;
  void* const context_;
  const uint32_t thread_count_;
  std::vector<std::thread> threads_;
  Mutex mu_;
  CondVar work_;
  std::deque<Request> queued_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
};

}  // namespace tipfs::fusefs
