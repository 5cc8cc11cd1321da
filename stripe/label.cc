// Label encoding and the label's home on each kind of disk.
//
// The label is a small text, one key=value per line, ending with a checksum line that covers
// every byte before it (FNV-1a 64, util/fnv1a.h), so a flipped byte or a truncated label reads
// as corruption:
//   # tipfs volume label: do not edit, the checksum covers every line above it
//   format_version=2
//   uuid=6f1c...
//   index=2
//   count=4
//   stripe_unit=65536
//   disk.0=/srv/d0   disk.1=rados:tipfs/ns1?conf=/etc/ceph/ceph.conf   ...
//   meta=/var/lib/tipfs/vol1            (version 2, when the metadata is not on disk 0)
//   rados_object_size=4194304           (version 2, when a disk is a RADOS pool)
//   checksum=fnv1a64:0123456789abcdef
#include "stripe/label.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <climits>
#include <cstdio>
#include <map>

#include "stripe/disk_name.h"
#include "stripe/layout.h"
#include "stripe/rados_cluster.h"
#include "util/durable_file.h"
#include "util/fnv1a.h"

namespace tipfs::stripe {

namespace {

constexpr char kHeader[] =
    "# tipfs volume label: do not edit, the checksum covers every line above it";
constexpr size_t kMaxLabelBytes = 64 * 1024;

bool ParseU32(const std::string& s, uint32_t* out) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

bool IsPowerOfTwoIn(uint64_t v, uint64_t lo, uint64_t hi) {
  return v >= lo && v <= hi && (v & (v - 1)) == 0;
}

// Reads a whole small file; NotFound when it does not exist.
Result<std::string> ReadSmallFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("read " + path);
  std::string text(kMaxLabelBytes + 1, '\0');
  size_t n = 0;
  while (n < text.size()) {
    const ssize_t r = ::read(fd, text.data() + n, text.size() - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      return ErrnoStatus("read " + path, err);
    }
    if (r == 0) break;
    n += static_cast<size_t>(r);
  }
  ::close(fd);
  if (n > kMaxLabelBytes) return Status::Corruption(path + " is corrupt (too large)");
  text.resize(n);
  return text;
}

Result<Label> ReadDirectoryLabel(const std::string& dir, const char* file) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return ErrnoStatus(dir + " is missing");
  if (!S_ISDIR(st.st_mode)) return Status::FromErrno(ENOTDIR, dir + " is not a directory");
  const std::string path = dir + "/" + file;
  Result<std::string> text = ReadSmallFile(path);
  if (!text.ok()) {
    if (text.error() == ENOENT) return Status::NotFound(dir + " has no tipfs label");
    return text.status();
  }
  return ParseLabel(path, *text);
}

}  // namespace

bool Label::has_rados_disks() const {
  for (const std::string& name : disk_names) {
    if (IsRadosName(name)) return true;
  }
  return false;
}

uint32_t RequiredFormatVersion(const Label& label) {
  return label.has_rados_disks() || !label.meta_dir.empty() ? 2 : 1;
}

std::string HomeDir(const Label& label) {
  return label.meta_dir.empty() ? label.disk_names.at(0) : label.meta_dir;
}

std::string MetaPath(const Label& label) { return HomeDir(label) + "/meta"; }

std::string SerializeLabel(const Label& label) {
  std::string s = std::string(kHeader) + "\n";
  s += "format_version=" + std::to_string(label.format_version) + "\n";
  s += "uuid=" + label.volume_uuid + "\n";
  s += "index=" + std::to_string(label.index) + "\n";
  s += "count=" + std::to_string(label.count) + "\n";
  s += "stripe_unit=" + std::to_string(label.stripe_unit) + "\n";
  for (size_t i = 0; i < label.disk_names.size(); ++i) {
    s += "disk." + std::to_string(i) + "=" + label.disk_names[i] + "\n";
  }
  if (label.format_version >= 2) {
    if (!label.meta_dir.empty()) s += "meta=" + label.meta_dir + "\n";
    if (label.has_rados_disks()) {
      s += "rados_object_size=" + std::to_string(label.rados_object_size) + "\n";
    }
  }
  char sum[40];
  std::snprintf(sum, sizeof(sum), "checksum=fnv1a64:%016" PRIx64 "\n", Fnv1a64(s));
  return s + sum;
}

