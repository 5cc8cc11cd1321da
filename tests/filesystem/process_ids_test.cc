// ProcessOf: the thread group of the thread a FUSE request comes from, remembered per thread id,
// and never the old owner's once the id has gone to another process (ids wrap at pid_max).
#include "fusefs/process_ids.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

namespace tipfs::fusefs {
namespace {

// A new process whose pid is `pid` (clone3 with set_tid, CAP_SYS_ADMIN): it waits for `release`
// to reach EOF and exits. -errno when the kernel refuses. The child closes its copy of the write
// end first: clone3 is a fork, and with that copy open its read would never see EOF.
pid_t ProcessWithPid(pid_t pid, const int release[2]) {
  clone_args args = {};
  args.exit_signal = SIGCHLD;
  args.set_tid = reinterpret_cast<uint64_t>(&pid);
  args.set_tid_size = 1;
  long child = syscall(SYS_clone3, &args, sizeof(args));
  if (child == 0) {
    close(release[1]);
    char c;
    while (read(release[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  return child < 0 ? -errno : static_cast<pid_t>(child);
}

// Ends the process ProcessWithPid made, also when an assertion returns early.
struct ReleaseOnExit {
  int release[2] = {-1, -1};
  pid_t child = -1;
  ~ReleaseOnExit() {
    if (release[1] >= 0) close(release[1]);
    if (child > 0) {
      int status;
      waitpid(child, &status, 0);
    }
    if (release[0] >= 0) close(release[0]);
  }
};

TEST(ProcessIdsTest, AThreadMapsToItsProcess) {
  EXPECT_EQ(ProcessOf(static_cast<uint32_t>(getpid())), static_cast<uint32_t>(getpid()));
  uint32_t seen = 0;
  std::thread([&] { seen = ProcessOf(static_cast<uint32_t>(gettid())); }).join();
  EXPECT_EQ(seen, static_cast<uint32_t>(getpid()));
}

TEST(ProcessIdsTest, AThreadIdReusedByAnotherProcessMapsToTheNewProcess) {
  if (geteuid() != 0) GTEST_SKIP() << "clone3 with set_tid needs CAP_SYS_ADMIN (run as root)";
  // A thread of this process, remembered as ours...
  pid_t tid = 0;
  std::thread([&] {
    tid = gettid();
    EXPECT_EQ(ProcessOf(static_cast<uint32_t>(tid)), static_cast<uint32_t>(getpid()));
  }).join();
  // ...ends, and a new process gets exactly its id (the kernel frees the id shortly after the
  // thread's exit, which join does not wait for: EEXIST until then).
  ReleaseOnExit process;
  ASSERT_EQ(pipe2(process.release, O_CLOEXEC), 0);
  pid_t child = -EEXIST;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (child == -EEXIST && std::chrono::steady_clock::now() < deadline) {
    child = ProcessWithPid(tid, process.release);
    if (child == -EEXIST) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (child > 0) process.child = child;
  if (child == -EPERM) GTEST_SKIP() << "clone3 set_tid refused here (pid namespace)";
  ASSERT_EQ(child, tid) << "clone3: " << strerror(-child);
  // The remembered answer is confirmed again once it is 100 ms old (an id cannot come back
  // sooner without set_tid): from then on the new process owns the id. The wait is for that
  // condition, however slow the machine; 30 s only keeps a broken build from hanging.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (ProcessOf(static_cast<uint32_t>(tid)) != static_cast<uint32_t>(tid) &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(ProcessOf(static_cast<uint32_t>(tid)), static_cast<uint32_t>(tid))
      << "the reused id still maps to its old process";
}

}  // namespace
}  // namespace tipfs::fusefs
