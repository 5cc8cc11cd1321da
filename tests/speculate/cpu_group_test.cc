// `tipfs run`'s CPU group (speculate/cpu_group.h): where the calling process's cpu cgroup is,
// and that the launcher runs the whole tree in a group of its own and removes it afterwards.
#include "speculate/cpu_group.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "speculate/launcher.h"
#include "tests/speculate/spec_test_support.h"

namespace tipfs::spec {
namespace {

const char kMountinfoV1[] =
    "24 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
    "31 24 0:26 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n"
    "34 31 0:31 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
const char kCgroupsV1[] =
    "3:cpuset:/\n"
    "2:cpu,cpuacct:/build/job7\n"
    "0::/\n";

TEST(CpuGroupTest, FindsTheV1CpuHierarchyAndTheCallersPlaceInIt) {
  bool v2 = true;
  Result<std::string> dir = CpuCgroupDirectory(kMountinfoV1, kCgroupsV1, &v2);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(*dir, "/sys/fs/cgroup/cpu,cpuacct/build/job7");
  EXPECT_FALSE(v2);
}

TEST(CpuGroupTest, ACpusetOrCpuacctMountIsNotTheCpuController) {
  const std::string mountinfo =
      "33 31 0:30 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n"
      "36 31 0:33 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n";
  bool v2 = false;
  EXPECT_EQ(CpuCgroupDirectory(mountinfo, "3:cpuset:/\n2:cpuacct:/\n", &v2).error(), ENOENT);
}

TEST(CpuGroupTest, FallsBackToCgroupV2) {
  const std::string mountinfo = "29 24 0:25 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  bool v2 = false;
  Result<std::string> dir = CpuCgroupDirectory(mountinfo, "0::/user.slice/run-7.scope\n", &v2);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(*dir, "/sys/fs/cgroup/user.slice/run-7.scope");
  EXPECT_TRUE(v2);
  Result<std::string> root = CpuCgroupDirectory(mountinfo, "0::/\n", &v2);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(*root, "/sys/fs/cgroup");
}

TEST(CpuGroupTest, AMountOfASubtreeIsJoinedBelowItsRoot) {
  // A container given /docker/abc of the hierarchy sees it mounted at the usual place.
  const std::string mountinfo =
      "40 31 0:31 /docker/abc /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
  bool v2 = true;
  Result<std::string> dir = CpuCgroupDirectory(mountinfo, "1:cpu:/docker/abc/job\n", &v2);
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(*dir, "/sys/fs/cgroup/cpu/job");
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The path of the cpu line of a /proc/PID/cgroup text (v1 "N:...cpu...:PATH", else v2 "0::").
std::string CpuLine(const std::string& cgroups) {
  std::istringstream in(cgroups);
  std::string line, v2;
  while (std::getline(in, line)) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    const std::string controllers = line.substr(first + 1, second - first - 1);
    if (("," + controllers + ",").find(",cpu,") != std::string::npos) {
      return line.substr(second + 1);
    }
    if (controllers.empty()) v2 = line.substr(second + 1);
  }
  return v2;
}

TEST(CpuGroupTest, TheProgramAndWhatItLeavesRunningAreInTheGroupUntilAllEnd) {
  if (geteuid() != 0) GTEST_SKIP() << "cgroups are written by root";
  {
    Result<std::unique_ptr<CpuGroup>> probe = CpuGroup::Enter();
    if (!probe.ok() && (probe.error() == EOPNOTSUPP || probe.error() == EROFS)) {
      GTEST_SKIP() << probe.status().ToString();
    }
    ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  }
  const std::string own = CpuLine(ReadText("/proc/self/cgroup"));
  testing::SpecScratch scratch;
  RunOptions options;
  options.speculate = false;
  const std::string out = scratch.root() + "/cgroup";
  // The background job outlives the program; the launcher waits for it, then removes the group.
  Result<int> status = RunUnderSpeculation(
      options, {"sh", "-c",
                "cat /proc/self/cgroup > " + out + "; (sleep 0.3; cat /proc/self/cgroup > " + out +
                    ".late) &"});
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  const std::string group = (own == "/" ? "" : own) + "/tipfs-run-" + std::to_string(getpid());
  EXPECT_EQ(CpuLine(ReadText(out)), group);
  EXPECT_EQ(CpuLine(ReadText(out + ".late")), group);
  EXPECT_EQ(CpuLine(ReadText("/proc/self/cgroup")), own) << "the launcher went back";
  bool v2 = false;
  Result<std::string> dir =
      CpuCgroupDirectory(ReadText("/proc/self/mountinfo"), ReadText("/proc/self/cgroup"), &v2);
  ASSERT_TRUE(dir.ok());
  struct stat st;
  EXPECT_NE(stat((*dir + "/tipfs-run-" + std::to_string(getpid())).c_str(), &st), 0)
      << "the group is removed";

  options.cpu_group = false;
  ASSERT_TRUE(RunUnderSpeculation(options, {"sh", "-c", "cat /proc/self/cgroup > " + out}).ok());
  EXPECT_EQ(CpuLine(ReadText(out)), own);
}

}  // namespace
}  // namespace tipfs::spec
