// `tipfs mount`: starts the daemon in the background (or the foreground) and returns only once
// the mount is usable, or with the one-line reason it is not. Also what mount(8) runs for a
// `fuse.tipfs` line in /etc/fstab: mount.fuse3 calls `tipfs DISK MOUNTPOINT -o OPTIONS`, which
// main.cc turns into `tipfs mount -o OPTIONS DISK MOUNTPOINT`.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/commands.h"
#include "fusefs/daemon.h"
#include "stripe/disk_name.h"
#include "stripe/volume.h"
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
  std::string fuse_io_uring = "off";
  std::string min_read = "4K";
  std::string data_cache = "kernel";
  std::string disk_model = "none";
  std::string backing_io = "auto";
  std::string log_file = "/dev/null";
  std::string rados_timeout = "30s";
  std::string tainted_budget;  // empty: the cache's default
  std::string metrics_listen;
  std::vector<std::string> dash_o;  // -o key[=value],... (fstab style)
  bool nofail = false;
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

bool IsOneOf(const std::string& value, std::initializer_list<const char*> choices) {
  for (const char* c : choices) {
    if (value == c) return true;
  }
  return false;
}

// Applies the -o options to *args and *options. Returns "" or the usage error.
std::string ApplyDashO(MountArgs* args, fusefs::MountOptions* options) {
  for (const std::string& list : args->dash_o) {
    size_t pos = 0;
    while (pos <= list.size()) {
      size_t comma = list.find(',', pos);
      if (comma == std::string::npos) comma = list.size();
      const std::string item = list.substr(pos, comma - pos);
      pos = comma + 1;
      if (item.empty()) continue;
      const size_t eq = item.find('=');
      const std::string key = item.substr(0, eq);
      const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
      auto need_value = [&](std::string* field, std::initializer_list<const char*> choices = {}) {
        if (eq == std::string::npos || value.empty()) return "-o " + key + " needs a value";
        if (choices.size() > 0 && !IsOneOf(value, choices)) {
          std::string list;
          for (const char* c : choices) list += std::string(list.empty() ? "" : ", ") + c;
          return "-o " + item + ": expected one of " + list;
        }
        *field = value;
        return std::string();
      };
      std::string error;
      if (key == "cache_size") {
        error = need_value(&args->cache_size);
      } else if (key == "min_read") {
        error = need_value(&args->min_read);
      } else if (key == "disk_model") {
        // Commas separate mount options: the model's knobs are joined with ':' here
        // (disk_model=hdd:L=5ms is --disk-model hdd,L=5ms).
        error = need_value(&args->disk_model);
        for (char& c : args->disk_model) c = c == ':' ? ',' : c;
      } else if (key == "data_cache") {
        error = need_value(&args->data_cache, {"kernel", "direct"});
      } else if (key == "hints") {
        error = need_value(&args->hints, {"on", "ignore", "always"});
      } else if (key == "readahead") {
        error = need_value(&args->readahead, {"on", "off"});
      } else if (key == "fuse_io_uring") {
        error = need_value(&args->fuse_io_uring, {"on", "off"});
      } else if (key == "backing_io") {
        error = need_value(&args->backing_io, {"auto", "direct", "buffered"});
      } else if (key == "log") {
        error = need_value(&args->log_file);
      } else if (key == "metrics_listen") {
        error = need_value(&args->metrics_listen);
      } else if (key == "allow_other") {
        args->allow_other = true;
      } else if (key == "nofail") {
        args->nofail = true;
      } else if (key == "ro" || key == "rw" || key == "nosuid" || key == "suid" || key == "nodev" ||
                 key == "dev" || key == "noexec" || key == "exec" || key == "sync" ||
                 key == "async" || key == "dirsync") {
        options->kernel_flags.push_back(key);  // the kernel enforces these on the mount
        if (key == "ro") options->read_only = true;
        if (key == "rw") options->read_only = false;
      } else if (key == "noatime") {
        options->atime = fusefs::AtimeMode::kNever;  // the daemon keeps atime; the kernel shows it
        options->kernel_flags.push_back(key);
      } else if (key == "strictatime") {
        options->atime = fusefs::AtimeMode::kEveryRead;  // libfuse's mount does not take it
      } else if (key == "relatime" || key == "atime") {
        options->atime = fusefs::AtimeMode::kRelatime;
      } else if (key == "defaults" || key == "auto" || key == "noauto" || key == "user" ||
                 key == "users" || key == "nouser" || key == "owner" || key == "group" ||
                 key == "_netdev" || key == "nodiratime" || key == "diratime" ||
                 key == "lazytime" || key == "nolazytime" || key == "norelatime" ||
                 key == "comment" || key.compare(0, 2, "x-") == 0) {
        // For mount(8), systemd or the kernel's generic flags tipfs has no use for: accepted.
      } else {
        error = "unknown mount option '" + item + "' (tipfs(8) lists them)";
      }
      if (!error.empty()) return error;
    }
  }
  return "";
}

