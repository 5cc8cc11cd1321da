// DiskName: how a volume names one of its disks, on the command line and in its labels.
//
//   /srv/d0                                          a local directory (PosixDisk)
//   rados:POOL[/NAMESPACE][?conf=PATH&id=CLIENT&keyring=PATH]
//                                                    a pool, or a namespace in one, of a Ceph
//                                                    cluster (RadosDisk)
//
// conf is the cluster's ceph.conf (default: librados' search, $CEPH_CONF or
// /etc/ceph/ceph.conf), id the client name without "client." (default admin), keyring the cephx
// keyring when the cluster's auth is on (default: what the conf file says). Pure parsing, no I/O;
// thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace tipfs::stripe {

struct RadosLocation {
  std::string pool;
  std::string nspace;     // empty: the pool's default namespace
  std::string conf;       // empty: librados' default search
  std::string client_id;  // empty: "admin"
  std::string keyring;    // empty: from the conf file

  // The connection a disk needs: disks with equal keys share one cluster handle.
  std::string ConnectionKey() const { return conf + "\n" + client_id + "\n" + keyring; }
};

struct DiskName {
  enum class Kind : uint8_t { kDirectory, kRados };

  Kind kind = Kind::kDirectory;
  std::string path;     // kDirectory
  RadosLocation rados;  // kRados

  bool is_rados() const { return kind == Kind::kRados; }
  // The canonical text: the path, or "rados:POOL/NS?conf=...&id=...&keyring=..." with only the
  // parameters that were given, in that order.
  std::string ToString() const;
};

constexpr std::string_view kRadosScheme = "rados:";

inline bool IsRadosName(std::string_view text) { return text.substr(0, 6) == kRadosScheme; }

// Parses a disk name. Anything that does not start with "rados:" is a directory path (checked
// when it is opened). A malformed RADOS name is EINVAL naming the problem.
Result<DiskName> ParseDiskName(const std::string& text);

}  // namespace tipfs::stripe
