// `tipfs umount`: unmounts and waits until the daemon has made everything durable and exited,
// so that a following mount, fsck or copy of the disks sees the final state.
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

Status Unmount(const std::string& mountpoint) {
  if (geteuid() == 0) {
    // The kernel finishes the last close of a file a moment after close(2) returns in some paths
    // (deferred fput), so a mount that was just let go may still look busy: ask a few times.
    for (int attempt = 0;; ++attempt) {
      if (umount2(mountpoint.c_str(), 0) == 0) return Status::OK();
      if (errno != EBUSY) return ErrnoStatus("umount " + mountpoint);
      if (attempt == 10) return Status::Busy(mountpoint + " is busy: a process still uses it");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  pid_t pid = fork();
  if (pid == 0) {
    execlp("fusermount3", "fusermount3", "-u", "-q", mountpoint.c_str(), nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::OK();
  return Status::Busy("fusermount3 -u " + mountpoint + " failed (busy, or not yours to unmount)");
}

int RunUmount(const std::string& mountpoint) {
  std::optional<TipfsMount> mount = FindTipfsMount(mountpoint);
  if (!mount) {
    return Fail("umount", Status::InvalidArgument(mountpoint + " is not a tipfs mount point"));
  }
  pid_t daemon = 0;
  std::ifstream(fusefs::PidFilePath(mount->disk0)) >> daemon;
  Status st = Unmount(mount->mountpoint);
  if (!st.ok()) return Fail("umount", st);
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
  auto mountpoint = std::make_shared<std::string>();
  app->add_option("MOUNTPOINT", *mountpoint, "Where the volume is mounted")->required();
  return [mountpoint] { return RunUmount(*mountpoint); };
}

}  // namespace tipfs::cli
