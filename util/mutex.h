// The lock types tipfs uses: Mutex with its scoped MutexLock, a CondVar that waits on a Mutex,
// and SharedMutex with its scoped SharedLock (readers) and ExclusiveLock (one writer). They wrap
// the standard ones and carry clang's thread-safety attributes (util/thread_annotations.h), so a
// `-Wthread-safety` build checks every GUARDED_BY and REQUIRES in the tree.
//
// Waiting on a condition is written as a loop, which the analysis can check:
//   MutexLock lock(&mu_);
//   while (pending_ != 0) idle_.Wait(&mu_);
// (A predicate lambda would be analysed as a separate function that holds no lock.)
//
// Lock order across layers, outermost first (docs/DESIGN.md, "Locks", has the full list): a
// file's InodeState::io_mutex -> FileCache::mu_ or MetaStore's mu (never both) -> a disk's locks
// -> the Clock's. No lock is held across a Disk submission that can complete inline, a wait for
// I/O, or a caller's callback.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "util/cpu_relax.h"
#include "util/thread_annotations.h"

namespace tipfs {

class CondVar;

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // Most locks guard memory work only, so a taken lock is usually free again within a
  // microsecond or two, sooner than a futex sleep and wake-up would hand it over: Lock tries a
  // bounded number of times before it sleeps (200 CpuRelax: about 5 us on AMD Zen, 10 on Intel).
  // A waiter for one of the few locks held across I/O (the metadata store's, across RocksDB;
  // RadosDisk's usage call) pays those tries in CPU before it sleeps.
  void Lock() ACQUIRE() {
    if (mu_.try_lock()) return;
    for (int i = 0; i < tries_; ++i) {
      for (int p = 0; p < 4; ++p) CpuRelax();
      if (mu_.try_lock()) return;
    }
    mu_.lock();
  }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // How many times Lock tries again on the calling thread (default kTries). A real-time thread
  // may have preempted the holder on its own CPU, where long tries only keep the holder from
  // running: the clock's timer thread takes kRealTimeTries.
  static void SetTriesOnThisThread(int tries) { tries_ = tries; }
  static constexpr int kTries = 50;
  static constexpr int kRealTimeTries = 8;
  // Tells the analysis the caller holds the lock where it cannot see it (no run-time check:
  // std::mutex does not know its owner).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  static inline thread_local int tries_ = kTries;
  std::mutex mu_;
};

// Holds a Mutex for a scope. Unlock() and Lock() release and retake it inside the scope (to
// call out without the lock); the destructor releases it only if held.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// A condition variable whose waits name the Mutex they release and retake. Spurious wake-ups
// happen: callers wait in a loop on their condition.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // the caller's MutexLock still owns the mutex
  }
  // False if the deadline passed (steady_clock is CLOCK_MONOTONIC on Linux, as Clock is).
  bool WaitUntil(Mutex* mu, std::chrono::steady_clock::time_point deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  template <class Rep, class Period>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout) REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A reader-writer lock: many holders of the shared lock, or one of the exclusive lock.
class CAPABILITY("shared mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  void LockShared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() RELEASE_SHARED() { mu_.unlock_shared(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  bool TryLockShared() TRY_ACQUIRE_SHARED(true) { return mu_.try_lock_shared(); }
  void AssertHeld() const ASSERT_CAPABILITY(this) {}
  void AssertSharedHeld() const ASSERT_SHARED_CAPABILITY(this) {}

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex shared (a reader) for a scope.
class SCOPED_CAPABILITY SharedLock {
 public:
  explicit SharedLock(SharedMutex* mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_->LockShared(); }
  ~SharedLock() RELEASE() { mu_->UnlockShared(); }
  SharedLock(const SharedLock&) = delete;
  SharedLock& operator=(const SharedLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// Holds a SharedMutex exclusively (the one writer) for a scope.
class SCOPED_CAPABILITY ExclusiveLock {
 public:
  explicit ExclusiveLock(SharedMutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~ExclusiveLock() RELEASE() { mu_->Unlock(); }
  ExclusiveLock(const ExclusiveLock&) = delete;
  ExclusiveLock& operator=(const ExclusiveLock&) = delete;

 private:
  SharedMutex* const mu_;
};

}  // namespace tipfs
