// Disk names; see disk_name.h for the syntax.
#include "stripe/disk_name.h"

#include <vector>

namespace tipfs::stripe {

namespace {

Status Malformed(const std::string& text, const std::string& why) {
  return Status::InvalidArgument("disk " + text + ": " + why +
                                 " (expected rados:POOL[/NAMESPACE][?conf=PATH&id=CLIENT])");
}

std::vector<std::string> Split(const std::string& s, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(separator, start);
    parts.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

}  // namespace

std::string DiskName::ToString() const {
  if (kind == Kind::kDirectory) return path;
  std::string s = std::string(kRadosScheme) + rados.pool;
  if (!rados.nspace.empty()) s += "/" + rados.nspace;
  std::string params;
  auto add = [&](const char* key, const std::string& value) {
    if (value.empty()) return;
    params += (params.empty() ? "?" : "&") + std::string(key) + "=" + value;
  };
  add("conf", rados.conf);
  add("id", rados.client_id);
  add("keyring", rados.keyring);
  return s + params;
}

Result<DiskName> ParseDiskName(const std::string& text) {
  DiskName name;
  if (!IsRadosName(text)) {
    if (text.empty()) return Status::InvalidArgument("empty disk name");
    name.path = text;
    return name;
  }
  name.kind = DiskName::Kind::kRados;
  std::string rest = text.substr(kRadosScheme.size());
  std::string query;
  if (const size_t q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest.resize(q);
    if (query.empty()) return Malformed(text, "nothing after '?'");
  }
  const size_t slash = rest.find('/');
  name.rados.pool = rest.substr(0, slash);
  if (name.rados.pool.empty()) return Malformed(text, "no pool name");
  if (slash != std::string::npos) {
    name.rados.nspace = rest.substr(slash + 1);
    if (name.rados.nspace.empty()) return Malformed(text, "empty namespace after '/'");
  }
  for (const std::string& c : {name.rados.pool, name.rados.nspace}) {
    if (c.find_first_of("&=") != std::string::npos) {
      return Malformed(text, "'&' and '=' belong in the parameters after '?'");
    }
  }
  if (query.empty()) return name;
  for (const std::string& param : Split(query, '&')) {
    const size_t eq = param.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == param.size()) {
      return Malformed(text, "parameter '" + param + "' is not KEY=VALUE");
    }
    const std::string key = param.substr(0, eq);
    std::string value = param.substr(eq + 1);
    std::string* slot = key == "conf"      ? &name.rados.conf
                        : key == "id"      ? &name.rados.client_id
                        : key == "keyring" ? &name.rados.keyring
                                           : nullptr;
    if (slot == nullptr) {
      return Malformed(text, "unknown parameter '" + key + "' (known: conf, id, keyring)");
    }
    if (!slot->empty()) return Malformed(text, "parameter '" + key + "' given twice");
    // Ceph prints client names as "client.NAME"; librados wants the NAME.
    if (key == "id" && value.rfind("client.", 0) == 0) value = value.substr(7);
    if (value.empty()) return Malformed(text, "empty client id");
    *slot = value;
  }
  return name;
}

}  // namespace tipfs::stripe
