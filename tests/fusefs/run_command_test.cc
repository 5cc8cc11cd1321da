// `tipfs run` ends as the program ends (its exit code, or the very signal that killed it), says
// "command not found" (127) and "Permission denied" (126) as a shell does, passes on signals a
// supervisor sends it, returns only once every process the program started is gone, prints one
// --stats summary for the whole tree even when the program closed its stderr, and never leaves a
// process that keeps the mount busy: 50 cycles of `tipfs run -- grep -r`, umount, mount.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

std::string Tipfs() { return TipfsBinary(); }

// Starts `tipfs run -- sh -c SCRIPT` as a child (no shell in between) and returns its pid.
pid_t SpawnRun(const std::string& script) {
  pid_t pid = fork();
  if (pid == 0) {
    execl(TipfsBinary().c_str(), "tipfs", "run", "--", "sh", "-c", script.c_str(), nullptr);
    _exit(99);
  }
  return pid;
}

bool WaitForFile(const std::string& path) {
  for (int i = 0; i < 3000; ++i) {  // up to 30 s on a loaded machine
    if (access(path.c_str(), F_OK) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

class RunCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/tipfs-run-XXXXXX";
    dir_ = mkdtemp(pattern.data());
  }
  void TearDown() override { RunCommand("rm -rf " + ShellQuote(dir_)); }
  std::string dir_;
};

TEST_F(RunCommandTest, ExitStatusesAreTheProgramsOwnOrTheShells) {
  EXPECT_EQ(RunSplit(Tipfs() + " run -- sh -c 'exit 7'").exit_code, 7);
  EXPECT_EQ(RunSplit(Tipfs() + " run -- true").exit_code, 0);

  CommandResult missing = RunSplit(Tipfs() + " run -- nonexistent-cmd-tipfs arg");
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_EQ(missing.err, "tipfs run: nonexistent-cmd-tipfs: command not found\n");
  CommandResult missing_path = RunSplit(Tipfs() + " run -- " + dir_ + "/nothing");
  EXPECT_EQ(missing_path.exit_code, 127);
  EXPECT_EQ(missing_path.err, "tipfs run: " + dir_ + "/nothing: No such file or directory\n");

  ASSERT_TRUE(WriteFileBytes(dir_ + "/script.sh", "#!/bin/sh\necho hi\n", 0644));
  CommandResult not_executable = RunSplit(Tipfs() + " run -- " + dir_ + "/script.sh");
  EXPECT_EQ(not_executable.exit_code, 126);
  EXPECT_EQ(not_executable.err, "tipfs run: " + dir_ + "/script.sh: Permission denied\n");
  CommandResult directory = RunSplit(Tipfs() + " run -- " + dir_);
  EXPECT_EQ(directory.exit_code, 126);
  EXPECT_EQ(directory.err, "tipfs run: " + dir_ + ": Is a directory\n");

  CommandResult nothing = RunSplit(Tipfs() + " run");
  EXPECT_EQ(nothing.exit_code, 2) << nothing.err;
}

TEST_F(RunCommandTest, TheProgramsSignalEndsTipfsRunToo) {
  for (int sig : {SIGTERM, SIGKILL, SIGINT, SIGSEGV}) {
    SCOPED_TRACE(sig);
    // The program kills itself; whoever waits for `tipfs run` sees that signal, as it would
    // have of the program (a shell's $? is 128 + N either way; make and bash's SIGINT handling
    // look at WIFSIGNALED).
    pid_t pid = SpawnRun("ulimit -c 0; kill -" + std::to_string(sig) + " $$");
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exited with " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), sig);
  }
}

TEST_F(RunCommandTest, SignalsSentToTipfsRunReachTheProgram) {
  const std::string ready = dir_ + "/ready", got = dir_ + "/got";
  for (int sig : {SIGTERM, SIGHUP, SIGUSR1, SIGINT}) {
    SCOPED_TRACE(sig);
    unlink(ready.c_str());
    unlink(got.c_str());
    const std::string name = std::to_string(sig);
    pid_t pid = SpawnRun("trap 'echo " + name + " > " + got + "; exit 42' " + name + "; touch " +
                         ready + "; while :; do sleep 0.05; done");
    ASSERT_TRUE(WaitForFile(ready));
    ASSERT_EQ(kill(pid, sig), 0);  // to `tipfs run`, as timeout(1) or systemd would
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 42);
    EXPECT_EQ(ReadFileOrDie(got), name + "\n");
  }
}

