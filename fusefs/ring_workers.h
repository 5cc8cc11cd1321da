// RingWorkers: the threads that serve the FUSE ring's requests whose handlers may wait for the
// disks, so that they do not hold up the other requests of their CPU's queue.
//
// A queue of the ring (fusefs/fuse_ring.h) has one thread, and the kernel puts every request of a
// program running on that CPU into it. Served inline, a write (which goes through to the disks),
// an fsync or an unlink (which removes the data from every disk) would keep that CPU's other
// programs waiting for as long as the disks take: 15 ms on the emulated disks of the papers,
// forever on a held or stalled one. The queue's thread therefore serves inline only the requests
// whose handlers never wait for a disk (ServedInline) and hands the rest to these workers, as
// /dev/fuse hands every request to one of libfuse's workers. The entry holding a handed-off
// request is not reused before its reply, so the request is handed over in place, without a copy.
//
// Thread-safety: Hand() from any thread; Start() and Stop() from one owner.
#pragma once

#include <linux/fuse.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "util/mutex.h"
#include "util/status.h"

namespace tipfs::fusefs {

// Whether the request `in` (followed by its arguments, `args`, `args_bytes` of them) is one whose
// tipfs handler never waits for the data disks: reads (answered from their completions), lookups,
// attributes and their changes other than the size, new names (mkdir, mknod, symlink, link),
// directory listings, extended attributes, flush, and an open or create without O_TRUNC.
// Everything else, including any opcode this list does not know, may wait.
bool ServedInline(const fuse_in_header& in, const void* args, size_t args_bytes);

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
