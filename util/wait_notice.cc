#include "util/wait_notice.h"

namespace tipfs {
namespace {

thread_local WaitObserver* t_observer = nullptr;

}  // namespace

void SetWaitObserver(WaitObserver* observer) { t_observer = observer; }

bool HasWaitObserver() { return t_observer != nullptr; }

void NoticeWait() {
  if (t_observer != nullptr) t_observer->WillWait();
}

NoticedWait::~NoticedWait() {
  if (told_ != nullptr) told_->WaitEnds();
}

void NoticedWait::Wait(CondVar* cv, Mutex* mu) {
  if (told_ == nullptr && t_observer != nullptr) {
    told_ = t_observer;
    told_->WaitBegins();
  }
  cv->Wait(mu);
}

// The analysis cannot follow an acquisition on either branch; the declarations carry the contract.
NoticedExclusiveLock::NoticedExclusiveLock(SharedMutex* mu) NO_THREAD_SAFETY_ANALYSIS : mu_(mu) {
  if (t_observer == nullptr) {
    mu_->Lock();
    return;
  }
  if (mu_->TryLock()) return;
  t_observer->WaitBegins();
  mu_->Lock();
  t_observer->WaitEnds();
}

NoticedSharedLock::NoticedSharedLock(SharedMutex* mu) NO_THREAD_SAFETY_ANALYSIS : mu_(mu) {
  if (t_observer == nullptr) {
    mu_->LockShared();
    return;
  }
  if (mu_->TryLockShared()) return;
  t_observer->WaitBegins();
  mu_->LockShared();
  t_observer->WaitEnds();
}

}  // namespace tipfs
