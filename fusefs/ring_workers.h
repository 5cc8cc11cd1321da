// RingWorkers: the threads that serve the FUSE ring's requests whose waits its queue thread
// would not hear of, so that they do not hold up the other requests of their CPU's queue.
//
// A queue of the ring (fusefs/fuse_ring.h) is served by one thread at a time, and the kernel puts
// every request of a program running on that CPU into it. Most handlers either never wait for a
// disk or wait only where the wait is noticed (util/wait_notice.h), and then the ring passes to a
// spare thread if the wait lasts; those are served inline (ServedInline). The rest (an
// fsync, whose sync of the metadata store is not noticed, statfs, ioctls, and any opcode this
// list does not know) go to these workers, as /dev/fuse hands every request to one of libfuse's.
// The entry holding a handed-off request is not reused before its reply, so the request is
// handed over in place, without a copy.
//
// Thread-safety: Hand() from any thread; Start() and Stop() from one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <thread>
#include <vector>

#include "util/mutex.h"
#include "util/status.h"

namespace tipfs::fusefs {

// Whether the queue's thread serves requests of `opcode` itself (see above).
bool ServedInline(uint32_t opcode);

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
