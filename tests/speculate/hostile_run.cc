#include "tests/speculate/hostile_run.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>

namespace tipfs::spec::testing {
namespace {

namespace fs = std::filesystem;

std::atomic<int> g_usr1{0};
std::atomic<int> g_usr2{0};

struct SideEffectRun {
  std::map<std::string, std::string> tree;
  std::string out;
  int usr1 = 0;
  int usr2 = 0;
  std::string socket_data;
};

SideEffectRun RunHostile(const SpecScratch& scratch, const std::string& action, bool preload,
                         const std::string& input, const std::string& work_root,
                         const std::vector<std::pair<std::string, std::string>>& environment) {
  std::string work = work_root + (preload ? "/work-speculated" : "/work-plain");
  fs::remove_all(work);
  fs::create_directories(work);
  WriteFile(work + "/log", "");
  WriteFile(work + "/mapped", std::string(4096, 'm'));
  WriteFile(work + "/shared", std::string(4096, 'S'));
  WriteFile(work + "/victim-spec", "victim\n");
  WriteFile(work + "/victim-real", "victim\n");
  EXPECT_EQ(mkfifo((work + "/fifo").c_str(), 0644), 0);
  std::string socket_path = scratch.root() + "/sock";
  unlink(socket_path.c_str());
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
  struct sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  strncpy(address.sun_path, socket_path.c_str(), sizeof(address.sun_path) - 1);
  EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_EQ(listen(listener, 16), 0);
  g_usr1 = 0;
  g_usr2 = 0;

  SideEffectRun run;
  run.out =
      scratch
          .Run({HAZARD_SIDE_EFFECTS, action, input, work, std::to_string(getpid()), socket_path},
               preload, "",
               preload ? environment : std::vector<std::pair<std::string, std::string>>{})
          .out;
  for (;;) {
    int connection = accept(listener, nullptr, nullptr);
    if (connection < 0) break;
    char buffer[256];
    ssize_t n;
    while ((n = read(connection, buffer, sizeof(buffer))) > 0) run.socket_data.append(buffer, n);
    close(connection);
  }
  close(listener);
  unlink(socket_path.c_str());
  run.tree = SnapshotTree(work);
  run.usr1 = g_usr1;
  run.usr2 = g_usr2;
  return run;
}

}  // namespace

void ExpectNoSideEffects(const SpecScratch& scratch, const std::string& input,
                         const std::string& work_root,
                         const std::vector<std::pair<std::string, std::string>>& environment) {
  signal(SIGUSR1, [](int) { ++g_usr1; });
  signal(SIGUSR2, [](int) { ++g_usr2; });
  const std::vector<std::string> suppressed = {"write", "pwrite", "create", "mmap-then-mprotect"};
  const std::vector<std::string> ending = {
      "truncate", "ftruncate", "unlink", "rename", "mkdir",         "symlink",           "chmod",
      "kill",     "connect",   "fork",   "mmap",   "shared-memory", "mremap-then-write", "fifo",
      "exec"};
  std::vector<std::string> actions = suppressed;
  actions.insert(actions.end(), ending.begin(), ending.end());
  for (const std::string& action : actions) {
    SCOPED_TRACE(action);
    SideEffectRun plain = RunHostile(scratch, action, false, input, work_root, environment);
    scratch.ClearLogs();
    SideEffectRun speculated = RunHostile(scratch, action, true, input, work_root, environment);
    EXPECT_EQ(speculated.out, plain.out);
    EXPECT_EQ(speculated.tree, plain.tree);
    EXPECT_EQ(speculated.usr1, 0);
    EXPECT_EQ(speculated.usr2, plain.usr2);
    EXPECT_EQ(speculated.socket_data, plain.socket_data);
    auto stats = scratch.Stats();
    EXPECT_GE(stats["forks"], 1u);
    if (std::find(ending.begin(), ending.end(), action) != ending.end()) {
      uint64_t ended = stats["child_ended_forbidden"] + stats["child_ended_signal"] +
                       stats["child_ended_shared_write"] + stats["child_ended_stream_read"] +
                       stats["child_died_by_signal"] + stats["child_killed_by_sandbox"];
      EXPECT_GE(ended, 1u) << "the run-ahead must have been stopped at " << action;
    }
  }
}

}  // namespace tipfs::spec::testing
