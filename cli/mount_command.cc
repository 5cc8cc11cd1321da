// `tipfs mount`: starts the daemon in the background (or the foreground) and returns only once
// the mount is usable, or with the one-line reason it is not.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/commands.h"
#include "fusefs/daemon.h"
#include "stripe/disk_name.h"
#include "util/units.h"

namespace tipfs::cli {
namespace {

struct MountArgs {
  std::string disk;
  std::string mountpoint;
  bool foreground = false;
  bool allow_other = false;
  std::string cache_size = "256M";
  std::string hints = "on";
  std::string readahead = "on";
  std::string data_cache = "kernel";
  std::string disk_model = "none";
  std::string log_file = "/dev/null";
  std::string rados_timeout = "30s";
};

// Absolute form of a path that may not exist (errors are reported later, naming the original).
std::string Absolute(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) != nullptr) return resolved;
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

Result<fusefs::MountOptions> ToOptions(const MountArgs& args) {
  fusefs::MountOptions options;
  options.disk = stripe::IsRadosName(args.disk) ? args.disk : Absolute(args.disk);
  options.mountpoint = Absolute(args.mountpoint);
  options.foreground = args.foreground;
  options.allow_other = args.allow_other;
  Result<uint64_t> cache_size = ParseSize(args.cache_size);
  if (!cache_size.ok()) return cache_size.status().WithContext("--cache-size");
  options.cache.capacity_bytes = *cache_size;
  options.cache.hints_ignored = args.hints == "ignore";
  options.cache.readahead = args.readahead == "on";
  options.data_cache =
      args.data_cache == "direct" ? fusefs::DataCacheMode::kDirect : fusefs::DataCacheMode::kKernel;
  options.disk_model = args.disk_model;
  Result<int64_t> timeout = ParseDurationNanos(args.rados_timeout);
  if (!timeout.ok()) return timeout.status().WithContext("--rados-timeout");
  if (*timeout <= 0) {
    return Status::InvalidArgument("--rados-timeout " + args.rados_timeout + " must be positive");
  }
  options.rados_timeout_ns = *timeout;
  return options;
}

// The background child reports through a pipe: "OK", or the error message.
int MountInBackground(const fusefs::MountOptions& options, const std::string& log_file) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Fail("mount", ErrnoStatus("pipe"));
  pid_t pid = fork();
  if (pid < 0) return Fail("mount", ErrnoStatus("fork"));
  if (pid == 0) {
    close(pipe_fds[0]);
    setsid();
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    int log_fd = open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    if (log_fd < 0) log_fd = null_fd;
    if (log_fd >= 0) {
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
    }
    if (chdir("/") != 0) {
      // Paths are absolute already; staying in the old directory only pins it.
    }
    int report_fd = pipe_fds[1];
    Status st = fusefs::ServeMount(options, [report_fd](const Status& status) {
      std::string message = status.ok() ? "OK" : status.ToString();
      (void)!write(report_fd, message.data(), message.size());
      close(report_fd);
    });
    _exit(st.ok() ? 0 : 1);
  }
  close(pipe_fds[1]);
  std::string message;
  char buffer[512];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0) message.append(buffer, n);
  close(pipe_fds[0]);
  if (message == "OK") return 0;
  int status = 0;
  waitpid(pid, &status, 0);
  if (message.empty()) message = "the daemon exited before the mount was ready";
  std::fprintf(stderr, "tipfs mount: %s\n", message.c_str());
  return 1;
}

int RunMount(const MountArgs& args) {
  Result<fusefs::MountOptions> options = ToOptions(args);
  if (!options.ok()) return Fail("mount", options.status());
  if (!options->foreground) return MountInBackground(*options, args.log_file);
  Status st = fusefs::ServeMount(*options, [](const Status& status) {
    if (!status.ok()) return;
    std::fprintf(stderr, "tipfs: mounted; serving until unmounted (Ctrl-C to stop)\n");
  });
  return st.ok() ? 0 : Fail("mount", st);
}

}  // namespace

Runner AddMountCommand(CLI::App* app) {
  auto args = std::make_shared<MountArgs>();
  app->add_flag("-f,--foreground", args->foreground, "Serve in the foreground instead of a daemon");
  app->add_option("--cache-size", args->cache_size, "Daemon block cache capacity (default 256M)")
      ->check(SizeValidator());
  app->add_option("--hints", args->hints,
                  "on: act on hints; ignore: accept and count, prefetch nothing")
      ->check(CLI::IsMember({"on", "ignore"}));
  app->add_option("--readahead", args->readahead, "Sequential read-ahead for unhinted reads")
      ->check(CLI::IsMember({"on", "off"}));
  app->add_option("--data-cache", args->data_cache,
                  "kernel: page cache on top (default); direct: every read reaches the daemon")
      ->check(CLI::IsMember({"kernel", "direct"}));
  app->add_option("--disk-model", args->disk_model,
                  "Emulated disk timing: PROFILE[,key=value...] (see tipfs(8)); default none");
  app->add_flag("--allow-other", args->allow_other, "Let users other than the mounter in");
  app->add_option("--log", args->log_file, "Where the background daemon writes its messages");
  app->add_option("--rados-timeout", args->rados_timeout,
                  "RADOS disks: how long one operation waits for the cluster before it fails "
                  "with EIO (default 30s)");
  app->add_option("DISK", args->disk, "Any disk of the volume, or its metadata directory")
      ->required();
  app->add_option("MOUNTPOINT", args->mountpoint, "An existing, empty-of-mounts directory")
      ->required();
  return [args] { return RunMount(*args); };
}

}  // namespace tipfs::cli
