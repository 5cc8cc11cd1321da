// The Ceph cluster the RADOS tests use, found through the environment:
//   TIPFS_CEPH_CONF   its ceph.conf     (scripts/ceph-dev.sh start prints both; scripts/test.sh
//   TIPFS_CEPH_POOL   a pool to use      starts a cluster and exports them)
// Without them the tests skip with that reason, unless TIPFS_REQUIRE_CEPH=1 (scripts/test.sh
// sets it), when a missing cluster is a failure. Every test works in namespaces of its own
// ("t<pid>x<n>-<tag>"), which it empties when it ends, so tests may run side by side.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace tipfs::testing {

// "" when a cluster is configured; otherwise why the tests cannot run.
std::string CephUnavailableReason();
bool CephRequired();
std::string CephConf();
std::string CephPool();

// Skips the test (or fails it, when required) without a cluster.
#define TIPFS_REQUIRE_CEPH_OR_SKIP()                                    \
  do {                                                                  \
    const std::string _why = ::tipfs::testing::CephUnavailableReason(); \
    if (!_why.empty()) {                                                \
      if (::tipfs::testing::CephRequired()) FAIL() << _why;             \
      GTEST_SKIP() << _why;                                             \
    }                                                                   \
  } while (0)

// A namespace no other test (or run) uses.
std::string FreshNamespace(const std::string& tag);
// "rados:POOL/NAMESPACE?conf=CONF"
std::string RadosDiskName(const std::string& nspace);
// Removes every object of the namespace (OK when it holds none).
void EmptyNamespace(const std::string& nspace);
// The object names in the namespace, sorted.
std::vector<std::string> NamespaceObjects(const std::string& nspace);

// A one-node cluster of the test's own (scripts/ceph-dev.sh under TMPDIR), for tests that stop
// its OSD or need cephx: nothing they do can disturb the shared cluster other tests use.
// Stopped and removed when this goes.
class PrivateCephCluster {
 public:
  explicit PrivateCephCluster(bool cephx = false);
  ~PrivateCephCluster();
  PrivateCephCluster(const PrivateCephCluster&) = delete;
  PrivateCephCluster& operator=(const PrivateCephCluster&) = delete;

  // "" when it runs; otherwise the script's output.
  const std::string& failure() const { return failure_; }
  const std::string& dir() const { return dir_; }  // the cluster's directory
  std::string conf() const { return dir_ + "/ceph.conf"; }
  // ceph-dev.sh stop-osd / start-osd; "" or the script's output.
  std::string StopOsd();
  std::string StartOsd();

 private:
  std::string Script(const std::string& command);

  std::string root_;  // a temporary directory holding dir_
  std::string dir_;
  std::string failure_;
  bool started_ = false;
};

// In a test's SetUp: starts `cluster` (a std::unique_ptr<PrivateCephCluster>) and skips the test
// (or fails it, when required) if that is impossible here.
#define TIPFS_START_PRIVATE_CEPH_OR_SKIP(cluster, cephx)                                     \
  do {                                                                                       \
    cluster = std::make_unique<::tipfs::testing::PrivateCephCluster>(cephx);                 \
    if (!cluster->failure().empty()) {                                                       \
      if (::tipfs::testing::CephRequired()) FAIL() << "ceph-dev.sh: " << cluster->failure(); \
      GTEST_SKIP() << "no Ceph cluster of its own: " << cluster->failure();                  \
    }                                                                                        \
  } while (0)

// Makes tests/support/mount_fixture's volumes out of fresh namespaces (and a metadata directory
// under the volume's root), removed with the volume.
void InstallRadosDiskBackend();

}  // namespace tipfs::testing
