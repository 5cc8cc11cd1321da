// Unit tests of libtipspec's pieces that need no child: the knobs, the hint log's on-track and
// run-ahead rules, the sandbox filter assembly, and the launcher's environment and exit status.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>

#include "speculate/fork_policy.h"
#include "speculate/launcher.h"
#include "speculate/options.h"
#include "speculate/raw_syscall.h"
#include "speculate/seccomp_filter.h"
#include "speculate/shared_log.h"
#include "tests/speculate/spec_test_support.h"

namespace tipfs::spec {
namespace {

Result<SpecOptions> FromMap(const std::map<std::string, std::string>& env) {
  return OptionsFromEnvironment([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(SpecOptionsTest, DefaultsWhenNothingIsSet) {
  Result<SpecOptions> options = FromMap({});
  ASSERT_TRUE(options.ok());
  EXPECT_TRUE(options->mount.empty());
  EXPECT_EQ(options->wait, WaitPolicy::kLearned);
  EXPECT_TRUE(options->learn);
  EXPECT_EQ(options->max_tainted_bytes, 4ull << 20);
  EXPECT_EQ(options->max_ahead_hints, 512u);
  EXPECT_EQ(options->max_ahead_bytes, 32ull << 20);
  EXPECT_EQ(options->stall_usec, 200u);
  EXPECT_EQ(options->max_behind_reads, 64u);
  EXPECT_DOUBLE_EQ(options->max_overhead_percent, 1.0);
  EXPECT_FALSE(options->lockstep);
  EXPECT_FALSE(options->print_stats);
}

TEST(SpecOptionsTest, ReadsEveryKnob) {
  Result<SpecOptions> options = FromMap({{"TIPSPEC_MOUNT", "/mnt/t"},
                                         {"TIPSPEC_WAIT", "1"},
                                         {"TIPSPEC_MAX_AHEAD_HINTS", "64"},
                                         {"TIPSPEC_MAX_AHEAD_BYTES", "8M"},
                                         {"TIPSPEC_STALL_USEC", "0"},
                                         {"TIPSPEC_LOCKSTEP", "1"},
                                         {"TIPSPEC_MAX_BEHIND", "8"},
                                         {"TIPSPEC_MAX_OVERHEAD", "2.5"},
                                         {"TIPSPEC_HINT_LOG", "/tmp/h"},
                                         {"TIPSPEC_LEARN", "0"},
                                         {"TIPSPEC_MAX_TAINTED_BYTES", "1M"},
                                         {"TIPSPEC_STATS_FILE", "/tmp/s"}});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->mount, "/mnt/t");
  EXPECT_EQ(options->wait, WaitPolicy::kAlways);
  EXPECT_FALSE(options->learn);
  EXPECT_EQ(options->max_tainted_bytes, 1ull << 20);
  EXPECT_EQ(options->max_ahead_hints, 64u);
  EXPECT_EQ(options->max_ahead_bytes, 8ull << 20);
  EXPECT_EQ(options->stall_usec, 0u);
  EXPECT_TRUE(options->lockstep);
  EXPECT_EQ(options->max_behind_reads, 8u);
  EXPECT_DOUBLE_EQ(options->max_overhead_percent, 2.5);
  EXPECT_EQ(options->hint_log, "/tmp/h");
  EXPECT_TRUE(options->print_stats);
  EXPECT_EQ(options->stats_file, "/tmp/s");
}

TEST(SpecOptionsTest, RejectsMalformedValuesNamingTheVariable) {
  Result<SpecOptions> bad_wait = FromMap({{"TIPSPEC_WAIT", "maybe"}});
  EXPECT_EQ(bad_wait.error(), EINVAL);
  EXPECT_NE(bad_wait.status().message().find("TIPSPEC_WAIT"), std::string::npos);
  EXPECT_EQ(FromMap({{"TIPSPEC_MAX_AHEAD_HINTS", "0"}}).error(), EINVAL);
  EXPECT_EQ(FromMap({{"TIPSPEC_MAX_AHEAD_HINTS", "12x"}}).error(), EINVAL);
  EXPECT_EQ(FromMap({{"TIPSPEC_MAX_AHEAD_BYTES", "3T"}}).error(), EINVAL);
  EXPECT_EQ(FromMap({{"TIPSPEC_MAX_BEHIND", "0"}}).error(), EINVAL);
  EXPECT_EQ(FromMap({{"TIPSPEC_WAIT", "auto"}})->wait, WaitPolicy::kLearned);
  EXPECT_EQ(FromMap({{"TIPSPEC_WAIT", "learned"}})->wait, WaitPolicy::kLearned);
  EXPECT_EQ(FromMap({{"TIPSPEC_WAIT", "0"}})->wait, WaitPolicy::kNever);
  EXPECT_EQ(FromMap({{"TIPSPEC_LEARN", "perhaps"}}).error(), EINVAL);
  EXPECT_EQ(FromMap({{"TIPSPEC_MAX_TAINTED_BYTES", "lots"}}).error(), EINVAL);
  Result<SpecOptions> bad_overhead = FromMap({{"TIPSPEC_MAX_OVERHEAD", "lots"}});
  EXPECT_EQ(bad_overhead.error(), EINVAL);
  EXPECT_NE(bad_overhead.status().message().find("TIPSPEC_MAX_OVERHEAD"), std::string::npos);
  EXPECT_EQ(FromMap({{"TIPSPEC_MAX_OVERHEAD", "-1"}}).error(), EINVAL);
  EXPECT_EQ(FromMap({{"TIPSPEC_MAX_OVERHEAD", "101"}}).error(), EINVAL);
  EXPECT_DOUBLE_EQ(FromMap({{"TIPSPEC_MAX_OVERHEAD", "0"}})->max_overhead_percent, 0.0);
  EXPECT_EQ(ParseSize("64K").value(), 65536u);
  EXPECT_EQ(ParseSize("2G").value(), 2ull << 30);
  EXPECT_EQ(ParseSize("").error(), EINVAL);
}

// ---- ForkPolicy: when the program may fork ------------------------------------------------

constexpr int64_t kMs = 1'000'000;

ForkPolicy MakePolicy(double budget_fraction, uint32_t max_skips) {
  ForkPolicyOptions options;
  options.stall_nanos = 200'000;
  options.budget_fraction = budget_fraction;
  options.first_allowance_nanos = 2 * kMs;
  options.max_backoff_skips = max_skips;
  ForkPolicy policy;
  policy.Configure(options);
  policy.Start(0);
  return policy;
}

// A stall well above every break-even bar these tests set.
constexpr int64_t kLongStall = 1'000 * kMs;

// A child that cost `cost` and saved `saved` with `used` hints used.
void EndChild(ForkPolicy& policy, uint64_t used, int64_t cost, int64_t saved) {
  policy.ChargeChild(cost);
  policy.ChildEnded(used, saved);
}

TEST(ForkPolicyTest, OnlyAReadThatStalledIsAChanceToFork) {
  ForkPolicy policy = MakePolicy(0.01, 255);
  EXPECT_FALSE(policy.Stalled(199'999));
  EXPECT_TRUE(policy.Stalled(200'000));
  EXPECT_TRUE(policy.ForkNow(0, 200'000));
}

TEST(ForkPolicyTest, LostChildrenBackOffExponentiallyAndOneThatPaidResets) {
  ForkPolicy policy = MakePolicy(0, 255);
  EndChild(policy, 0, 0, 0);  // 1 lost: skip 1 chance
  EXPECT_FALSE(policy.ForkNow(1, kLongStall));
  EXPECT_TRUE(policy.ForkNow(2, kLongStall));
  EndChild(policy, 0, 0, 0);  // 2 in a row: skip 3
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(policy.ForkNow(3 + i, kLongStall)) << i;
  EXPECT_TRUE(policy.ForkNow(10, kLongStall));
  EndChild(policy, 0, 0, 0);  // 3: skip 7
  int skipped = 0;
  while (!policy.ForkNow(20 + skipped, kLongStall)) ++skipped;
  EXPECT_EQ(skipped, 7);
  EXPECT_EQ(policy.deferred_backoff(), 11u);
  EndChild(policy, 5, 1 * kMs, 4 * kMs);  // paid: no more skipping
  EXPECT_EQ(policy.failures_in_a_row(), 0u);
  EXPECT_TRUE(policy.ForkNow(100, kLongStall));
  EndChild(policy, 0, 0, 0);
  EXPECT_FALSE(policy.ForkNow(101, kLongStall)) << "back to one skip after one loss";
  EXPECT_TRUE(policy.ForkNow(102, kLongStall));
  EXPECT_EQ(policy.children_paid(), 1u);
  EXPECT_EQ(policy.children_lost(), 4u);
}

TEST(ForkPolicyTest, AChildWhoseUsedHintsSavedLessThanItCostLostAndDoesNotResetTheBackOff) {
  ForkPolicy policy = MakePolicy(0, 255);
  EndChild(policy, 0, 1 * kMs, 0);
  EXPECT_FALSE(policy.ForkNow(1, kLongStall));
  EXPECT_TRUE(policy.ForkNow(2, kLongStall));
  // One hint used, 0.5 ms of stall saved, against 3 ms for the fork, its CPU and its reads.
  EndChild(policy, 1, 3 * kMs, kMs / 2);
  EXPECT_EQ(policy.failures_in_a_row(), 2u);
  EXPECT_EQ(policy.children_lost(), 2u);
  EXPECT_EQ(policy.children_paid(), 0u);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(policy.ForkNow(3 + i, kLongStall)) << i;
  EXPECT_TRUE(policy.ForkNow(10, kLongStall));
  // Saving exactly what it cost is no win either.
  EndChild(policy, 4, 2 * kMs, 2 * kMs);
  EXPECT_EQ(policy.failures_in_a_row(), 3u);
}

TEST(ForkPolicyTest, AfterALostChildOnlyAStallWorthItsCostPerUsedHintForks) {
  ForkPolicy policy = MakePolicy(0, 1);  // one skip at most: the bar is what is tested
  // 4 hints used, 0.4 ms saved, 2 ms cost: each hint would have had to save 0.5 ms.
  EndChild(policy, 4, 2 * kMs, 400'000);
  EXPECT_EQ(policy.break_even_nanos(), kMs / 2);
  EXPECT_FALSE(policy.ForkNow(1, kLongStall));  // the skip
  EXPECT_FALSE(policy.ForkNow(2, 300'000)) << "a stall, but shorter than the child lost with";
  EXPECT_FALSE(policy.ForkNow(3, 499'999));
  EXPECT_EQ(policy.deferred_break_even(), 2u);
  EXPECT_TRUE(policy.ForkNow(4, kMs / 2));
  // A child none of whose hints was used: a stall must outweigh its whole cost.
  EndChild(policy, 0, 3 * kMs, 0);
  EXPECT_EQ(policy.break_even_nanos(), 3 * kMs);
  EXPECT_FALSE(policy.ForkNow(5, kLongStall));  // the skip
  EXPECT_FALSE(policy.ForkNow(6, 2 * kMs));
  EXPECT_TRUE(policy.ForkNow(7, 3 * kMs));
  // One that paid clears the bar.
  EndChild(policy, 10, 1 * kMs, 5 * kMs);
  EXPECT_EQ(policy.break_even_nanos(), 0);
  EXPECT_TRUE(policy.ForkNow(8, 200'000));
}

TEST(ForkPolicyTest, BackOffIsCappedAndCanBeSwitchedOff) {
  ForkPolicy capped = MakePolicy(0, 10);
  for (int i = 0; i < 20; ++i) EndChild(capped, 0, 0, 0);
  int skipped = 0;
  while (!capped.ForkNow(skipped, kLongStall)) ++skipped;
  EXPECT_EQ(skipped, 10);
  ForkPolicy none = MakePolicy(0, 0);
  for (int i = 0; i < 5; ++i) EndChild(none, 0, 10 * kMs, 0);
  EXPECT_TRUE(none.ForkNow(1, 200'000)) << "neither back-off nor break-even";
  EXPECT_EQ(none.children_lost(), 5u);
}

TEST(ForkPolicyTest, CostStaysWithinTheBudgetShareOfTheRunTime) {
  ForkPolicy policy = MakePolicy(0.01, 0);
  policy.Charge(1 * kMs);
  EXPECT_TRUE(policy.ForkNow(0, kLongStall)) << "within the first allowance";
  policy.Charge(2 * kMs);  // 3 ms spent: 2 ms allowance + 1% of the run time needs 100 ms
  EXPECT_FALSE(policy.ForkNow(50 * kMs, kLongStall));
  EXPECT_EQ(policy.deferred_budget(), 1u);
  EXPECT_TRUE(policy.ForkNow(100 * kMs, kLongStall));
  policy.Charge(-5 * kMs);  // a clock step back is no refund
  policy.ChargeChild(-5 * kMs);
  EXPECT_EQ(policy.overhead_nanos(), 3 * kMs);
  ForkPolicy unlimited = MakePolicy(0, 0);
  unlimited.Charge(1'000 * kMs);
  EXPECT_TRUE(unlimited.ForkNow(1, kLongStall));
}

TEST(ForkPolicyTest, TheBudgetCountsEveryCostOfAChildButNotWhatChildrenSaved) {
  ForkPolicy policy = MakePolicy(0.01, 0);
  // Its CPU and reads, charged as it ends, count like the fork did.
  policy.ChargeChild(1 * kMs);
  policy.ChargeChild(9 * kMs);
  policy.ChildEnded(0, 0);
  EXPECT_EQ(policy.overhead_nanos(), 10 * kMs);
  EXPECT_FALSE(policy.ForkNow(100 * kMs, kLongStall)) << "10 ms > 2 ms + 1% of 100 ms";
  // A child that saved 30 ms for its 5 ms paid, but the saving is an estimate: no more room.
  EndChild(policy, 20, 5 * kMs, 30 * kMs);
  EXPECT_EQ(policy.saved_nanos(), 30 * kMs);
  EXPECT_EQ(policy.children_paid(), 1u);
  EXPECT_FALSE(policy.ForkNow(1'000 * kMs, kLongStall)) << "15 ms > 2 ms + 1% of 1 s";
  EndChild(policy, 0, 1 * kMs, -1 * kMs);  // a saving below zero is none
  EXPECT_EQ(policy.saved_nanos(), 30 * kMs);
  EXPECT_TRUE(policy.ForkNow(1'400 * kMs, kLongStall)) << "16 ms spent, 16 ms allowed";
}

TEST(ForkPolicyTest, ARunningChildIsOverBudgetOnceItsOwnNetCostPassesTheFirstAllowance) {
  ForkPolicy policy = MakePolicy(0.01, 255);
  policy.Charge(50 * kMs);      // earlier costs are not this child's
  policy.ChargeChild(1 * kMs);  // its fork
  EXPECT_FALSE(policy.ChildOverBudget(1 * kMs, 0)) << "2 ms spent, 2 ms allowed";
  EXPECT_TRUE(policy.ChildOverBudget(1 * kMs + 1, 0));
  EXPECT_FALSE(policy.ChildOverBudget(4 * kMs, 3 * kMs)) << "what it saved so far counts";
  policy.ChildEnded(0, 0);
  EXPECT_FALSE(policy.ChildOverBudget(2 * kMs, 0)) << "the next child starts afresh";
  ForkPolicy unlimited = MakePolicy(0, 0);
  EXPECT_FALSE(unlimited.ChildOverBudget(1'000 * kMs, 0));
}

class SharedLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = std::make_unique<SharedLog>();
    log_->Reset(3, 1000, 1000);
  }
  std::unique_ptr<SharedLog> log_;
};

TEST_F(SharedLogTest, MatchesReadsInOrderAndConsumesThem) {
  log_->Append({1, 10, 0, 100});
  log_->Append({1, 10, 100, 100});
  EXPECT_EQ(log_->MatchNext(1, 10, 0), MatchResult::kMatched);
  EXPECT_EQ(log_->MatchNext(1, 10, 100), MatchResult::kMatched);
  EXPECT_EQ(log_->consumed.load(), 2u);
  EXPECT_EQ(log_->bytes_consumed.load(), 200u);
  EXPECT_EQ(log_->MatchNext(1, 10, 200), MatchResult::kBehind);
}

TEST_F(SharedLogTest, AnotherFileOrOffsetIsAMismatchThatConsumesNothing) {
  log_->Append({1, 10, 0, 100});
  EXPECT_EQ(log_->MatchNext(1, 11, 0), MatchResult::kMismatch);
  EXPECT_EQ(log_->MatchNext(1, 10, 50), MatchResult::kMismatch);
  EXPECT_EQ(log_->MatchNext(2, 10, 0), MatchResult::kMismatch);
  EXPECT_EQ(log_->consumed.load(), 0u);
}

TEST_F(SharedLogTest, RunAheadIsBoundedByHintsAndBytes) {
  EXPECT_TRUE(log_->HasRoom());
  log_->Append({1, 1, 0, 10});
  log_->Append({1, 1, 10, 10});
  EXPECT_TRUE(log_->HasRoom());
  log_->Append({1, 1, 20, 10});
  EXPECT_FALSE(log_->HasRoom()) << "3 hints ahead with a bound of 3";
  ASSERT_EQ(log_->MatchNext(1, 1, 0), MatchResult::kMatched);
  EXPECT_TRUE(log_->HasRoom());

  log_->Reset(100, 1000, 1000);
  log_->Append({1, 1, 0, 5000});  // one huge read is always allowed when nothing is ahead
  EXPECT_FALSE(log_->HasRoom()) << "5000 bytes ahead with a bound of 1000";
  ASSERT_EQ(log_->MatchNext(1, 1, 0), MatchResult::kMatched);
  EXPECT_TRUE(log_->HasRoom());
}

TEST(SandboxFilterTest, AssemblesAndEndsWithReturns) {
  Result<SandboxFilter> filter = BuildSandboxFilter(RawSyscallReturnAddress(), 901);
  ASSERT_TRUE(filter.ok()) << filter.status().ToString();
  EXPECT_GT(filter->program.size(), 100u);
  EXPECT_LT(filter->program.size(), 4096u);  // the kernel's BPF_MAXINSNS
  EXPECT_EQ(filter->program.back().code, BPF_RET | BPF_K);
}

TEST(SandboxFilterTest, KillsTheChildOnAForbiddenCallButNotTheCaller) {
  Result<SandboxFilter> filter = BuildSandboxFilter(RawSyscallReturnAddress(), -1);
  ASSERT_TRUE(filter.ok());
  std::string dir = ::testing::TempDir() + "/sandbox-" + std::to_string(getpid());
  pid_t pid = fork();
  if (pid == 0) {
    if (InstallSandboxFilter(*filter, getpid(), 1000) != 0) _exit(3);
    // From RawSyscall, mkdir is not in the runtime's allow-list: the kernel kills the process.
    RawSyscall(SYS_mkdir, reinterpret_cast<long>(dir.c_str()), 0755);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGSYS);
  EXPECT_NE(access(dir.c_str(), F_OK), 0) << "the directory must not exist";
}

std::atomic<int> g_urgent_signals{0};

// Runs `call` in a forked process under the sandbox (as a child with pid getpid() and private
// descriptors from 1000 up) and returns its wait status.
int RunSandboxed(const SandboxFilter& filter, const std::function<long()>& call) {
  pid_t pid = fork();
  if (pid == 0) {
    if (InstallSandboxFilter(filter, getpid(), 1000) != 0) _exit(3);
    // Through RawSyscall: exit from anywhere else is a call the sandbox traps.
    RawSyscall(SYS_exit_group, call() < 0 ? 4 : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// Hazard 1 (and signals) enforced by the kernel, not only by the SIGSYS handler's code: the
// runtime's own system calls cannot move a file offset or a directory position, change status
// flags, or signal anyone, on what the child shares with the program. Each call below would
// change the program's state; under the sandbox it kills the child and the state is intact.
TEST(SandboxFilterTest, RuntimeCannotChangeWhatTheChildSharesWithTheProgram) {
  Result<SandboxFilter> filter = BuildSandboxFilter(RawSyscallReturnAddress(), -1);
  ASSERT_TRUE(filter.ok()) << filter.status().ToString();
  testing::SpecScratch scratch;
  std::string file = scratch.root() + "/shared";
  testing::WriteFile(file, std::string(8192, 'x'));
  std::string dir_path = scratch.root() + "/dir";
  mkdir(dir_path.c_str(), 0755);
  for (int i = 0; i < 200; ++i) testing::WriteFile(dir_path + "/entry" + std::to_string(i), "");
  int fd = open(file.c_str(), O_RDONLY);
  int dir = open(dir_path.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_GE(dir, 0);
  ASSERT_LT(dir, 1000);
  ASSERT_EQ(lseek(fd, 123, SEEK_SET), 123);
  alignas(8) char entries[512];
  ASSERT_GT(syscall(SYS_getdents64, dir, entries, sizeof(entries)), 0);
  off_t dir_position = lseek(dir, 0, SEEK_CUR);
  g_urgent_signals = 0;
  signal(SIGURG, [](int) { ++g_urgent_signals; });
  pid_t program = getpid();
  int one = 1;

  const std::vector<std::pair<std::string, std::function<long()>>> forbidden = {
      {"lseek of the shared file", [&] { return RawSyscall(SYS_lseek, fd, 0, SEEK_SET); }},
      {"lseek of the shared directory", [&] { return RawSyscall(SYS_lseek, dir, 0, SEEK_SET); }},
      {"getdents64 of the shared directory",
       [&] {
         return RawSyscall(SYS_getdents64, dir, reinterpret_cast<long>(entries), sizeof(entries));
       }},
      {"fcntl F_SETFL", [&] { return RawSyscall(SYS_fcntl, fd, F_SETFL, O_APPEND | O_NONBLOCK); }},
      {"ioctl FIONBIO",
       [&] { return RawSyscall(SYS_ioctl, fd, FIONBIO, reinterpret_cast<long>(&one)); }},
      {"kill of the program", [&] { return RawSyscall(SYS_kill, program, SIGURG); }},
      {"tgkill of the program", [&] { return RawSyscall(SYS_tgkill, program, program, SIGURG); }},
  };
  for (const auto& [name, call] : forbidden) {
    SCOPED_TRACE(name);
    int status = RunSandboxed(*filter, call);
    EXPECT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), SIGSYS);
    EXPECT_EQ(lseek(fd, 0, SEEK_CUR), 123);
    EXPECT_EQ(lseek(dir, 0, SEEK_CUR), dir_position);
    EXPECT_EQ(fcntl(fd, F_GETFL) & (O_APPEND | O_NONBLOCK), 0);
    EXPECT_EQ(g_urgent_signals.load(), 0);
  }

  // What the runtime does need still works: its private descriptors (a re-open moved up to the
  // base), reading calls, signals to itself.
  int status = RunSandboxed(*filter, [&]() -> long {
    long reopened = RawSyscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>(dir_path.c_str()),
                               O_RDONLY | O_DIRECTORY);
    long high = RawSyscall(SYS_fcntl, reopened, F_DUPFD_CLOEXEC, 1000);
    if (high < 1000) return -1;
    if (RawSyscall(SYS_lseek, high, dir_position, SEEK_SET) != dir_position) return -1;
    if (RawSyscall(SYS_getdents64, high, reinterpret_cast<long>(entries), sizeof(entries)) <= 0) {
      return -1;
    }
    int available = 0;
    if (RawSyscall(SYS_ioctl, fd, FIONREAD, reinterpret_cast<long>(&available)) != 0) return -1;
    if (RawSyscall(SYS_fcntl, fd, F_GETFL) < 0) return -1;
    return RawSyscall(SYS_kill, RawSyscall(SYS_getpid), 0);
  });
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(lseek(dir, 0, SEEK_CUR), dir_position);
  close(fd);
  close(dir);
}

TEST(LauncherTest, EnvironmentPreloadsTheLibraryAndSetsTheKnobs) {
  RunOptions options;
  options.library_path = TIPSPEC_LIBRARY_PATH;
  options.mount = "/mnt/tipfs";
  options.wait = WaitPolicy::kAlways;
  options.max_ahead_hints = 99;
  Result<std::vector<std::string>> env =
      SpeculationEnvironment(options, {"PATH=/bin", "LD_PRELOAD=/other.so"});
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  auto has = [&](const std::string& entry) {
    return std::find(env->begin(), env->end(), entry) != env->end();
  };
  EXPECT_TRUE(has(std::string("LD_PRELOAD=") + TIPSPEC_LIBRARY_PATH + ":/other.so"));
  EXPECT_TRUE(has("TIPSPEC_AUTOSTART=1"));
  EXPECT_TRUE(has("TIPSPEC_MOUNT=/mnt/tipfs"));
  EXPECT_TRUE(has("TIPSPEC_WAIT=1"));
  EXPECT_TRUE(has("TIPSPEC_MAX_AHEAD_HINTS=99"));
  EXPECT_TRUE(has("PATH=/bin"));
  options.library_path = "/nonexistent/libtipspec.so";
  EXPECT_EQ(SpeculationEnvironment(options, {}).error(), ENOENT);
}

TEST(LauncherTest, ReturnsTheCommandsExitStatus) {
  RunOptions options;
  options.library_path = TIPSPEC_LIBRARY_PATH;
  EXPECT_EQ(RunUnderSpeculation(options, {"sh", "-c", "exit 3"}).value(), 3);
  EXPECT_EQ(RunUnderSpeculation(options, {"sh", "-c", "kill -9 $$"}).value(), 128 + 9);
  EXPECT_EQ(RunUnderSpeculation(options, {"/nonexistent/command"}).error(), ENOENT);
}

TEST(LauncherTest, SpeculatesOnTheCommandItRuns) {
  testing::SpecScratch scratch;
  testing::WriteFile(scratch.watched() + "/f", testing::MakeText(5, 300000));
  RunOptions options;
  options.library_path = TIPSPEC_LIBRARY_PATH;
  options.mount = scratch.watched();
  options.hint_log = scratch.hint_log();
  options.stats_file = scratch.stats_file();
  options.lockstep = true;
  options.stall_usec = 0;
  // grep reads with read(2) (cat would use copy_file_range, which is not speculated on).
  std::string command = "grep -c alpha " + scratch.watched() + "/f > ";
  ASSERT_EQ(system((command + scratch.root() + "/plain").c_str()), 0);
  Result<int> status =
      RunUnderSpeculation(options, {"sh", "-c", command + scratch.root() + "/out"});
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(*status, 0);
  EXPECT_EQ(testing::ReadFile(scratch.root() + "/out"),
            testing::ReadFile(scratch.root() + "/plain"));
  EXPECT_GE(scratch.Stats()["forks"], 1u);
}

}  // namespace
}  // namespace tipfs::spec
