// RadosCluster and RadosNamespace: tipfs's handles on a Ceph cluster (librados' C API).
//
// A RadosCluster is one connected rados_t: a client of the cluster that a conf file, a client id
// and a keyring name (RadosLocation::ConnectionKey). Disks of a volume that share those share one
// RadosCluster through a RadosConnections registry, so four namespaces of one pool make one
// client, not four. A RadosNamespace is one pool and namespace (an ioctx) of a cluster, with the
// few synchronous calls labels, mkfs and fsck need.
//
// Every operation is bounded: rados_osd_op_timeout and rados_mon_op_timeout are set to the
// client's op_timeout (unless the conf file sets them), and connecting waits at most as long, so
// a cluster that is down or unreachable fails a call with EIO ("no answer from the cluster
// within 30 s") instead of hanging it.
//
// Thread-safety: all methods may be called from any thread (librados' handles are thread-safe);
// a RadosConnections registry is for one thread (it is used while a volume is opened).
#pragma once

#include <rados/librados.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "stripe/disk_name.h"
#include "util/status.h"

namespace tipfs::stripe {

// What the mount chooses about its RADOS client, as opposed to what the label names.
struct RadosClientOptions {
  // How long one operation waits for the cluster before it fails with EIO; also bounds the
  // connection to the monitors. A value the conf file sets (rados_osd_op_timeout) wins.
  int64_t op_timeout_ns = int64_t{30} * 1000 * 1000 * 1000;
};

// A Status for a failed librados call (`rc` negative errno): "what: strerror", with ETIMEDOUT
// (and the other ways librados says the cluster is gone) turned into EIO, which the file system
// already handles as a failing disk.
Status RadosStatus(const std::string& what, int rc, int64_t timeout_ns);

class RadosCluster {
 public:
  // Connects with the conf, id and keyring of `where`. Errors name the conf file.
  static Result<std::shared_ptr<RadosCluster>> Connect(const RadosLocation& where,
                                                       const RadosClientOptions& options);
  ~RadosCluster();
  RadosCluster(const RadosCluster&) = delete;
  RadosCluster& operator=(const RadosCluster&) = delete;

  rados_t handle() const { return cluster_; }
  const std::string& fsid() const { return fsid_; }
  // The timeout in force (ours, or the conf file's).
  int64_t op_timeout_ns() const { return op_timeout_ns_; }
  // "client.admin of cluster 1b2c... (conf /etc/ceph/ceph.conf)"
  const std::string& description() const { return description_; }

 private:
  RadosCluster() = default;

  rados_t cluster_ = nullptr;
  std::string fsid_;
  int64_t op_timeout_ns_ = 0;
  std::string description_;
};

class RadosNamespace {
 public:
  // Opens pool/namespace of `name` (which must be a RADOS name) on `cluster`. A missing pool is
  // ENOENT with the command that makes it.
  static Result<std::unique_ptr<RadosNamespace>> Open(std::shared_ptr<RadosCluster> cluster,
                                                      const DiskName& name);
  ~RadosNamespace();
  RadosNamespace(const RadosNamespace&) = delete;
  RadosNamespace& operator=(const RadosNamespace&) = delete;

  rados_ioctx_t ioctx() const { return ioctx_; }
  RadosCluster* cluster() const { return cluster_.get(); }
  const std::shared_ptr<RadosCluster>& shared_cluster() const { return cluster_; }
  int64_t pool_id() const { return pool_id_; }
  const std::string& pool() const { return pool_; }
  // "rados:POOL/NAMESPACE" (without the connection parameters), for messages.
  const std::string& display() const { return display_; }
  // RadosStatus with this namespace's timeout.
  Status Error(const std::string& what, int rc) const;

  // The whole object, at most max_bytes (EFBIG beyond); NotFound when it does not exist.
  Result<std::string> ReadSmallObject(const std::string& oid, size_t max_bytes) const;
  // Replaces the object's data atomically (RADOS applies one write_full as a whole).
  Status WriteFullObject(const std::string& oid, const std::string& data) const;
  // OK when it does not exist.
  Status RemoveObject(const std::string& oid) const;
  // Every object name in this namespace (only this namespace, not the pool's others).
  Status ListObjectNames(std::vector<std::string>* out) const;

 private:
  RadosNamespace() = default;

  std::shared_ptr<RadosCluster> cluster_;
  rados_ioctx_t ioctx_ = nullptr;
  int64_t pool_id_ = -1;
  std::string pool_;
  std::string display_;
};

// The clusters one volume (or one mkfs) talks to, keyed by conf, id and keyring.
class RadosConnections {
 public:
  explicit RadosConnections(RadosClientOptions options = {}) : options_(options) {}

  const RadosClientOptions& options() const { return options_; }
  Result<std::shared_ptr<RadosCluster>> Get(const RadosLocation& where);
  // Get(name.rados), then RadosNamespace::Open.
  Result<std::unique_ptr<RadosNamespace>> OpenNamespace(const DiskName& name);

 private:
  RadosClientOptions options_;
  std::map<std::string, std::shared_ptr<RadosCluster>> clusters_;
};

}  // namespace tipfs::stripe
