// A cluster with cephx on, as real clusters run (label rados): the test starts one of its own
// (CEPH_DEV_AUTH=cephx scripts/ceph-dev.sh) and uses the client "tipfs" the script makes with
// only the caps tipfs(8) documents (mon 'allow r', osd 'allow rwx pool=tipfs'), named by
// ?id=tipfs&keyring=PATH. mkfs, mount, I/O, fsck and a remount work; a client without its key, or
// with read-only caps, is refused with one line that says why.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/rados/rados_test_env.h"
#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

class RadosCephxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason = FuseUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
    TIPFS_START_PRIVATE_CEPH_OR_SKIP(cluster_, true);
    conf_ = cluster_->conf();
    keyring_ = cluster_->dir() + "/client.tipfs.keyring";
  }

  void TearDown() override {
    mount_.reset();
    SetDiskBackend({});
    cluster_.reset();
  }

  std::string Disk(const std::string& nspace, const std::string& client) const {
    return "rados:tipfs/" + nspace + "?conf=" + conf_ + "&id=" + client;
  }
  std::string Tipfs(const std::string& args, int* status) {
    std::string out;
    *status = RunCommand(TipfsBinary() + " " + args, &out);
    return out;
  }

  std::unique_ptr<PrivateCephCluster> cluster_;
  std::string conf_, keyring_;
  std::unique_ptr<TipfsMount> mount_;
};

TEST_F(RadosCephxTest, ClientWithTheDocumentedCapsRunsAVolume) {
  DiskBackend backend;
  backend.make = [this](const std::string& root, int disks) {
    std::filesystem::create_directories(root + "/meta");
    std::vector<std::string> names;
    for (int i = 0; i < disks; ++i) {
      names.push_back(Disk("cx" + std::to_string(i), "tipfs") + "&keyring=" + keyring_);
    }
    return names;
  };
  backend.mkfs_args = "--meta {root}/meta";
  backend.mount_name = "{root}/meta";
  SetDiskBackend(backend);
  VolumeSpec spec;
  spec.disks = 2;
  mount_ = std::make_unique<TipfsMount>(spec);
  ASSERT_EQ(mount_->Create(), "");
  ASSERT_EQ(mount_->Mount(), "");
  const std::string data = PatternBytes(5 << 20, 7);
  ASSERT_TRUE(WriteFileBytes(mount_->Path("f"), data));
  ASSERT_EQ(mount_->Unmount(), "");
  int status = 0;
  const std::string fsck = Tipfs("fsck " + ShellQuote(mount_->volume_name()), &status);
  EXPECT_EQ(status, 0) << fsck;
  ASSERT_EQ(mount_->Mount(), "");
  EXPECT_EQ(ReadFileOrDie(mount_->Path("f")), data);
}

TEST_F(RadosCephxTest, ClientsWithoutTheirKeyOrWithReadOnlyCapsAreRefused) {
  const std::string meta = cluster_->dir() + "/../meta";
  std::filesystem::create_directories(meta);
  int status = 0;
  // client.tipfs without ?keyring=: the conf file's keyring has no key for it.
  std::string out = Tipfs("mkfs --meta " + meta + " " + ShellQuote(Disk("n0", "tipfs")), &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("ceph client.tipfs (conf " + conf_ +
                     "): connect to the monitors: Permission denied (cephx: no key for "
                     "client.tipfs in its keyring? name it with &keyring=PATH)"),
            std::string::npos)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  // A client that may only read the pool cannot write the label.
  const std::string reader_keyring = cluster_->dir() + "/client.reader.keyring";
  ASSERT_EQ(RunCommand("ceph -c " + conf_ + " auth get-or-create client.reader mon 'allow r' " +
                       "osd 'allow r pool=tipfs' -o " + reader_keyring),
            0);
  out = Tipfs(
      "mkfs --meta " + meta + " " + ShellQuote(Disk("n0", "reader") + "&keyring=" + reader_keyring),
      &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("write tipfs-label: Operation not permitted"), std::string::npos) << out;
}

}  // namespace
}  // namespace tipfs::testing
