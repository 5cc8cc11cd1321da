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

// A new process whose pid is `pid` (clone3 with set_tid, CAP_SYS_ADMIN): it waits for a byte on
// `release` and exits. -errno when the kernel refuses.
pid_t ProcessWithPid(pid_t pid, int release) {
  clone_args args = {};
  args.exit_signal = SIGCHLD;
  args.set_tid = reinterpret_cast<uint64_t>(&pid);
  args.set_tid_size = 1;
  long child = syscall(SYS_clone3, &args, sizeof(args));
  if (child == 0) {
    char c;
    (void)!read(release, &c, 1);
    _exit(0);
  }
  return child < 0 ? -errno : static_cast<pid_t>(child);
}

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
  int release[2];
  ASSERT_EQ(pipe2(release, O_CLOEXEC), 0);
  pid_t child = -EEXIST;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (child == -EEXIST && std::chrono::steady_clock::now() < deadline) {
    child = ProcessWithPid(tid, release[0]);
    if (child == -EEXIST) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (child == -EPERM) GTEST_SKIP() << "clone3 set_tid refused here (pid namespace)";
  ASSERT_EQ(child, tid) << "clone3: " << strerror(-child);
  // The remembered answer is confirmed again once it is 100 ms old (an id cannot come back
  // sooner without set_tid): from then on the new process owns the id.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (ProcessOf(static_cast<uint32_t>(tid)) != static_cast<uint32_t>(tid) &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(ProcessOf(static_cast<uint32_t>(tid)), static_cast<uint32_t>(tid))
      << "the reused id still maps to its old process";
  close(release[1]);
  int status;
  waitpid(child, &status, 0);
  close(release[0]);
}

}  // namespace
}  // namespace tipfs::fusefs
