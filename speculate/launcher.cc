#include "speculate/launcher.h"

#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

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
  if (options.wait_for_data) SetVariable(&env, "TIPSPEC_WAIT", *options.wait_for_data ? "1" : "0");
  if (options.max_ahead_hints) {
    SetVariable(&env, "TIPSPEC_MAX_AHEAD_HINTS", std::to_string(*options.max_ahead_hints));
  }
  if (options.max_ahead_bytes) {
    SetVariable(&env, "TIPSPEC_MAX_AHEAD_BYTES", std::to_string(*options.max_ahead_bytes));
  }
  if (options.stall_usec) {
    SetVariable(&env, "TIPSPEC_STALL_USEC", std::to_string(*options.stall_usec));
  }
  if (options.print_stats) SetVariable(&env, "TIPSPEC_STATS", "1");
  if (!options.stats_file.empty()) SetVariable(&env, "TIPSPEC_STATS_FILE", options.stats_file);
  if (!options.hint_log.empty()) SetVariable(&env, "TIPSPEC_HINT_LOG", options.hint_log);
  if (options.lockstep) SetVariable(&env, "TIPSPEC_LOCKSTEP", "1");
  return env;
}

Result<int> RunUnderSpeculation(const RunOptions& options, const std::vector<std::string>& argv) {
  if (argv.empty()) return Status::InvalidArgument("no command to run");
  Result<std::vector<std::string>> env = SpeculationEnvironment(options, CurrentEnvironment());
  if (!env.ok()) return env.status();
  std::vector<std::string> args = argv;
  std::vector<char*> arg_pointers = Pointers(args);
  std::vector<char*> env_pointers = Pointers(*env);

  struct sigaction ignore = {}, old_int = {}, old_quit = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  // The command gets the default dispositions back.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGQUIT);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  int rc =
      posix_spawnp(&pid, args[0].c_str(), nullptr, &attr, arg_pointers.data(), env_pointers.data());
  posix_spawnattr_destroy(&attr);
  Result<int> result = Status::OK();
  if (rc != 0) {
    result = Status::FromErrno(rc, "run " + args[0]);
  } else {
    int status = 0;
    pid_t waited;
    do {
      waited = waitpid(pid, &status, 0);
    } while (waited < 0 && errno == EINTR);
    if (waited < 0) {
      result = ErrnoStatus("wait for " + args[0]);
    } else {
      result = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
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
