// GuardedHandler: no exception from a FUSE handler reaches libfuse's C frames. The reply
// functions are stand-ins that record the answer (no kernel, no request).
#include "fusefs/fuse_guard.h"

#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace tipfs::fusefs {
namespace {

std::vector<std::string> g_replies;

int RecordErr(fuse_req_t, int err) {
  g_replies.push_back("err " + std::to_string(err));
  return 0;
}
void RecordNone(fuse_req_t) { g_replies.push_back("none"); }

void Replies(fuse_req_t req, int what) {
  if (what == 0) throw std::bad_alloc();
  if (what == 1) throw std::out_of_range("a bug");
  if (what == 2) throw 42;
  RecordErr(req, 0);  // the handler's own reply
}

template <bool kNone>
using Guarded = GuardedHandler<Replies, kNone, RecordErr, RecordNone>;

TEST(FuseGuardTest, AnAllocationFailureAnswersEnomemAndABugEio) {
  static_assert(noexcept(Guarded<false>::Run(nullptr, 0)));
  g_replies.clear();
  Guarded<false>::Run(nullptr, 0);
  Guarded<false>::Run(nullptr, 1);
  Guarded<false>::Run(nullptr, 2);
  Guarded<false>::Run(nullptr, 3);
  EXPECT_EQ(g_replies, (std::vector<std::string>{"err 12", "err 5", "err 5", "err 0"}));
}

TEST(FuseGuardTest, AForgetThatThrowsStillAnswersWithNoReply) {
  g_replies.clear();
  Guarded<true>::Run(nullptr, 0);
  EXPECT_EQ(g_replies, std::vector<std::string>{"none"});
}

TEST(FuseGuardTest, UndoAfterAFailedReplyLetsNothingOut) {
  static_assert(noexcept(UndoAfterFailedReply([] {})));
  bool ran = false;
  UndoAfterFailedReply([&] {
    ran = true;
    throw std::runtime_error("undo failed");
  });
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace tipfs::fusefs
