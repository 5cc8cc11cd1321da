// TipfsMount: a real tipfs volume for integration tests. It makes N disk directories under a
// fresh temporary directory, runs the built `tipfs mkfs` and `tipfs mount`, and always unmounts
// and removes everything when it goes away, also when the test fails. Tests skip (with the reason)
// where /dev/fuse is missing or unusable.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tipfs::testing {

// Path of the tipfs binary under test (set by CMake).
std::string TipfsBinary();

// Runs a shell command; returns its exit status and fills *output with stdout+stderr.
int RunCommand(const std::string& command, std::string* output = nullptr);

// Empty when FUSE mounts can work here; otherwise why not.
std::string FuseUnavailableReason();

struct VolumeSpec {
  int disks = 4;
  std::string mkfs_args;   // e.g. "--stripe-unit 64K"
  std::string mount_args;  // e.g. "--cache-size 12M --disk-model hdd"
};

class TipfsMount {
 public:
  explicit TipfsMount(VolumeSpec spec = {});
  ~TipfsMount();
  TipfsMount(const TipfsMount&) = delete;
  TipfsMount& operator=(const TipfsMount&) = delete;

  // Makes the volume (mkfs); then Mount(). Both return "" on success or the tool's output.
  std::string Create();
  std::string Mount(const std::string& extra_args = "");
  std::string Unmount();
  bool mounted() const { return mounted_; }

  const std::string& root() const { return root_; }  // the temporary directory
  const std::string& mountpoint() const { return mountpoint_; }
  const std::vector<std::string>& disks() const { return disks_; }
  // A scratch directory next to the mount, on the native file system (for comparisons).
  const std::string& native() const { return native_; }
  // path inside the mount
  std::string Path(const std::string& relative) const { return mountpoint_ + "/" + relative; }

 private:
  VolumeSpec spec_;
  std::string root_, mountpoint_, native_;
  std::vector<std::string> disks_;
  bool mounted_ = false;
};

// gtest fixture: SetUp skips without FUSE, creates and mounts a 4-disk volume.
class MountedTest : public ::testing::Test {
 protected:
  virtual VolumeSpec Spec() const { return {}; }
  void SetUp() override;
  void TearDown() override;
  std::string Path(const std::string& relative) const { return mount_->Path(relative); }
  std::unique_ptr<TipfsMount> mount_;
};

}  // namespace tipfs::testing
