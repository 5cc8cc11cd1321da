#include "tests/support/mount_fixture.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "fusefs/fuse_ring_switch.h"

namespace tipfs::testing {

namespace {

DiskBackend& Backend() {
  static DiskBackend backend;
  return backend;
}

std::string WithRoot(std::string text, const std::string& root) {
  for (size_t at = text.find("{root}"); at != std::string::npos; at = text.find("{root}", at)) {
    text.replace(at, 6, root);
  }
  return text;
}

}  // namespace

void SetDiskBackend(DiskBackend backend) { Backend() = std::move(backend); }

bool DisksAreRados() { return Backend().rados; }

std::string TipfsBinary() { return TIPFS_BINARY_PATH; }

int RunCommand(const std::string& command, std::string* output) {
  std::string full = command + " 2>&1";
  FILE* pipe = popen(full.c_str(), "r");
  if (pipe == nullptr) return -1;
  std::array<char, 4096> buffer;
  std::string text;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) text.append(buffer.data(), n);
  int status = pclose(pipe);
  if (output != nullptr) *output = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string FuseUnavailableReason() {
  int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) return std::string("cannot open /dev/fuse: ") + strerror(errno);
  close(fd);
  if (geteuid() != 0 && access("/usr/bin/fusermount3", X_OK) != 0) {
    return "not root and no fusermount3";
  }
  return "";
}

TipfsMount::TipfsMount(VolumeSpec spec) : spec_(std::move(spec)) {
  // Under $TMPDIR: scripts/test.sh gives each run its own, and cleans up only that.
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/tipfs-test-XXXXXX";
  root_ = mkdtemp(pattern.data());
  mountpoint_ = root_ + "/mnt";
  native_ = root_ + "/native";
  std::filesystem::create_directories(mountpoint_);
  std::filesystem::create_directories(native_);
  if (Backend().make) {
    disks_ = Backend().make(root_, spec_.disks);
  } else {
    for (int i = 0; i < spec_.disks; ++i) {
      disks_.push_back(root_ + "/disk" + std::to_string(i));
      std::filesystem::create_directories(disks_.back());
    }
  }
  volume_name_ =
      Backend().mount_name.empty() ? disks_.at(0) : WithRoot(Backend().mount_name, root_);
}

TipfsMount::~TipfsMount() {
  if (mounted_) {
    std::string out = Unmount();
    if (!out.empty()) {
      // Never leave a mount behind, even when the daemon hangs or died.
      umount2(mountpoint_.c_str(), MNT_DETACH);
    }
  }
  if (Backend().remove) Backend().remove(disks_);
  std::error_code ignored;
  std::filesystem::remove_all(root_, ignored);
}

std::string TipfsMount::Create() {
  std::string command =
      TipfsBinary() + " mkfs " + spec_.mkfs_args + " " + WithRoot(Backend().mkfs_args, root_);
  for (const std::string& disk : disks_) command += " '" + disk + "'";
  std::string output;
  return RunCommand(command, &output) == 0 ? "" : "mkfs failed: " + output;
}

std::string TipfsMount::Mount(const std::string& extra_args) {
  std::string output;
  std::string command = TipfsBinary() + " mount " + spec_.mount_args + " " + extra_args + " " +
                        "'" + volume_name_ + "' " + mountpoint_;
  if (RunCommand(command, &output) != 0) return "mount failed: " + output;
  mounted_ = true;
  return "";
}

std::string TipfsMount::Unmount() {
  std::string output;
  int rc = RunCommand(TipfsBinary() + " umount " + mountpoint_, &output);
  if (rc == 0) {
    mounted_ = false;
    return "";
  }
  return "umount failed: " + output;
}

std::string DataCacheArgs(const std::string& param) {
  const size_t ring = param.find("_ring");
  if (ring == std::string::npos) return "--data-cache " + param;
  return "--data-cache " + param.substr(0, ring) + " --fuse-io-uring on";
}

bool AsksForFuseRing(const std::string& mount_args) {
  return mount_args.find("--fuse-io-uring on") != std::string::npos;
}

std::string FuseRingUnavailableReason(const std::string& mount_args) {
  if (!AsksForFuseRing(mount_args)) return "";
  Status offered = fusefs::CheckKernelOffersFuseRing();
  return offered.ok() ? "" : offered.ToString();
}

void MountedTest::SetUp() {
  std::string reason = FuseUnavailableReason();
  if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
  // The transport does not depend on the disks: over RADOS only /dev/fuse is tested.
  if (DisksAreRados() && AsksForFuseRing(Spec().mount_args)) {
    GTEST_SKIP() << "the ring's tests run on local disks";
  }
  SKIP_WITHOUT_FUSE_RING(Spec().mount_args);
  if (Backend().unavailable) {
    reason = Backend().unavailable();
    if (!reason.empty()) GTEST_SKIP() << reason;
  }
  mount_ = std::make_unique<TipfsMount>(Spec());
  std::string error = mount_->Create();
  ASSERT_EQ(error, "");
  error = mount_->Mount();
  ASSERT_EQ(error, "");
}

void MountedTest::TearDown() { mount_.reset(); }

}  // namespace tipfs::testing
