// Set-user-ID and set-group-ID bits after writes, truncates and changes of owner, through
// FileSystem without a mount, by callers with and without CAP_FSETID: the kernel's rules
// (should_remove_suid, chown_common), which direct-I/O FUSE writes leave to the daemon. A set-id
// program another user could change and still run with its owner's rights would be a hole.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "fusefs/filesystem.h"
#include "tests/filesystem/fs_rig.h"

namespace tipfs::testing {
namespace {

using fusefs::Caller;
using meta::kRootIno;

constexpr uint32_t kNobody = 65534;

// A process of uid 65534 with no capabilities, alive for the test: the unprivileged caller
// whose /proc entry the daemon reads.
class UnprivilegedProcess {
 public:
  UnprivilegedProcess() {
    if (geteuid() != 0) return;  // then this process itself lacks CAP_FSETID
    int ready[2];
    if (pipe2(release_, O_CLOEXEC) != 0 || pipe2(ready, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(release_[1]);
      close(ready[0]);
      if (setresgid(kNobody, kNobody, kNobody) != 0 || setresuid(kNobody, kNobody, kNobody) != 0) {
        _exit(1);
      }
      (void)write(ready[1], "r", 1);  // its credentials are nobody's from here on
      char c;
      (void)read(release_[0], &c, 1);  // until the test ends
      _exit(0);
    }
    close(ready[1]);
    char c;
    dropped_ = read(ready[0], &c, 1) == 1;  // before the test asks about it
    close(ready[0]);
  }
  ~UnprivilegedProcess() {
    if (pid_ <= 0) return;
    close(release_[1]);
    int status;
    waitpid(pid_, &status, 0);
    close(release_[0]);
  }
  bool ready() const { return geteuid() != 0 || dropped_; }
  Caller caller() const {
    return Caller{kNobody, kNobody, static_cast<uint32_t>(pid_ > 0 ? pid_ : getpid())};
  }

 private:
  pid_t pid_ = -1;
  int release_[2] = {-1, -1};
  bool dropped_ = false;
};

class SetIdTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(nobody_.ready()) << "no process of uid 65534"; }
  // A regular file of root's with `mode` (set with chmod, past the umask), open.
  uint64_t Make(const std::string& name, uint32_t mode) {
    auto opened = rig_.fs()->Create(Caller{}, kRootIno, name, 0644, O_RDWR);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    meta::AttrChange chmod;
    chmod.mode = mode;
    chmod.now = meta::Time::Now();
    EXPECT_TRUE(rig_.fs()->SetAttr(opened->inode.ino, chmod).ok());
    return opened->inode.ino;
  }
  uint32_t ModeOf(uint64_t ino) {
    auto inode = rig_.fs()->GetAttr(ino);
    EXPECT_TRUE(inode.ok());
    return inode.ok() ? inode->mode & 07777 : 0;
  }
  bool WriteByte(const Caller& caller, uint64_t ino) {
    char byte = 'x';
    return rig_.fs()->Write(caller, ino, 0, &byte, 1).ok();
  }
  // A privileged caller: this process, when it runs as root with CAP_FSETID.
  Caller Root() const { return Caller{0, 0, static_cast<uint32_t>(getpid())}; }

  FsRig rig_;
  UnprivilegedProcess nobody_;
};

TEST_F(SetIdTest, AWriteByAnUnprivilegedUserClearsSetUidAndGroupExecutableSetGid) {
  std::vector<uint64_t> told;
  rig_.fs()->SetAttributeListener([&](uint64_t ino) { told.push_back(ino); });
  struct Case {
    uint32_t before, after;
  };
  // 02767: set-group-ID without group execute marks mandatory locking, not privilege: it stays.
  const Case cases[] = {{04777, 0777}, {02777, 0777},  {06777, 0777},
                        {06755, 0755}, {02767, 02767}, {0777, 0777}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.before));
    uint64_t ino = Make("f" + std::to_string(c.before), c.before);
    ASSERT_TRUE(WriteByte(nobody_.caller(), ino));
    EXPECT_EQ(ModeOf(ino), c.after);
    // The kernel is told to drop its cached mode exactly when the mode changed.
    EXPECT_EQ(std::count(told.begin(), told.end(), ino), c.before != c.after ? 1 : 0);
    ASSERT_TRUE(WriteByte(nobody_.caller(), ino));  // nothing left to clear: no second notice
    EXPECT_EQ(std::count(told.begin(), told.end(), ino), c.before != c.after ? 1 : 0);
  }
}

TEST_F(SetIdTest, WritesByAPrivilegedCallerOrTheDaemonKeepTheBits) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for a caller with CAP_FSETID";
  uint64_t by_root = Make("root", 06777);
  ASSERT_TRUE(WriteByte(Root(), by_root));
  EXPECT_EQ(ModeOf(by_root), 06777u);
  uint64_t by_daemon = Make("daemon", 04755);
  ASSERT_TRUE(WriteByte(Caller{}, by_daemon));
  EXPECT_EQ(ModeOf(by_daemon), 04755u);
}

TEST_F(SetIdTest, ATruncateByAnUnprivilegedUserClearsTheBitsAndOneByRootDoesNot) {
  uint64_t ino = Make("t", 06777);
  meta::AttrChange truncate;
  truncate.size = 0;
  truncate.now = meta::Time::Now();
  if (geteuid() == 0) {
    ASSERT_TRUE(rig_.fs()->SetAttr(Root(), ino, truncate).ok());
    EXPECT_EQ(ModeOf(ino), 06777u);
  }
  auto truncated = rig_.fs()->SetAttr(nobody_.caller(), ino, truncate);
  ASSERT_TRUE(truncated.ok());
  EXPECT_EQ(truncated->mode & 07777, 0777u);  // the reply carries the new mode
  EXPECT_EQ(ModeOf(ino), 0777u);

  // open(O_TRUNC) is a truncate too.
  uint64_t opened = Make("o", 04777);
  ASSERT_TRUE(WriteByte(Caller{}, opened));  // something to truncate
  ASSERT_TRUE(rig_.fs()->Open(nobody_.caller(), opened, O_WRONLY | O_TRUNC).ok());
  EXPECT_EQ(ModeOf(opened), 0777u);
}

TEST_F(SetIdTest, AChangeOfOwnerClearsSetUidWhoeverAsks) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to change an owner";
  meta::AttrChange chown;
  chown.uid = 1000;
  chown.now = meta::Time::Now();
  uint64_t suid = Make("u", 06775);
  ASSERT_TRUE(rig_.fs()->SetAttr(Root(), suid, chown).ok());
  EXPECT_EQ(ModeOf(suid), 0775u);  // as on ext4: root's chown clears them too
  // Without group execute, set-group-ID stays for a caller with CAP_FSETID.
  uint64_t locking = Make("l", 02764);
  ASSERT_TRUE(rig_.fs()->SetAttr(Root(), locking, chown).ok());
  EXPECT_EQ(ModeOf(locking), 02764u);
}

}  // namespace
}  // namespace tipfs::testing
