// Path hints obey file permissions: a process may not make the daemon fetch (and so learn the
// timing of, or warm the cache with) a file it could not read itself. The hinting program runs
// as another user (a forked child that drops to nobody with setgroups/setgid/setuid) on a mount
// with --allow-other; a hint of an unreadable file, or of a file behind a directory it may not
// search, is refused with EACCES and fetches nothing, while a readable file is prefetched.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/support/as_user.h"
#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"
#include "tests/tip/tip_support.h"
#include "tipfs/hint.h"

namespace tipfs::testing::tip {
namespace {

// Hints `paths` (one call each, by path, whole files) as user and group `kNobody` in a forked
// child; returns each call's errno (-1 when the child could not change user, EBADF when it could
// not open the mount).
std::vector<int> HintAsNobody(const std::string& mountpoint,
                              const std::vector<std::string>& paths) {
  return ErrnosAsUser(kNobody, paths.size(), [&](size_t i) {
    const int root = open(mountpoint.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) return EBADF;
    const char* path = paths[i].c_str();
    const int error = tipfs_hint_files(root, &path, 1, TIPFS_SOURCE_MANUAL) == 0 ? 0 : errno;
    close(root);
    return error;
  });
}

TEST(HintPermissionsTest, PathHintsOfFilesTheCallerMayNotReadAreRefusedAndFetchNothing) {
  const std::string reason = FuseUnavailableReason();
  if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run the hinting program as another user";
  std::vector<TestFile> files = SmallFileSet(3, 11);
  files[0].name = "secret";
  files[1].name = "private/inner";
  files[2].name = "public";
  TipVolume volume;
  ASSERT_EQ(volume.Create(files), "");
  ASSERT_EQ(volume.Remount("--allow-other --cache-size 12M --disk-model ssd"), "");
  const std::string mnt = volume.mountpoint();
  ASSERT_EQ(chmod(volume.mount().root().c_str(), 0755), 0);  // mkdtemp made it 0700
  ASSERT_EQ(chmod(mnt.c_str(), 0755), 0);
  ASSERT_EQ(chmod((mnt + "/secret").c_str(), 0600), 0);
  ASSERT_EQ(chmod((mnt + "/private").c_str(), 0700), 0);
  ASSERT_EQ(chmod((mnt + "/private/inner").c_str(), 0644), 0);
  ASSERT_EQ(chmod((mnt + "/public").c_str(), 0644), 0);

  const StatsSnapshot before = WaitForQuietDisks(mnt);
  const std::vector<int> refused = HintAsNobody(mnt, {"secret", "private/inner", mnt + "/secret"});
  ASSERT_EQ(refused.size(), 3u);
  EXPECT_EQ(ErrnoName(refused[0]), "EACCES") << "unreadable file";
  EXPECT_EQ(ErrnoName(refused[1]), "EACCES") << "directory without search permission";
  EXPECT_EQ(ErrnoName(refused[2]), "EACCES") << "unreadable file by absolute path";
  const StatsSnapshot after_refused = WaitForQuietDisks(mnt);
  EXPECT_EQ(after_refused.Count("disk.read.ops"), before.Count("disk.read.ops"));
  EXPECT_EQ(after_refused.Count("hints.prefetched"), before.Count("hints.prefetched"));
  EXPECT_EQ(after_refused.Count("hints.calls"), before.Count("hints.calls"));
  EXPECT_EQ(after_refused.Count("hints.manual.bytes"), 0u);
  EXPECT_EQ(after_refused.Count("hints.outstanding.bytes"), 0u);

  // The same user may hint what it may read: the refusals above were about permission.
  const std::vector<int> allowed = HintAsNobody(mnt, {"public"});
  ASSERT_EQ(allowed.size(), 1u);
  EXPECT_EQ(ErrnoName(allowed[0]), "OK");
  const StatsSnapshot after_allowed = WaitForQuietDisks(mnt);
  EXPECT_EQ(after_allowed.Count("hints.manual.bytes"), files[2].bytes.size());
  EXPECT_GT(after_allowed.Count("hints.prefetched"), 0u);
  EXPECT_GT(after_allowed.Count("disk.read.ops"), before.Count("disk.read.ops"));
}

}  // namespace
}  // namespace tipfs::testing::tip
