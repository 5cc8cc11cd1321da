// `tipfs umount`: unmounts and waits until the daemon has made everything durable and exited,
// so that a following mount, fsck or copy of the disks sees the final state. A mount that stays
// busy is left mounted and the processes that hold it are named; --lazy detaches it at once.
#include <dirent.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "cli/commands.h"
#include "cli/mount_table.h"
#include "fusefs/daemon.h"

namespace tipfs::cli {
namespace {

// True while `pid` runs. A daemon that exited but was not reaped yet (a zombie waiting for init)
// has finished everything it does at unmount, so it counts as gone.
bool Running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  size_t close_paren = line.rfind(')');
  return close_paren != std::string::npos && close_paren + 2 < line.size() &&
         line[close_paren + 2] != 'Z' && line[close_paren + 2] != 'X';
}

bool Inside(const std::string& path, const std::string& mountpoint) {
  return path.compare(0, mountpoint.size(), mountpoint) == 0 &&
         (path.size() == mountpoint.size() || path[mountpoint.size()] == '/');
}

std::string LinkTarget(const std::string& link) {
  char target[4096];
  ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

// "pid 1234 (grep): cwd; pid 99 (bash): fd 3 /mnt/x" for the processes with a working or root
// directory, an open file or a mapping inside the mount. Read from /proc without touching the
// mount (readlink names the path; nothing is stat'ed through a possibly dead daemon).
std::string ProcessesHolding(const std::string& mountpoint, const std::string& daemon_pid) {
  std::string found;
  int listed = 0, more = 0;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return "";
  while (dirent* d = readdir(proc)) {
    const std::string pid = d->d_name;
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == daemon_pid) continue;
    const std::string base = "/proc/" + pid;
    std::string what;
    for (const char* link : {"cwd", "root", "exe"}) {
      if (what.empty() && Inside(LinkTarget(base + "/" + link), mountpoint)) what = link;
    }
    if (what.empty()) {
      if (DIR* fds = opendir((base + "/fd").c_str())) {
        while (dirent* fd = readdir(fds)) {
          const std::string target = LinkTarget(base + "/fd/" + fd->d_name);
          if (Inside(target, mountpoint)) {
            what = std::string("fd ") + fd->d_name + " " + target;
            break;
          }
        }
        closedir(fds);
      }
    }
    if (what.empty()) {
      std::ifstream maps(base + "/maps");
      std::string line;
      while (what.empty() && std::getline(maps, line)) {
        const size_t slash = line.find('/');
        if (slash != std::string::npos && Inside(line.substr(slash), mountpoint)) {
          what = "maps " + line.substr(slash);
        }
      }
    }
    if (what.empty()) continue;
    if (listed == 5) {
      ++more;
      continue;
    }
    std::string comm;
    std::ifstream(base + "/comm") >> comm;
    found += (found.empty() ? "" : "; ") + ("pid " + pid + " (" + comm + "): " + what);
    ++listed;
  }
  closedir(proc);
  if (more > 0) found += "; and " + std::to_string(more) + " more";
  return found;
}

Status BusyError(const std::string& mountpoint, pid_t daemon) {
  std::string holders = ProcessesHolding(mountpoint, std::to_string(daemon));
  return Status::Busy(
      mountpoint + " is busy" +
      (holders.empty() ? std::string(": a process still uses it") : ": used by " + holders) +
      "; it stays mounted (try again when they are done, or tipfs umount --lazy)");
}

Status Unmount(const std::string& mountpoint, bool lazy, pid_t daemon) {
  // Busy for a moment is normal: the kernel finishes the last close of a file a moment after
  // close(2) returns in some paths (deferred fput), and a process that just exited may still be
  // releasing its files. Ask again for about two seconds before naming who holds the mount.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  if (geteuid() == 0) {
    while (true) {
      if (umount2(mountpoint.c_str(), lazy ? MNT_DETACH : 0) == 0) return Status::OK();
      if (errno != EBUSY) return ErrnoStatus("umount " + mountpoint);
      if (std::chrono::steady_clock::now() > deadline) return BusyError(mountpoint, daemon);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  while (true) {
    pid_t pid = fork();
    if (pid == 0) {
      execlp("fusermount3", "fusermount3", lazy ? "-uzq" : "-uq", mountpoint.c_str(), nullptr);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::OK();
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
      return Status::NotFound("fusermount3 not found (install fuse3)");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      if (!ProcessesHolding(mountpoint, std::to_string(daemon)).empty()) {
        return BusyError(mountpoint, daemon);
      }
      return Status::FromErrno(
          EPERM, "fusermount3 -u " + mountpoint + " failed (not mounted by you, or busy)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

struct UmountArgs {
  std::string mountpoint;
  bool lazy = false;
};

int RunUmount(const UmountArgs& args) {
  std::optional<TipfsMount> mount = FindTipfsMount(args.mountpoint);
  if (!mount) return Usage("umount", args.mountpoint + " is not a tipfs mount point");
  pid_t daemon = 0;
  std::ifstream(fusefs::PidFilePath(mount->disk0)) >> daemon;
  Status st = Unmount(mount->mountpoint, args.lazy, daemon);
  if (!st.ok()) return Fail("umount", st);
  // Detached lazily, the daemon serves the processes still inside until they let go: there is
  // nothing to wait for now.
  if (args.lazy) return 0;
  // The daemon syncs its disks and metadata after the kernel lets go; wait for it to finish.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (daemon > 0 && Running(daemon)) {
    if (std::chrono::steady_clock::now() > deadline) {
      return Fail("umount",
                  Status::FromErrno(ETIMEDOUT, "the daemon (pid " + std::to_string(daemon) +
                                                   ") did not exit within 2 minutes"));
    }
    // A daemon started from this process (tests) would stay a zombie without this.
    waitpid(daemon, nullptr, WNOHANG);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return 0;
}

}  // namespace

Runner AddUmountCommand(CLI::App* app) {
  auto args = std::make_shared<UmountArgs>();
  app->add_flag("-l,--lazy", args->lazy,
                "Detach now even if busy; the daemon exits once the last user lets go");
  app->add_option("MOUNTPOINT", args->mountpoint, "Where the volume is mounted")->required();
  return [args] { return RunUmount(*args); };
}

}  // namespace tipfs::cli
