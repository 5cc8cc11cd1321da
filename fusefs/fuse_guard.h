// Nothing throws into libfuse: it calls the FUSE handlers from C, and an exception that reached
// it would end the daemon (std::terminate) with every request in flight unanswered. A handler
// is installed as GuardedHandler<handler>::Run, which is noexcept: an allocation failure answers
// ENOMEM, any other exception (a bug) is logged and answers EIO. Handlers reply as their last
// step, so an exception always comes before the reply; what a handler does after a failed reply
// (undo an open whose opener is gone) runs in UndoAfterFailedReply, which lets nothing out either.
// The reply functions are parameters so the tests can check the answers without a kernel.
#pragma once

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <new>

namespace tipfs::fusefs {

namespace internal {
inline void LogEscapedException(const char* where, const char* what) noexcept {
  std::fprintf(stderr, "tipfs: INTERNAL ERROR: exception %s: %s\n", where, what);
}
}  // namespace internal

template <typename Fn>
void UndoAfterFailedReply(Fn&& undo) noexcept {
  try {
    undo();
  } catch (const std::exception& e) {
    internal::LogEscapedException("undoing after a failed reply", e.what());
  } catch (...) {
    internal::LogEscapedException("undoing after a failed reply", "not a std::exception");
  }
}

// `kRepliesNone`: the handler answers with fuse_reply_none (forget), so a failure does too.
template <auto Handler, bool kRepliesNone = false, auto ReplyErr = &fuse_reply_err,
          auto ReplyNone = &fuse_reply_none>
struct GuardedHandler;

template <typename... Args, void (*Handler)(fuse_req_t, Args...), bool kRepliesNone, auto ReplyErr,
          auto ReplyNone>
struct GuardedHandler<Handler, kRepliesNone, ReplyErr, ReplyNone> {
  static void Run(fuse_req_t req, Args... args) noexcept {
    int err = 0;
    try {
      Handler(req, args...);
      return;
    } catch (const std::bad_alloc&) {
      err = ENOMEM;
    } catch (const std::exception& e) {
      internal::LogEscapedException("in a FUSE handler", e.what());
      err = EIO;
    } catch (...) {
      internal::LogEscapedException("in a FUSE handler", "not a std::exception");
      err = EIO;
    }
    if constexpr (kRepliesNone) {
      ReplyNone(req);
    } else {
      (void)ReplyErr(req, err);
    }
  }
};

}  // namespace tipfs::fusefs
