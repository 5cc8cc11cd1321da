// RadosCluster, RadosNamespace and RadosConnections; see rados_cluster.h.
#include "stripe/rados_cluster.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "stripe/rados_library.h"

namespace tipfs::stripe {

namespace {

std::string Seconds(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(ns) / 1e9);
  return buf;
}

// Parses a librados option holding seconds ("30", "2.5"); 0 when unset or unparsable.
int64_t OptionNanos(rados_t cluster, const char* option) {
  char buf[64] = {};
  if (rados_conf_get(cluster, option, buf, sizeof(buf)) != 0) return 0;
  return static_cast<int64_t>(std::strtod(buf, nullptr) * 1e9);
}

}  // namespace

Status RadosStatus(const std::string& what, int rc, int64_t timeout_ns) {
  const int err = rc < 0 ? -rc : rc;
  switch (err) {
    case ETIMEDOUT:
      return Status::IOError(what + ": no answer from the cluster within " + Seconds(timeout_ns) +
                             " s (rados_osd_op_timeout)");
    case ESHUTDOWN:  // blocklisted by the cluster (EBLOCKLISTED)
      return Status::IOError(what + ": this client was blocklisted by the cluster");
    case ENOTCONN:
    case ECONNREFUSED:
    case ECANCELED:
      return Status::IOError(what + ": " + std::strerror(err));
    default:
      return Status::FromErrno(err, what + ": " + std::strerror(err));
  }
}

Result<std::shared_ptr<RadosCluster>> RadosCluster::Connect(const RadosLocation& where,
                                                            const RadosClientOptions& options) {
  TIPFS_RETURN_IF_ERROR(LoadRadosLibrary());
  const std::string id = where.client_id.empty() ? "admin" : where.client_id;
  const std::string conf_text = where.conf.empty() ? "the default ceph.conf" : where.conf;
  auto cluster = std::shared_ptr<RadosCluster>(new RadosCluster());
  const std::string context = "ceph client." + id + " (conf " + conf_text + ")";
  int rc = rados_create2(&cluster->cluster_, "ceph", ("client." + id).c_str(), 0);
  if (rc < 0) return RadosStatus(context + ": create", rc, options.op_timeout_ns);
  rados_t c = cluster->cluster_;
  rc = rados_conf_read_file(c, where.conf.empty() ? nullptr : where.conf.c_str());
  if (rc < 0) {
    if (where.conf.empty() && rc == -ENOENT) {
      return Status::NotFound(context +
                              ": no ceph.conf found ($CEPH_CONF, /etc/ceph/ceph.conf); "
                              "name one with ?conf=PATH");
    }
    return RadosStatus(context + ": read conf", rc, options.op_timeout_ns);
  }
  rc = rados_conf_parse_env(c, nullptr);  // CEPH_ARGS, as every Ceph tool honours it
  if (rc < 0) return RadosStatus(context + ": CEPH_ARGS", rc, options.op_timeout_ns);
  if (!where.keyring.empty()) {
    rc = rados_conf_set(c, "keyring", where.keyring.c_str());
    if (rc < 0) return RadosStatus(context + ": keyring " + where.keyring, rc, 0);
  }
  // Errors reach the user as one tipfs line; librados' own log lines would only repeat them.
  (void)rados_conf_set(c, "log_to_stderr", "false");
  (void)rados_conf_set(c, "err_to_stderr", "false");
  // Ceph's default is to wait forever for a down OSD; tipfs fails the one request instead.
  int64_t timeout = OptionNanos(c, "rados_osd_op_timeout");
  if (timeout <= 0) {
    timeout = options.op_timeout_ns;
    (void)rados_conf_set(c, "rados_osd_op_timeout", Seconds(timeout).c_str());
  }
  if (OptionNanos(c, "rados_mon_op_timeout") <= 0) {
    (void)rados_conf_set(c, "rados_mon_op_timeout", Seconds(timeout).c_str());
  }
  (void)rados_conf_set(c, "client_mount_timeout", Seconds(timeout).c_str());
  cluster->op_timeout_ns_ = timeout;
  rc = rados_connect(c);
  if (rc == -EACCES || rc == -EPERM) {
    return Status::FromErrno(-rc, context + ": connect to the monitors: " + std::strerror(-rc) +
                                      " (cephx: no key for client." + id +
                                      " in its keyring? name it with &keyring=PATH)");
  }
  if (rc < 0) return RadosStatus(context + ": connect to the monitors", rc, timeout);
  char fsid[64] = {};
  rc = rados_cluster_fsid(c, fsid, sizeof(fsid));
  if (rc < 0) return RadosStatus(context + ": cluster fsid", rc, timeout);
  cluster->fsid_ = fsid;
  cluster->description_ =
      "client." + id + " of cluster " + cluster->fsid_ + " (conf " + conf_text + ")";
  return cluster;
}