TEST_F(RunCommandTest, ReturnsOnlyWhenEveryProcessTheProgramStartedIsGone) {
  // The program exits at once and leaves a child behind (as a speculating child, or anything
  // started with &, would be): tipfs run waits for it.
  const std::string pid_file = dir_ + "/child";
  CommandResult run = RunSplit(Tipfs() + " run -- sh -c 'sleep 1 & echo $! > " + pid_file + "'");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const pid_t child = static_cast<pid_t>(std::stol(ReadFileOrDie(pid_file)));
  EXPECT_FALSE(ProcessAlive(child)) << "tipfs run returned while pid " << child << " still ran";
}

TEST_F(RunCommandTest, StatsPrintsOneSummaryForTheTreeEvenWhenTheProgramClosedItsStderr) {
  const std::string reason = FuseUnavailableReason();
  if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
  // libtipspec speculates (and counts) in processes that run while a tipfs mount exists.
  TipfsMount volume(VolumeSpec{4, "", "--cache-size 16M"});
  ASSERT_EQ(volume.Create(), "");
  ASSERT_EQ(volume.Mount(), "");
  const std::string file = volume.Path("f");
  ASSERT_TRUE(WriteFileBytes(file, PatternBytes(300000, 5) + "x\n"));
  // sh and three programs it runs, the last of which closes its stderr, as GNU grep does.
  CommandResult run = RunSplit(Tipfs() + " run --mount " + volume.mountpoint() +
                               " --stats -- sh -c 'grep -c x " + file + " >/dev/null; grep -c x " +
                               file + " >/dev/null; exec 2>&-; grep -c x " + file + " >/dev/null'");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  size_t summaries = 0, at = 0;
  while ((at = run.err.find("tipspec.processes ", at)) != std::string::npos) {
    ++summaries;
    at += 1;
  }
  EXPECT_EQ(summaries, 1u) << run.err;
  const size_t processes = run.err.find("tipspec.processes ");
  ASSERT_NE(processes, std::string::npos) << run.err;
  EXPECT_GE(std::stoi(run.err.substr(processes + 18)), 3) << run.err;
  EXPECT_NE(run.err.find("tipspec.reads_checked "), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("tipspec.pid"), std::string::npos) << "per-process blocks: " << run.err;
}

TEST(RunUmountMountCycles, FiftyCyclesOfRunGrepUmountMountNeverFindTheMountBusy) {
  const std::string reason = FuseUnavailableReason();
  if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
  TipfsMount volume(VolumeSpec{4, "", "--cache-size 16M"});
  ASSERT_EQ(volume.Create(), "");
  ASSERT_EQ(volume.Mount(), "");
  for (int d = 0; d < 4; ++d) {
    const std::string dir = volume.Path("tree/d" + std::to_string(d));
    ASSERT_EQ(RunCommand("mkdir -p " + dir), 0);
    for (int f = 0; f < 20; ++f) {
      ASSERT_TRUE(
          WriteFileBytes(dir + "/f" + std::to_string(f),
                         PatternBytes(20000 + 3000 * f, f) + (f % 5 == 0 ? "needle\n" : "")));
    }
  }
  const std::string grep =
      Tipfs() + " run -- grep -rl needle " + volume.Path("tree") + " | sort | wc -l";
  for (int cycle = 0; cycle < 50; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    std::string out;
    ASSERT_EQ(RunCommand(grep, &out), 0);
    ASSERT_EQ(out, "16\n");
    const pid_t daemon = ReadDaemonPid(volume.disks()[0]);
    ASSERT_EQ(volume.Unmount(), "") << "umount right after tipfs run";
    ASSERT_FALSE(ProcessAlive(daemon));
    ASSERT_EQ(volume.Mount(), "");
    ASSERT_NE(ReadDaemonPid(volume.disks()[0]), daemon) << "the old daemon is serving";
  }
}

}  // namespace
}  // namespace tipfs::testing
