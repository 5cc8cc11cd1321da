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

NoticedWait::NoticedWait() : armed_(HasWaitObserver()) {
  if (armed_) notice_at_ = std::chrono::steady_clock::now() + kWaitNoticeGrace;
}

// The analysis cannot see that `lock` is the holder of `mu`; the caller's REQUIRES(mu) is checked.
void NoticedWait::Wait(CondVar* cv, Mutex* mu, MutexLock* lock) NO_THREAD_SAFETY_ANALYSIS {
  if (!armed_) return cv->Wait(mu);
  if (cv->WaitUntil(mu, notice_at_)) return;  // woken: the caller looks at its condition again
  armed_ = false;
  lock->Unlock();  // the observer takes locks of its own
  NoticeWait();
  lock->Lock();
}

}  // namespace tipfs
