#include "speculate/launcher.h"

#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "speculate/cpu_group.h"

extern char** environ;

namespace tipfs::spec {

namespace {

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void SetVariable(std::vector<std::string>* env, const std::string& name, const std::string& value) {
  std::string prefix = name + "=";
  for (std::string& entry : *env) {
    if (entry.compare(0, prefix.size(), prefix) == 0) {
      entry = prefix + value;
      return;
    }
  }
  env->push_back(prefix + value);
}

std::string GetVariable(const std::vector<std::string>& env, const std::string& name) {
  std::string prefix = name + "=";
  for (const std::string& entry : env) {
    if (entry.compare(0, prefix.size(), prefix) == 0) return entry.substr(prefix.size());
  }
  return "";
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace

Result<std::string> FindSpeculationLibrary() {
  std::vector<std::string> candidates;
  if (const char* explicit_path = getenv("TIPSPEC_LIBRARY")) candidates.push_back(explicit_path);
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = '\0';
    std::filesystem::path dir = std::filesystem::path(self).parent_path();
    // An installed tipfs finds the libtipspec installed beside it, wherever the tree was put.
#ifdef TIPSPEC_INSTALL_LIBDIR
    candidates.push_back(
        (dir / ".." / TIPSPEC_INSTALL_LIBDIR / "libtipspec.so").lexically_normal().string());
#endif
    candidates.push_back((dir / ".." / "lib" / "libtipspec.so").lexically_normal().string());
  }
#ifdef TIPSPEC_BUILD_LIBRARY_PATH
  candidates.push_back(TIPSPEC_BUILD_LIBRARY_PATH);
#endif
#ifdef TIPSPEC_INSTALL_LIBRARY_PATH
  candidates.push_back(TIPSPEC_INSTALL_LIBRARY_PATH);
#endif
  std::string tried;
  for (const std::string& candidate : candidates) {
    if (IsFile(candidate)) return std::filesystem::absolute(candidate).string();
    tried += (tried.empty() ? "" : ", ") + candidate;
  }
  return Status::NotFound("libtipspec.so not found (tried " + tried + "; set TIPSPEC_LIBRARY)");
}

Result<std::vector<std::string>> SpeculationEnvironment(const RunOptions& options,
                                                        const std::vector<std::string>& base) {
  std::string library = options.library_path;
  if (library.empty()) {
    Result<std::string> found = FindSpeculationLibrary();
    if (!found.ok()) return found.status();
    library = *found;
  }
  if (!IsFile(library)) return Status::NotFound("speculation library " + library);
  std::vector<std::string> env = base;
  std::string preload = GetVariable(env, "LD_PRELOAD");
  SetVariable(&env, "LD_PRELOAD", preload.empty() ? library : library + ":" + preload);
  SetVariable(&env, "TIPSPEC_AUTOSTART", "1");
  if (!options.mount.empty()) SetVariable(&env, "TIPSPEC_MOUNT", options.mount);
  if (options.wait) {
    SetVariable(&env, "TIPSPEC_WAIT",
                *options.wait == WaitPolicy::kLearned  ? "learned"
                : *options.wait == WaitPolicy::kAlways ? "1"
                                                       : "0");
  }
  if (options.max_ahead_hints) {
    SetVariable(&env, "TIPSPEC_MAX_AHEAD_HINTS", std::to_string(*options.max_ahead_hints));
  }
  if (options.max_ahead_bytes) {
    SetVariable(&env, "TIPSPEC_MAX_AHEAD_BYTES", std::to_string(*options.max_ahead_bytes));
  }
  if (options.stall_usec) {
    SetVariable(&env, "TIPSPEC_STALL_USEC", std::to_string(*options.stall_usec));
  }
  if (options.history) SetVariable(&env, "TIPSPEC_HISTORY", *options.history ? "1" : "0");
  if (options.predict) SetVariable(&env, "TIPSPEC_PREDICT", *options.predict ? "1" : "0");
  if (options.print_stats) SetVariable(&env, "TIPSPEC_STATS", "1");
  if (!options.stats_file.empty()) SetVariable(&env, "TIPSPEC_STATS_FILE", options.stats_file);
  if (!options.hint_log.empty()) SetVariable(&env, "TIPSPEC_HINT_LOG", options.hint_log);
  if (options.lockstep) SetVariable(&env, "TIPSPEC_LOCKSTEP", "1");
  return env;
}

namespace {

// The signals a supervisor (timeout(1), systemd, kill) sends to `tipfs run` that belong to the
// program. The terminal's own ^C / ^\ / hang-up reach the program directly through its process
// group; those arrive with si_code SI_KERNEL and are not sent a second time.
constexpr int kForwarded[] = {SIGHUP,  SIGINT,  SIGQUIT,  SIGTERM,
                              SIGUSR1, SIGUSR2, SIGWINCH, SIGALRM};

bool SentByAProcess(const siginfo_t& info) { return info.si_code <= 0; }  // SI_USER, SI_QUEUE...

// The processes whose parent is this one (reparented descendants included: we are a subreaper).
std::vector<pid_t> OwnChildren() {
  std::vector<pid_t> children;
  const pid_t self = getpid();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    FILE* f = fopen((entry.path() / "stat").c_str(), "re");
    if (f == nullptr) continue;
    char line[1024];
    const bool read = fgets(line, sizeof(line), f) != nullptr;
    fclose(f);
    if (!read) continue;
    const char* close_paren = strrchr(line, ')');  // comm may hold spaces and parentheses
    char state = 0;
    int ppid = 0;
    if (close_paren != nullptr && sscanf(close_paren + 1, " %c %d", &state, &ppid) == 2 &&
        ppid == self) {
      children.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  return children;
}

// How a shell words a command that cannot be run, and its exit status (127 not found, 126 not
// executable).
Status SpawnError(const std::string& command, int err) {
  if (err == ENOENT && command.find('/') == std::string::npos) {
    return Status::NotFound(command + ": command not found");
  }
  if (err == EACCES) {
    struct stat st;
    if (stat(command.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      return Status::FromErrno(EACCES, command + ": Is a directory");
    }
  }
  if (err == ENOEXEC) return Status::FromErrno(ENOEXEC, command + ": cannot execute binary file");
  return Status::FromErrno(err, command + ": " + strerror(err));
}

// Sums the per-process blocks libtipspec appended to `path` ("tipspec.KEY VALUE" lines, one
// block per process of the tree) into one block.
std::string SummarizeStats(const std::string& path) {
  FILE* f = fopen(path.c_str(), "re");
  if (f == nullptr) return "";
  std::vector<std::pair<std::string, unsigned long long>> totals;
  unsigned long long processes = 0;
  char key[128];
  unsigned long long value = 0;
  while (fscanf(f, "%127s %llu", key, &value) == 2) {
    const std::string name = key;
    if (name == "tipspec.pid") {
      ++processes;
      continue;
    }
    auto it =
        std::find_if(totals.begin(), totals.end(), [&](const auto& t) { return t.first == name; });
    if (it == totals.end()) it = totals.insert(totals.end(), {name, 0});
    // Not counts: the last epoch and forbidden syscall number seen.
    if (name == "tipspec.epoch" || name == "tipspec.last_forbidden_syscall") {
      if (value != 0) it->second = value;
    } else {
      it->second += value;
    }
  }
  fclose(f);
  std::string out = "tipspec.processes " + std::to_string(processes) + "\n";
  for (const auto& [name, total] : totals) out += name + " " + std::to_string(total) + "\n";
  return out;
}

}  // namespace

Result<int> RunUnderSpeculation(const RunOptions& options, const std::vector<std::string>& argv,
                                int* killed_by) {
  if (killed_by != nullptr) *killed_by = 0;
  if (argv.empty()) return Status::InvalidArgument("no command to run");
  RunOptions run = options;
  // --stats: every process of the tree appends its block to one private file; the summary is
  // printed from here once all are gone (GNU grep closes its stderr before it exits, and a
  // program started through a shell shim is several processes).
  std::string summary_file;
  if (options.print_stats && options.stats_file.empty()) {
    const char* tmp = getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/tipfs-run-stats-XXXXXX";
    int fd = mkstemp(pattern.data());
    if (fd < 0) return ErrnoStatus("create a file for --stats in " + pattern);
    close(fd);
    summary_file = run.stats_file = pattern;
  }
  struct RemoveFile {
    std::string path;
    ~RemoveFile() {
      if (!path.empty()) unlink(path.c_str());
    }
  } remove_summary{summary_file};
  if (!summary_file.empty()) run.print_stats = false;  // the file is where they go
  Result<std::vector<std::string>> env =
      options.speculate ? SpeculationEnvironment(run, CurrentEnvironment())
                        : Result<std::vector<std::string>>(CurrentEnvironment());
  if (!env.ok()) return env.status();
  std::vector<std::string> args = argv;
  std::vector<char*> arg_pointers = Pointers(args);
  std::vector<char*> env_pointers = Pointers(*env);

  // Signals are taken synchronously (sigwaitinfo) while the program runs; it gets the default
  // dispositions and an empty mask.
  sigset_t waited, old_mask;
  sigemptyset(&waited);
  sigaddset(&waited, SIGCHLD);
  for (int sig : kForwarded) sigaddset(&waited, sig);
  pthread_sigmask(SIG_BLOCK, &waited, &old_mask);
  int old_subreaper = 0;
  prctl(PR_GET_CHILD_SUBREAPER, &old_subreaper);
  // Descendants that outlive the program (its speculating children, anything it started) are
  // reparented to us, so we can wait for every one of them: when `tipfs run` returns, no process
  // it started still holds a file or a directory of the mount.
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  // The tree gets a CPU group of its own where the machine lets it (cpu_group.h says why).
  std::unique_ptr<CpuGroup> group;
  if (options.cpu_group) {
    Result<std::unique_ptr<CpuGroup>> entered = CpuGroup::Enter();
    if (entered.ok()) {
      group = std::move(*entered);
    } else if (options.print_stats) {
      const std::string note = "tipfs run: no CPU group of its own (" + entered.status().message() +
                               "): the speculating child runs only when a CPU is idle\n";
      (void)!write(STDERR_FILENO, note.data(), note.size());
    }
  }

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &waited);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  int rc =
      posix_spawnp(&pid, args[0].c_str(), nullptr, &attr, arg_pointers.data(), env_pointers.data());
  posix_spawnattr_destroy(&attr);
  if (group != nullptr) group->LeaveCaller();  // the program started inside; we wait outside
  Result<int> result = Status::OK();
  if (rc != 0) {
    result = SpawnError(args[0], rc);
  } else {
    bool program_running = true;
    int program_status = 0;
    while (true) {
      siginfo_t info;
      // A caller with other threads may have SIGCHLD taken by one of them: poll as well.
      const timespec poll_interval = {0, 100 * 1000 * 1000};
      const int sig = sigtimedwait(&waited, &info, &poll_interval);
      if (sig < 0 && errno != EAGAIN) continue;  // EINTR
      if (sig > 0 && sig != SIGCHLD) {
        if (!SentByAProcess(info)) continue;
        if (program_running) {
          kill(pid, sig);
        } else if (sig != SIGWINCH && sig != SIGUSR1 && sig != SIGUSR2) {
          for (pid_t straggler : OwnChildren()) kill(straggler, sig);
        }
        continue;
      }
      pid_t reaped;
      int status = 0;
      while ((reaped = waitpid(-1, &status, WNOHANG)) > 0) {
        if (reaped == pid) {
          program_running = false;
          program_status = status;
        }
      }
      if (reaped < 0 && errno == ECHILD) break;  // every descendant is gone
    }
    if (WIFEXITED(program_status)) {
      result = WEXITSTATUS(program_status);
    } else {
      result = 128 + WTERMSIG(program_status);
      if (killed_by != nullptr) *killed_by = WTERMSIG(program_status);
    }
  }
  group.reset();  // every process of the tree is gone: the group can go too
  prctl(PR_SET_CHILD_SUBREAPER, old_subreaper);
  // Drop what arrived for the program after it was gone, then restore the caller's mask.
  timespec zero = {0, 0};
  while (sigtimedwait(&waited, nullptr, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (result.ok() && !summary_file.empty()) {
    const std::string summary = SummarizeStats(summary_file);
    (void)!write(STDERR_FILENO, summary.data(), summary.size());
  }
  return result;
}

Status ExecUnderSpeculation(const RunOptions& options, const std::vector<std::string>& argv) {
  if (argv.empty()) return Status::InvalidArgument("no command to run");
  Result<std::vector<std::string>> env = SpeculationEnvironment(options, CurrentEnvironment());
  if (!env.ok()) return env.status();
  std::vector<std::string> args = argv;
  std::vector<char*> arg_pointers = Pointers(args);
  std::vector<char*> env_pointers = Pointers(*env);
  execvpe(args[0].c_str(), arg_pointers.data(), env_pointers.data());
  return ErrnoStatus("exec " + args[0]);
}

}  // namespace tipfs::spec