RadosCluster::~RadosCluster() {
  if (cluster_ != nullptr) rados_shutdown(cluster_);
}

Result<std::unique_ptr<RadosNamespace>> RadosNamespace::Open(std::shared_ptr<RadosCluster> cluster,
                                                             const DiskName& name) {
  auto ns = std::unique_ptr<RadosNamespace>(new RadosNamespace());
  ns->cluster_ = std::move(cluster);
  const std::string& pool = name.rados.pool;
  ns->pool_ = pool;
  ns->display_ =
      std::string(kRadosScheme) + pool + (name.rados.nspace.empty() ? "" : "/" + name.rados.nspace);
  int rc = rados_ioctx_create(ns->cluster_->handle(), pool.c_str(), &ns->ioctx_);
  if (rc == -ENOENT) {
    return Status::NotFound(ns->display_ + ": pool '" + pool +
                            "' does not exist (create it: " + "ceph osd pool create " + pool + ")");
  }
  if (rc < 0) return ns->Error(ns->display_ + ": open pool '" + pool + "'", rc);
  rados_ioctx_set_namespace(ns->ioctx_, name.rados.nspace.c_str());
  ns->pool_id_ = rados_ioctx_get_id(ns->ioctx_);
  return ns;
}

RadosNamespace::~RadosNamespace() {
  if (ioctx_ != nullptr) rados_ioctx_destroy(ioctx_);
}

Status RadosNamespace::Error(const std::string& what, int rc) const {
  return RadosStatus(what, rc, cluster_->op_timeout_ns());
}

Result<std::string> RadosNamespace::ReadSmallObject(const std::string& oid,
                                                    size_t max_bytes) const {
  std::string data(max_bytes + 1, '\0');
  const int rc = rados_read(ioctx_, oid.c_str(), data.data(), data.size(), 0);
  if (rc == -ENOENT) return Status::NotFound(display_ + ": no object " + oid);
  if (rc < 0) return Error(display_ + ": read " + oid, rc);
  if (static_cast<size_t>(rc) > max_bytes) {
    return Status::FromErrno(EFBIG, display_ + ": object " + oid + " is larger than " +
                                        std::to_string(max_bytes) + " bytes");
  }
  data.resize(static_cast<size_t>(rc));
  return data;
}

Status RadosNamespace::WriteFullObject(const std::string& oid, const std::string& data) const {
  const int rc = rados_write_full(ioctx_, oid.c_str(), data.data(), data.size());
  return rc < 0 ? Error(display_ + ": write " + oid, rc) : Status::OK();
}

Status RadosNamespace::RemoveObject(const std::string& oid) const {
  const int rc = rados_remove(ioctx_, oid.c_str());
  return rc < 0 && rc != -ENOENT ? Error(display_ + ": remove " + oid, rc) : Status::OK();
}

Status RadosNamespace::ListObjectNames(std::vector<std::string>* out) const {
  rados_list_ctx_t list = nullptr;
  int rc = rados_nobjects_list_open(ioctx_, &list);
  if (rc < 0) return Error(display_ + ": list objects", rc);
  while (true) {
    const char* entry = nullptr;
    size_t entry_size = 0;
    rc = rados_nobjects_list_next2(list, &entry, nullptr, nullptr, &entry_size, nullptr, nullptr);
    if (rc == -ENOENT) break;
    if (rc < 0) {
      rados_nobjects_list_close(list);
      return Error(display_ + ": list objects", rc);
    }
    out->emplace_back(entry, entry_size);
  }
  rados_nobjects_list_close(list);
  return Status::OK();
}

Result<std::shared_ptr<RadosCluster>> RadosConnections::Get(const RadosLocation& where) {
  const std::string key = where.ConnectionKey();
  auto it = clusters_.find(key);
  if (it != clusters_.end()) return it->second;
  Result<std::shared_ptr<RadosCluster>> cluster = RadosCluster::Connect(where, options_);
  if (!cluster.ok()) return cluster.status();
  clusters_.emplace(key, *cluster);
  return cluster;
}

Result<std::unique_ptr<RadosNamespace>> RadosConnections::OpenNamespace(const DiskName& name) {
  Result<std::shared_ptr<RadosCluster>> cluster = Get(name.rados);
  if (!cluster.ok()) return cluster.status().WithContext(name.ToString());
  return RadosNamespace::Open(*cluster, name);
}

}  // namespace tipfs::stripe
