// Wait notices: how a thread that must stay responsive learns that the code it runs waits for
// I/O, so that it can pass its other duties on when the wait lasts.
//
// The FUSE ring's queue thread (fusefs/fuse_ring.h) serves every request of its CPU's programs,
// writes among them, and a write waits for the disks: microseconds on NVMe, 15 ms on the papers'
// disks, indefinitely on a stalled one. The waits for I/O tell the thread's observer:
// - NoticedWait (a striped request's completions, a demand read's fetch) and the noticed locks
//   (a file's io_mutex, held across its I/O) bracket their sleep with WaitBegins/WaitEnds; the
//   observer (the ring) times the wait elsewhere and acts only if it lasts, so a short wait costs
//   a clock read and two atomic stores, and no timer;
// - NoticeWait() announces a wait that is always long (a round trip to a RADOS cluster).
// Threads without an observer pay one thread-local load per wait.
//
// Thread-safety: everything here is about the calling thread.
#pragma once

#include "util/mutex.h"

namespace tipfs {

class WaitObserver {
 public:
  // A long wait is about to begin. The caller may hold its own locks (a file's io_mutex around
  // a RADOS call): the observer takes only leaf locks.
  virtual void WillWait() = 0;
  // A wait that may be short begins and ends. May be called with the waiter's own lock held:
  // they must not take a lock that the waiter's completions take.
  virtual void WaitBegins() = 0;
  virtual void WaitEnds() = 0;

 protected:
  ~WaitObserver() = default;
};

// Sets the calling thread's observer (nullptr: none).
void SetWaitObserver(WaitObserver* observer);
bool HasWaitObserver();
// Tells the calling thread's observer, if any, that a long wait is about to begin.
void NoticeWait();

// The wait of the usual loop, bracketed for the thread's observer from its first sleep to the
// end of the scope:
//   MutexLock lock(&mu_);
//   NoticedWait noticed;
//   while (pending_ != 0) noticed.Wait(&cv_, &mu_);
class NoticedWait {
 public:
  NoticedWait() = default;
  ~NoticedWait();
  NoticedWait(const NoticedWait&) = delete;
  NoticedWait& operator=(const NoticedWait&) = delete;

  void Wait(CondVar* cv, Mutex* mu) REQUIRES(mu);

 private:
  WaitObserver* told_ = nullptr;  // the observer told WaitBegins, to be told WaitEnds
};

// ExclusiveLock and SharedLock whose wait for a lock held elsewhere is bracketed for the thread's
// observer: the holder may be waiting for the disks (a file's io_mutex is held across its I/O).
class SCOPED_CAPABILITY NoticedExclusiveLock {
 public:
  explicit NoticedExclusiveLock(SharedMutex* mu) ACQUIRE(mu);
  ~NoticedExclusiveLock() RELEASE() { mu_->Unlock(); }
  NoticedExclusiveLock(const NoticedExclusiveLock&) = delete;
  NoticedExclusiveLock& operator=(const NoticedExclusiveLock&) = delete;

 private:
  SharedMutex* const mu_;
};

class SCOPED_CAPABILITY NoticedSharedLock {
 public:
  explicit NoticedSharedLock(SharedMutex* mu) ACQUIRE_SHARED(mu);
  ~NoticedSharedLock() RELEASE() { mu_->UnlockShared(); }
  NoticedSharedLock(const NoticedSharedLock&) = delete;
  NoticedSharedLock& operator=(const NoticedSharedLock&) = delete;

 private:
  SharedMutex* const mu_;
};

}  // namespace tipfs
