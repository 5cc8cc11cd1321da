// Shared fixture of the POSIX comparison tests: a mounted 4-disk volume in one data cache mode
// (the test parameter), and a `work` directory on the mount and one in a native directory on
// the local file system (ext4 here) where every script runs twice.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"
#include "tests/support/posix_trace.h"

namespace tipfs::testing {

class PosixCompareTest : public MountedTest, public ::testing::WithParamInterface<std::string> {
 protected:
  VolumeSpec Spec() const override {
    VolumeSpec spec;
    // allow_other: the permission tests act as other users, whom FUSE keeps out otherwise.
    spec.mount_args = DataCacheArgs(GetParam()) + (geteuid() == 0 ? " --allow-other" : "");
    return spec;
  }

  void SetUp() override {
    MountedTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // The mount's root holds the hidden .tipfs control directory; scripts run one level down.
    // Other users must reach both work directories (mkdtemp made the root 0700).
    ASSERT_EQ(chmod(mount_->root().c_str(), 0755), 0);
    ASSERT_EQ(mkdir((mount_->native() + "/work").c_str(), 0755), 0);
    ASSERT_EQ(mkdir(Path("work").c_str(), 0755), 0) << ErrnoName(errno);
  }

  void Compare(const std::function<void(PosixTrace&)>& script) {
    ExpectSameBehaviour(mount_->native() + "/work", Path("work"), script);
  }
};

// ---- small recording helpers shared by the scripts ----

inline int OpenAt(PosixTrace& t, const std::string& step, const std::string& rel, int flags,
                  mode_t mode = 0) {
  return static_cast<int>(t.Do(
      step, [&] { return static_cast<long>(::open(t.P(rel).c_str(), flags | O_CLOEXEC, mode)); }));
}

inline void WriteAt(PosixTrace& t, const std::string& step, int fd, const std::string& data,
                    off_t offset) {
  t.Do(
      step, [&] { return static_cast<long>(::pwrite(fd, data.data(), data.size(), offset)); },
      true);
}

inline void WriteNext(PosixTrace& t, const std::string& step, int fd, const std::string& data) {
  t.Do(
      step, [&] { return static_cast<long>(::write(fd, data.data(), data.size())); }, true);
}

// Records how many bytes pread returned and their hash (or the errno).
inline void ReadAt(PosixTrace& t, const std::string& step, int fd, size_t length, off_t offset) {
  std::string buffer(length, '\0');
  ssize_t n = ::pread(fd, buffer.data(), length, offset);
  if (n < 0) return t.Note(step, ErrnoName(errno));
  buffer.resize(static_cast<size_t>(n));
  t.Note(step, std::to_string(n) + " bytes " + HashBytes(buffer));
}

inline void CloseFd(PosixTrace& t, const std::string& step, int fd) {
  t.Do(step, [&] { return static_cast<long>(::close(fd)); });
}

inline std::string DataCacheName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace tipfs::testing