// Turns the arguments into MountOptions; "" or the usage error (exit 2).
std::string ToOptions(MountArgs* args, fusefs::MountOptions* options) {
  std::string error = ApplyDashO(args, options);
  if (!error.empty()) return error;
  options->disk = stripe::IsRadosName(args->disk) ? args->disk : Absolute(args->disk);
  options->mountpoint = Absolute(args->mountpoint);
  options->foreground = args->foreground;
  options->allow_other = args->allow_other;
  options->metrics_listen = args->metrics_listen;
  if (!args->metrics_listen.empty()) {
    // The form only; whether the address can be bound is for the daemon to find out.
    const std::string& listen = args->metrics_listen;
    const std::string port =
        listen.substr(listen.rfind(':') == std::string::npos ? 0 : listen.rfind(':') + 1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos || std::stoul(port) > 65535) {
      return "--metrics-listen " + listen +
             ": expected [ADDRESS:]PORT, e.g. 9100 or 127.0.0.1:9100";
    }
  }
  Result<uint64_t> cache_size = ParseSize(args->cache_size);
  if (!cache_size.ok()) return "--cache-size: " + cache_size.status().message();
  // The cache needs a few stripe units to work at all; the volume's label says how large one is.
  // (An unreadable label is reported by the mount itself, with the reason.)
  if (Result<stripe::Label> label = stripe::ReadLabel(args->disk); label.ok()) {
    const uint64_t minimum = cache::kMinCapacityUnits * label->stripe_unit;
    if (*cache_size < minimum) {
      return "--cache-size " + args->cache_size + " is below the minimum of " +
             FormatSize(minimum) + " (" + std::to_string(cache::kMinCapacityUnits) +
             " stripe units of " + FormatSize(label->stripe_unit) + ")";
    }
  }
  options->cache.capacity_bytes = *cache_size;
  if (!IsOneOf(args->hints, {"on", "ignore", "always"}))
    return "--hints " + args->hints + ": expected on, ignore or always";
  options->cache.hints_ignored = args->hints == "ignore";
  options->cache.always_prefetch_hinted = args->hints == "always";
  options->cache.readahead = args->readahead == "on";
  Result<uint64_t> min_read = ParseSize(args->min_read);
  if (!min_read.ok()) return "--min-read: " + min_read.status().message();
  if (*min_read < 4096 || *min_read > (1u << 30) || (*min_read & (*min_read - 1)) != 0) {
    return "--min-read " + args->min_read + ": expected a power of two from 4K to 1G";
  }
  options->cache.min_read = static_cast<uint32_t>(*min_read);
  options->data_cache = args->data_cache == "direct" ? fusefs::DataCacheMode::kDirect
                                                     : fusefs::DataCacheMode::kKernel;
  options->disk_model = args->disk_model;
  Result<int64_t> timeout = ParseDurationNanos(args->rados_timeout);
  if (!timeout.ok()) return "--rados-timeout: " + timeout.status().message();
  if (*timeout <= 0) return "--rados-timeout " + args->rados_timeout + " must be positive";
  options->rados_timeout_ns = *timeout;
  options->fuse_io_uring = args->fuse_io_uring == "on";
  options->backing_io = args->backing_io == "direct"     ? fusefs::BackingIo::kDirect
                        : args->backing_io == "buffered" ? fusefs::BackingIo::kBuffered
                                                         : fusefs::BackingIo::kAuto;
  if (!args->tainted_budget.empty()) {
    Result<uint64_t> budget = ParseSize(args->tainted_budget);
    if (!budget.ok()) return "--tainted-hint-budget: " + budget.status().message();
    options->cache.tainted_hint_budget_bytes = *budget;
    // The mount-wide budget stays at least eight processes' worth.
    options->cache.global_tainted_hint_budget_bytes =
        std::max(options->cache.global_tainted_hint_budget_bytes, 8 * *budget);
  }
  return "";
}

