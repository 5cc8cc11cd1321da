// Helpers for tests that drive a Disk directly: build a request, submit batches and wait for them.
#pragma once

#include <functional>

#include "stripe/disk.h"
#include "util/mutex.h"

namespace tipfs::testing {

// Waits for a batch of asynchronous completions, each storing its result in a caller's slot.
class Completions {
 public:
  std::function<void(Result<uint64_t>)> Callback(Result<uint64_t>* slot) {
    {
      MutexLock lock(&mu_);
      ++pending_;
    }
    return [this, slot](Result<uint64_t> r) {
      MutexLock lock(&mu_);
      *slot = std::move(r);
      if (--pending_ == 0) cv_.SignalAll();
    };
  }
  void Wait() {
    MutexLock lock(&mu_);
    while (pending_ != 0) cv_.Wait(&mu_);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int pending_ GUARDED_BY(mu_) = 0;
};

// Submits one request whose completion lands in *slot (tracked by `completions`).
inline void SubmitTo(stripe::Disk* disk, stripe::DiskRequest::Kind kind, stripe::ObjectId object,
                     uint64_t offset, uint64_t length, char* buffer, Completions* completions,
                     Result<uint64_t>* slot) {
  stripe::DiskRequest r;
  r.kind = kind;
  r.object = object;
  r.offset = offset;
  r.length = length;
  r.buffer = buffer;
  r.done = completions->Callback(slot);
  disk->Submit(std::move(r));
}

// One request, waited for.
inline Result<uint64_t> SubmitAndWait(stripe::Disk* disk, stripe::DiskRequest::Kind kind,
                                      stripe::ObjectId object, uint64_t offset, uint64_t length,
                                      char* buffer) {
  Result<uint64_t> result = Status::IOError("never completed");
  Completions c;
  SubmitTo(disk, kind, object, offset, length, buffer, &c, &result);
  c.Wait();
  return result;
}

}  // namespace tipfs::testing
