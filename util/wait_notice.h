// Wait notices: how a thread that must stay responsive learns that the code it runs is about to
// wait for I/O for longer than a moment, so that it can pass its other duties on first.
//
// The FUSE ring's queue thread (fusefs/fuse_ring.h) serves every request of its CPU's programs,
// writes among them, and a write waits for the disks: a few microseconds on NVMe, 15 ms on the
// papers' disks, indefinitely on a stalled one. Waits for I/O (a striped request's completions, a
// demand read's fetch, a round trip to a RADOS cluster) call NoticeWait() once they have lasted
// kWaitNoticeGrace, or at once where they are always long; the queue thread's observer then hands
// its ring to a spare thread, and the requests behind the write are served meanwhile. Threads
// without an observer pay one thread-local load per wait.
//
// Thread-safety: everything here is about the calling thread.
#pragma once

#include <chrono>

#include "util/mutex.h"

namespace tipfs {

class WaitObserver {
 public:
  // Called on the observed thread before it waits; no lock of the caller's is held.
  virtual void WillWait() = 0;

 protected:
  ~WaitObserver() = default;
};

// How long a wait that is usually short may last before it is noticed: on the FUSE ring, the
// longest a request waits behind another request's I/O before a spare thread serves it.
inline constexpr std::chrono::microseconds kWaitNoticeGrace{100};

// Sets the calling thread's observer (nullptr: none).
void SetWaitObserver(WaitObserver* observer);
bool HasWaitObserver();
// Tells the calling thread's observer, if any, that the thread is about to wait.
void NoticeWait();

// A wait on a condition variable that is noticed once it has lasted kWaitNoticeGrace (on a thread
// with an observer; elsewhere a plain wait). It is the wait of the usual loop:
//   MutexLock lock(&mu_);
//   NoticedWait wait;
//   while (pending_ != 0) wait.Wait(&cv_, &mu_, &lock);
class NoticedWait {
 public:
  NoticedWait();
  // Waits until woken, or until the grace ends; then NoticeWait() runs with `mu` released.
  // REQUIRES: `lock` holds `mu`.
  void Wait(CondVar* cv, Mutex* mu, MutexLock* lock) REQUIRES(mu);

 private:
  bool armed_;  // the thread has an observer, not told yet
  std::chrono::steady_clock::time_point notice_at_;
};

}  // namespace tipfs
