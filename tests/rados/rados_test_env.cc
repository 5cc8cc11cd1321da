#include "tests/rados/rados_test_env.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "stripe/disk_name.h"
#include "stripe/rados_cluster.h"

namespace tipfs::testing {

namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

std::unique_ptr<stripe::RadosNamespace> OpenNamespace(const std::string& nspace) {
  stripe::RadosConnections connections;
  Result<stripe::DiskName> name = stripe::ParseDiskName(RadosDiskName(nspace));
  if (!name.ok()) return nullptr;
  Result<std::unique_ptr<stripe::RadosNamespace>> ns = connections.OpenNamespace(*name);
  if (!ns.ok()) {
    ADD_FAILURE() << ns.status().ToString();
    return nullptr;
  }
  return std::move(*ns);
}

}  // namespace

std::string CephConf() { return Env("TIPFS_CEPH_CONF"); }
std::string CephPool() { return Env("TIPFS_CEPH_POOL").empty() ? "tipfs" : Env("TIPFS_CEPH_POOL"); }
bool CephRequired() { return Env("TIPFS_REQUIRE_CEPH") == "1"; }

std::string CephUnavailableReason() {
  if (CephConf().empty()) {
    return "no Ceph cluster: start one with `eval \"$(scripts/ceph-dev.sh start DIR)\"` (which "
           "sets TIPFS_CEPH_CONF and TIPFS_CEPH_POOL), or run scripts/test.sh";
  }
  if (access(CephConf().c_str(), R_OK) != 0) {
    return "TIPFS_CEPH_CONF=" + CephConf() + " is not readable";
  }
  return "";
}

std::string FreshNamespace(const std::string& tag) {
  static std::atomic<int> counter{0};
  return "t" + std::to_string(getpid()) + "x" + std::to_string(counter++) + "-" + tag;
}

std::string RadosDiskName(const std::string& nspace) {
  return "rados:" + CephPool() + "/" + nspace + "?conf=" + CephConf();
}

std::vector<std::string> NamespaceObjects(const std::string& nspace) {
  std::vector<std::string> names;
  std::unique_ptr<stripe::RadosNamespace> ns = OpenNamespace(nspace);
  if (ns == nullptr) return names;
  Status listed = ns->ListObjectNames(&names);
  EXPECT_TRUE(listed.ok()) << listed.ToString();
  std::sort(names.begin(), names.end());
  return names;
}

void EmptyNamespace(const std::string& nspace) {
  std::unique_ptr<stripe::RadosNamespace> ns = OpenNamespace(nspace);
  if (ns == nullptr) return;
  std::vector<std::string> names;
  if (!ns->ListObjectNames(&names).ok()) return;
  for (const std::string& name : names) {
    Status removed = ns->RemoveObject(name);
    EXPECT_TRUE(removed.ok()) << removed.ToString();
  }
}

PrivateCephCluster::PrivateCephCluster(bool cephx) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/tipfs-ceph-XXXXXX";
  root_ = mkdtemp(pattern.data());
  dir_ = root_ + "/c";
  failure_ = Script(std::string(cephx ? "CEPH_DEV_AUTH=cephx " : "") + "start");
  started_ = failure_.empty();
}

PrivateCephCluster::~PrivateCephCluster() {
  if (started_) (void)Script("stop");
  std::error_code ignored;
  std::filesystem::remove_all(root_, ignored);
}

std::string PrivateCephCluster::StopOsd() { return Script("stop-osd"); }
std::string PrivateCephCluster::StartOsd() { return Script("start-osd"); }

std::string PrivateCephCluster::Script(const std::string& command) {
  // "CEPH_DEV_AUTH=cephx start" -> "CEPH_DEV_AUTH=cephx SCRIPT start DIR"
  const size_t space = command.rfind(' ');
  const std::string env = space == std::string::npos ? "" : command.substr(0, space + 1);
  const std::string verb = space == std::string::npos ? command : command.substr(space + 1);
  const std::string line =
      env + std::string(TIPFS_SOURCE_DIR) + "/scripts/ceph-dev.sh " + verb + " " + dir_ + " 2>&1";
  std::string out;
  FILE* pipe = popen(line.c_str(), "r");
  if (pipe == nullptr) return "cannot run " + line;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  const int status = pclose(pipe);
  return status == 0 ? "" : (out.empty() ? line + " failed" : out);
}

}  // namespace tipfs::testing
