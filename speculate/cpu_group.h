// A CPU group of its own for the process tree of `tipfs run` (a cgroup with the cpu controller:
// cgroup v1's cpu hierarchy, or cgroup v2 where the cpu controller is enabled below the caller).
//
// Why: a speculating child runs at SCHED_IDLE, so that it never takes the CPU from its program.
// But SCHED_IDLE yields to every other task of its run queue, and on a machine busy with other
// work (builds, other programs) the child then gets no CPU at all while its program waits for
// the disk, which is the only time it exists for. In a group of its own the tree competes with
// the rest of the machine as one entity, with the weight of one normal task, and inside the group
// the idle child still yields to its program: the child runs on the program's share, in the
// program's waits. Where cgroups cannot be written (no root, no cpu controller, cgroup v2's rule
// that a group with processes has no controlled children), `tipfs run` goes on without one.
// Thread-safety: one CpuGroup per launcher, used by one thread.
#pragma once

#include <memory>
#include <string>

#include "util/status.h"

namespace tipfs::spec {

class CpuGroup {
 public:
  // Makes <the caller's cpu cgroup>/tipfs-run-<pid> and moves the calling process into it, so
  // that what it spawns next starts there. The error names why not (ENOENT: no cpu hierarchy;
  // EOPNOTSUPP: cgroup v2 without the cpu controller below the caller; EACCES, EROFS...).
  static Result<std::unique_ptr<CpuGroup>> Enter();
  // Moves the calling process back into the group it came from (its spawned children stay).
  void LeaveCaller();
  // Leaves (if not done yet) and removes the group: call it when every process in it is gone.
  ~CpuGroup();

  CpuGroup(const CpuGroup&) = delete;
  CpuGroup& operator=(const CpuGroup&) = delete;

  // The group's directory, e.g. /sys/fs/cgroup/cpu/tipfs-run-1234.
  const std::string& path() const { return path_; }

 private:
  CpuGroup(std::string parent, std::string path) : parent_(parent), path_(path) {}
  std::string parent_;  // the caller's group, where it returns
  std::string path_;
  bool caller_inside_ = true;
};

// The directory of the calling process's cpu cgroup, from /proc/self/mountinfo and
// /proc/self/cgroup (text given for tests); *v2 tells which kind it is. NotFound: no hierarchy
// with the cpu controller is mounted.
Result<std::string> CpuCgroupDirectory(const std::string& mountinfo, const std::string& cgroups,
                                       bool* v2);

}  // namespace tipfs::spec
