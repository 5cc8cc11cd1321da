// TipfsMount: a real tipfs volume for integration tests. It makes N disk directories under a
// fresh temporary directory, runs the built `tipfs mkfs` and `tipfs mount`, and always unmounts
// and removes everything when it goes away, also when the test fails. Tests skip (with the reason)
// where /dev/fuse is missing or unusable.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
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

// Where the disks of test volumes live. By default they are directories under the volume's
// temporary root; the tests in tests/rados install a backend whose disks are namespaces of a
// Ceph pool, so the same tests run over RADOS (tests/rados/rados_test_env.h).
struct DiskBackend {
  // The disk names for a volume under `root` (which exists), in disk order.
  std::function<std::vector<std::string>(const std::string& root, int disks)> make;
  // Removes what `make` made outside root (called when the volume goes away).
  std::function<void(const std::vector<std::string>& disks)> remove;
  // Appended to mkfs (e.g. "--meta ROOT/meta"); "{root}" is replaced by the volume's root.
  std::string mkfs_args;
  // What `tipfs mount` is given to name the volume, "{root}" replaced; empty: disk 0.
  std::string mount_name;
  // Why volumes cannot be made here ("" when they can); MountedTest skips with it.
  std::function<std::string()> unavailable;
  bool rados = false;
};
void SetDiskBackend(DiskBackend backend);
// True when test volumes' disks are RADOS namespaces (tests that inspect directories skip).
bool DisksAreRados();

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
  // What mount and fsck are given: disk 0, or the metadata directory of a RADOS volume.
  const std::string& volume_name() const { return volume_name_; }
  // A scratch directory next to the mount, on the native file system (for comparisons).
  const std::string& native() const { return native_; }
  // path inside the mount
  std::string Path(const std::string& relative) const { return mountpoint_ + "/" + relative; }

 private:
  VolumeSpec spec_;
  std::string root_, mountpoint_, native_;
  std::vector<std::string> disks_;
  std::string volume_name_;
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

// The daemon's counter `key` ("fuse.read.ops") from the mount's .tipfs/stats.json; 0 and a test
// failure when it is not there (a renamed counter must not pass as a count of 0).
inline uint64_t MountCounter(const std::string& mountpoint, const std::string& key) {
  std::ifstream in(mountpoint + "/.tipfs/stats.json");
  std::stringstream json;
  json << in.rdbuf();
  const std::string text = json.str();
  const size_t at = text.find("\"" + key + "\":");
  if (at == std::string::npos) {
    ADD_FAILURE() << "no " << key << " in " << mountpoint << "/.tipfs/stats.json";
    return 0;
  }
  return std::strtoull(text.c_str() + at + key.size() + 3, nullptr, 10);
}

// The mount arguments of a data-cache test parameter: the mode ("kernel", "direct"), with
// "_ring" for the same mode over FUSE's io_uring ("direct_ring": --data-cache direct
// --fuse-io-uring on). A mount that asks for the ring skips where the kernel does not offer it
// (scripts/test.sh turns it on for the run).
std::string DataCacheArgs(const std::string& param);

// Whether a data-cache test parameter is direct mode ("direct", "direct_ring").
inline bool IsDirectMode(const std::string& param) { return param.rfind("direct", 0) == 0; }

// Whether `mount_args` ask for FUSE over io_uring, and "" or why that mount cannot be made here.
bool AsksForFuseRing(const std::string& mount_args);
std::string FuseRingUnavailableReason(const std::string& mount_args);

// Skips a test whose mount asks for the ring where the kernel does not offer it; fails it instead
// under scripts/test.sh, which turns the ring on and sets TIPFS_REQUIRE_FUSE_RING where the kernel
// has it.
#define SKIP_WITHOUT_FUSE_RING(mount_args)                                                   \
  do {                                                                                       \
    const std::string ring_reason = ::tipfs::testing::FuseRingUnavailableReason(mount_args); \
    if (!ring_reason.empty() && std::getenv("TIPFS_REQUIRE_FUSE_RING") != nullptr) {         \
      FAIL() << ring_reason;                                                                 \
    }                                                                                        \
    if (!ring_reason.empty()) GTEST_SKIP() << ring_reason;                                   \
  } while (false)

// The parameters of the tests that run in every data-cache mode, over /dev/fuse and io_uring.
inline std::vector<std::string> AllDataCacheModes() {
  return {"kernel", "direct", "kernel_ring", "direct_ring"};
}

// A MountedTest run once per data-cache mode (the parameter, see DataCacheArgs).
class DataCacheModeTest : public MountedTest, public ::testing::WithParamInterface<std::string> {
 protected:
  VolumeSpec Spec() const override {
    VolumeSpec spec;
    spec.mount_args = DataCacheArgs(GetParam());
    return spec;
  }
};

}  // namespace tipfs::testing