// The background child reports through a pipe: "OK", or the error message.
int MountInBackground(const fusefs::MountOptions& options, int log_fd) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Fail("mount", ErrnoStatus("pipe"));
  pid_t pid = fork();
  if (pid < 0) return Fail("mount", ErrnoStatus("fork"));
  if (pid == 0) {
    close(pipe_fds[0]);
    setsid();
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
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
  if (log_fd >= 0) close(log_fd);
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

int RunMount(MountArgs args) {
  fusefs::MountOptions options;
  std::string usage = ToOptions(&args, &options);
  if (!usage.empty()) return Usage("mount", usage);
  // nofail, as mount(8) means it: a volume whose disk is not there is not an error.
  struct stat st;
  if (args.nofail && stat(options.disk.c_str(), &st) != 0 && errno == ENOENT) {
    std::fprintf(stderr, "tipfs mount: %s does not exist; not mounted (nofail)\n",
                 args.disk.c_str());
    return 0;
  }
  // The log is opened here, so that a log in a missing directory is an error now rather than a
  // daemon that silently logs nowhere.
  int log_fd = -1;
  if (!options.foreground) {
    log_fd = open(args.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd < 0) return Fail("mount", ErrnoStatus("--log " + args.log_file));
  }
  if (!options.foreground) return MountInBackground(options, log_fd);
  Status served = fusefs::ServeMount(options, [](const Status& status) {
    if (!status.ok()) return;
    std::fprintf(stderr, "tipfs: mounted; serving until unmounted (Ctrl-C to stop)\n");
  });
  return served.ok() ? 0 : Fail("mount", served);
}

}  // namespace

Runner AddMountCommand(CLI::App* app) {
  auto args = std::make_shared<MountArgs>();
  app->add_flag("-f,--foreground", args->foreground, "Serve in the foreground instead of a daemon");
  app->add_option(
         "-o", args->dash_o,
         "Mount options as in fstab: cache_size=, disk_model= (knobs joined by ':'), "
         "data_cache=, hints=, readahead=, min_read=, fuse_io_uring=, log=, metrics_listen=, "
         "allow_other, ro, "
         "noatime, nodev, nosuid, noexec, nofail; x-* and _netdev are ignored")
      ->option_text("OPTION[,...]")
      ->allow_extra_args(false);
  app->add_option("--cache-size", args->cache_size,
                  "Daemon block cache capacity (default 256M; at least 4 stripe units)")
      ->option_text("SIZE")
      ->check(SizeValidator());
  app->add_option("--hints", args->hints,
                  "on: act on hints (TIP's cost-benefit manager); ignore: accept and count, "
                  "prefetch nothing; always: prefetch hinted blocks to the horizon whatever "
                  "the buffers are worth to others (a baseline to compare with)")
      ->option_text("on|ignore|always")
      ->check(OneOf({"on", "ignore", "always"}));
  app->add_option("--readahead", args->readahead, "Sequential read-ahead for unhinted reads")
      ->option_text("on|off")
      ->check(OneOf({"on", "off"}));
  app->add_option("--min-read", args->min_read,
                  "Least a demand miss reads from the disks, aligned to itself (default 4K; the "
                  "stripe unit or more reads whole units); prefetches read whole units")
      ->option_text("SIZE");
  app->add_option("--data-cache", args->data_cache,
                  "kernel: page cache on top (default); direct: every read reaches the daemon")
      ->option_text("kernel|direct")
      ->check(OneOf({"kernel", "direct"}));
  app->add_option("--disk-model", args->disk_model,
                  "Emulated disk timing (see tipfs(8)); default none")
      ->option_text("PROFILE[,KEY=VALUE...]");
  app->add_option("--tainted-hint-budget", args->tainted_budget,
                  "Tainted speculative hint bytes one process may have outstanding (default 4M)")
      ->option_text("SIZE");
  app->add_option("--backing-io", args->backing_io,
                  "direct: O_DIRECT reads of the backing objects where supported; buffered; "
                  "auto (default): direct unless --disk-model emulates the disks")
      ->option_text("auto|direct|buffered")
      ->check(OneOf({"auto", "direct", "buffered"}));
  app->add_option("--fuse-io-uring", args->fuse_io_uring,
                  "on: take FUSE requests over io_uring (Linux 6.14+, with fuse's enable_uring "
                  "set to Y) instead of reading /dev/fuse; off (default)")
      ->option_text("on|off")
      ->check(OneOf({"on", "off"}));
  app->add_flag("--allow-other", args->allow_other, "Let users other than the mounter in");
  app->add_option("--log", args->log_file, "Where the background daemon writes its messages")
      ->option_text("FILE");
  app->add_option("--metrics-listen", args->metrics_listen,
                  "Serve /metrics (Prometheus) over HTTP on [ADDRESS:]PORT (default address "
                  "127.0.0.1)")
      ->option_text("[ADDRESS:]PORT");
  app->add_option("--rados-timeout", args->rados_timeout,
                  "RADOS disks: how long one operation waits for the cluster before it fails "
                  "with EIO (default 30s)")
      ->option_text("DURATION");
  app->add_option("DISK", args->disk, "Any disk of the volume, or its metadata directory")
      ->required();
  app->add_option("MOUNTPOINT", args->mountpoint, "An existing directory where nothing is mounted")
      ->required();
  return [args] { return RunMount(*args); };
}

}  // namespace tipfs::cli