Result<Label> ParseLabel(const std::string& where, const std::string& text) {
  auto corrupt = [&](const std::string& why) {
    return Status::Corruption(where + " is corrupt (" + why + ")");
  };
  const size_t sum_pos = text.rfind("checksum=fnv1a64:");
  if (sum_pos == std::string::npos || (sum_pos > 0 && text[sum_pos - 1] != '\n')) {
    return corrupt("no checksum line");
  }
  char expect[40];
  std::snprintf(expect, sizeof(expect), "checksum=fnv1a64:%016" PRIx64 "\n",
                Fnv1a64(std::string_view(text).substr(0, sum_pos)));
  if (text.compare(sum_pos, std::string::npos, expect) != 0) return corrupt("checksum mismatch");
  if (text.compare(0, sizeof(kHeader) - 1, kHeader) != 0) return corrupt("bad header line");

  std::map<std::string, std::string> kv;
  size_t pos = 0;
  while (pos < sum_pos) {
    const size_t nl = text.find('\n', pos);
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return corrupt("line without '='");
    if (!kv.emplace(line.substr(0, eq), line.substr(eq + 1)).second) {
      return corrupt("key " + line.substr(0, eq) + " twice");
    }
  }
  Label label;
  auto get_u32 = [&](const char* key, uint32_t* out) -> Status {
    auto it = kv.find(key);
    if (it == kv.end()) return corrupt(std::string("no ") + key);
    if (!ParseU32(it->second, out)) return corrupt(std::string("bad ") + key);
    return Status::OK();
  };
  TIPFS_RETURN_IF_ERROR(get_u32("format_version", &label.format_version));
  if (label.format_version < 1 || label.format_version > kFormatVersion) {
    return Status::FromErrno(
        EPROTONOSUPPORT, where + " has format version " + std::to_string(label.format_version) +
                             ", this tipfs reads versions 1 to " + std::to_string(kFormatVersion));
  }
  TIPFS_RETURN_IF_ERROR(get_u32("index", &label.index));
  TIPFS_RETURN_IF_ERROR(get_u32("count", &label.count));
  TIPFS_RETURN_IF_ERROR(get_u32("stripe_unit", &label.stripe_unit));
  auto uuid = kv.find("uuid");
  if (uuid == kv.end() || uuid->second.size() != 36) return corrupt("bad uuid");
  label.volume_uuid = uuid->second;
  if (label.count < 1 || label.count > Layout::kMaxDisks) return corrupt("bad count");
  if (label.index >= label.count) return corrupt("index outside count");
  if (!IsPowerOfTwoIn(label.stripe_unit, 4096, 64u << 20)) return corrupt("bad stripe_unit");
  const bool v2 = label.format_version >= 2;
  for (uint32_t i = 0; i < label.count; ++i) {
    auto it = kv.find("disk." + std::to_string(i));
    const bool directory = it != kv.end() && !it->second.empty() && it->second[0] == '/';
    const bool rados =
        it != kv.end() && v2 && IsRadosName(it->second) && ParseDiskName(it->second).ok();
    if (!directory && !rados) return corrupt("bad disk." + std::to_string(i));
    label.disk_names.push_back(it->second);
  }
  size_t known = 5 + label.count;
  if (auto meta = kv.find("meta"); v2 && meta != kv.end()) {
    if (meta->second.empty() || meta->second[0] != '/') return corrupt("bad meta");
    label.meta_dir = meta->second;
    ++known;
  }
  if (auto size = kv.find("rados_object_size"); v2 && size != kv.end()) {
    if (!ParseU32(size->second, &label.rados_object_size) ||
        !IsPowerOfTwoIn(label.rados_object_size, 4096, 128u << 20)) {
      return corrupt("bad rados_object_size");
    }
    ++known;
  } else if (label.has_rados_disks()) {
    return corrupt("no rados_object_size");
  }
  if (kv.size() != known) return corrupt("unknown keys");
  if (label.meta_dir.empty() && IsRadosName(label.disk_names[0])) {
    return corrupt("disk 0 is a RADOS pool but no meta directory is named");
  }
  return label;
}

namespace {

// The namespace of a RADOS disk, through `rados` or a connection of its own.
Result<std::unique_ptr<RadosNamespace>> OpenLabelNamespace(const std::string& disk_name,
                                                           RadosConnections* rados) {
  Result<DiskName> name = ParseDiskName(disk_name);
  if (!name.ok()) return name.status();
  RadosConnections temporary;  // the namespace keeps its cluster alive
  return (rados != nullptr ? rados : &temporary)->OpenNamespace(*name);
}

}  // namespace

Result<Label> ReadLabel(const std::string& disk_name, RadosConnections* rados) {
  if (!IsRadosName(disk_name)) return ReadDirectoryLabel(disk_name, kLabelName);
  Result<std::unique_ptr<RadosNamespace>> ns = OpenLabelNamespace(disk_name, rados);
  if (!ns.ok()) return ns.status();
  Result<std::string> text = (*ns)->ReadSmallObject(kLabelName, kMaxLabelBytes);
  if (!text.ok()) {
    if (text.error() == ENOENT) return Status::NotFound(disk_name + " has no tipfs label");
    return text.status();
  }
  return ParseLabel(disk_name + " object " + kLabelName, *text);
}

Status WriteLabel(const std::string& disk_name, const Label& label, RadosConnections* rados) {
  if (!IsRadosName(disk_name))
    return WriteFileDurably(disk_name + "/" + kLabelName, SerializeLabel(label));
  Result<std::unique_ptr<RadosNamespace>> ns = OpenLabelNamespace(disk_name, rados);
  if (!ns.ok()) return ns.status();
  return (*ns)->WriteFullObject(kLabelName, SerializeLabel(label));
}

Result<Label> ReadHomeLabel(const std::string& dir) {
  return ReadDirectoryLabel(dir, kHomeLabelName);
}

Status WriteHomeLabel(const std::string& dir, const Label& label) {
  return WriteFileDurably(dir + "/" + kHomeLabelName, SerializeLabel(label));
}

}  // namespace tipfs::stripe
