// The Ceph cluster the RADOS tests use, found through the environment:
//   TIPFS_CEPH_CONF   its ceph.conf     (scripts/ceph-dev.sh start prints both; scripts/test.sh
//   TIPFS_CEPH_POOL   a pool to use      starts a cluster and exports them)
// Without them the tests skip with that reason, unless TIPFS_REQUIRE_CEPH=1 (scripts/test.sh
// sets it), when a missing cluster is a failure. Every test works in namespaces of its own
// ("t<pid>x<n>-<tag>"), which it empties when it ends, so tests may run side by side.
#pragma once

#include <gtest/gtest.h>

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

// Makes tests/support/mount_fixture's volumes out of fresh namespaces (and a metadata directory
// under the volume's root), removed with the volume.
void InstallRadosDiskBackend();

}  // namespace tipfs::testing
