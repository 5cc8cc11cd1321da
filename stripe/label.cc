// Labels, mkfs and Volume::Open: everything that validates a volume's backing directories.
//
// The label is a small text file, one key=value per line, ending with a checksum line that covers
// every byte before it (FNV-1a 64, Fowler/Noll/Vo: offset basis 14695981039346656037, prime
// 1099511628211), so a flipped byte or a truncated file reads as corruption:
//   # tipfs volume label: do not edit, the checksum covers every line above it
//   format_version=1
//   uuid=6f1c...
//   index=2
//   count=4
//   stripe_unit=65536
//   disk.0=/srv/d0   ... disk.3=/srv/d3
//   checksum=fnv1a64:0123456789abcdef
// It is replaced atomically (write tipfs-label.tmp, fsync, rename, fsync the directory).
//
// Errors (one line, naming the path): ENOENT missing directory or label, ENOTDIR not a
// directory, EUCLEAN corrupt label, EPROTONOSUPPORT unknown format version, EINVAL a disk of
// another volume / wrong index / disagreeing labels / bad options, EEXIST a directory that already
// holds a volume, ENOTEMPTY a directory holding other files, EACCES not writable.
//
// mkfs --force erases tipfs's own entries (tipfs-label, tipfs-label.tmp, objects/, meta/) of a
// directory that carries a tipfs label and leaves every other file alone; objects/ or meta/ in a
// directory without a tipfs label are not tipfs's and make mkfs refuse even with --force. An
// otherwise empty directory may hold lost+found (the root of a freshly made file system).
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "stripe/io_ring.h"
#include "stripe/posix_disk.h"
#include "stripe/volume.h"
#include "util/durable_file.h"

namespace tipfs::stripe {

namespace {

constexpr char kLabelFile[] = "tipfs-label";
constexpr char kLabelTmp[] = "tipfs-label.tmp";
constexpr char kHeader[] =
    "# tipfs volume label: do not edit, the checksum covers every line above it";
constexpr uint32_t kMinStripeUnit = 4096;
constexpr uint32_t kMaxStripeUnit = 64u << 20;
constexpr size_t kMaxLabelBytes = 64 * 1024;

uint64_t Fnv1a64(const char* data, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

std::string LabelPath(const std::string& disk) { return disk + "/" + kLabelFile; }

Status CheckStripeUnit(uint64_t unit) {
  if (unit < kMinStripeUnit || unit > kMaxStripeUnit || (unit & (unit - 1)) != 0) {
    return Status::InvalidArgument("stripe unit " + std::to_string(unit) +
                                   " must be a power of two from 4 KiB to 64 MiB");
  }
  return Status::OK();
}

std::string Serialize(const Label& label) {
  std::string s = std::string(kHeader) + "\n";
  s += "format_version=" + std::to_string(label.format_version) + "\n";
  s += "uuid=" + label.volume_uuid + "\n";
  s += "index=" + std::to_string(label.index) + "\n";
  s += "count=" + std::to_string(label.count) + "\n";
  s += "stripe_unit=" + std::to_string(label.stripe_unit) + "\n";
  for (size_t i = 0; i < label.disk_paths.size(); ++i) {
    s += "disk." + std::to_string(i) + "=" + label.disk_paths[i] + "\n";
  }
  char sum[40];
  std::snprintf(sum, sizeof(sum), "checksum=fnv1a64:%016" PRIx64 "\n", Fnv1a64(s.data(), s.size()));
  return s + sum;
}

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

Result<Label> Parse(const std::string& path, const std::string& text) {
  auto corrupt = [&](const std::string& why) {
    return Status::Corruption(path + " is corrupt (" + why + ")");
  };
  const size_t sum_pos = text.rfind("checksum=fnv1a64:");
  if (sum_pos == std::string::npos || (sum_pos > 0 && text[sum_pos - 1] != '\n')) {
    return corrupt("no checksum line");
  }
  const std::string sum_line = text.substr(sum_pos);
  char expect[40];
  std::snprintf(expect, sizeof(expect), "checksum=fnv1a64:%016" PRIx64 "\n",
                Fnv1a64(text.data(), sum_pos));
  if (sum_line != expect) return corrupt("checksum mismatch");
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
  if (label.format_version != kFormatVersion) {
    return Status::FromErrno(EPROTONOSUPPORT,
                             path + " has format version " + std::to_string(label.format_version) +
                                 ", this tipfs reads version " + std::to_string(kFormatVersion));
  }
  TIPFS_RETURN_IF_ERROR(get_u32("index", &label.index));
  TIPFS_RETURN_IF_ERROR(get_u32("count", &label.count));
  TIPFS_RETURN_IF_ERROR(get_u32("stripe_unit", &label.stripe_unit));
  auto uuid = kv.find("uuid");
  if (uuid == kv.end() || uuid->second.size() != 36) return corrupt("bad uuid");
  label.volume_uuid = uuid->second;
  if (label.count < 1 || label.count > Layout::kMaxDisks) return corrupt("bad count");
  if (label.index >= label.count) return corrupt("index outside count");
  if (!CheckStripeUnit(label.stripe_unit).ok()) return corrupt("bad stripe_unit");
  for (uint32_t i = 0; i < label.count; ++i) {
    auto it = kv.find("disk." + std::to_string(i));
    if (it == kv.end() || it->second.empty() || it->second[0] != '/') {
      return corrupt("bad disk." + std::to_string(i));
    }
    label.disk_paths.push_back(it->second);
  }
  if (kv.size() != 5 + label.count) return corrupt("unknown keys");
  return label;
}

Result<std::string> NewUuid() {
  std::FILE* f = std::fopen("/proc/sys/kernel/random/uuid", "re");
  if (f != nullptr) {
    char buf[64] = {};
    const bool ok = std::fgets(buf, sizeof(buf), f) != nullptr;
    std::fclose(f);
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    if (ok && s.size() == 36) return s;
  }
  unsigned char b[16];
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open /dev/urandom");
  const bool ok = ::read(fd, b, sizeof(b)) == static_cast<ssize_t>(sizeof(b));
  ::close(fd);
  if (!ok) return Status::IOError("read /dev/urandom: short read");
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // RFC 4122 version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  char s[40];
  std::snprintf(s, sizeof(s),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return std::string(s);
}

// What a candidate disk directory holds, from the point of view of mkfs.
struct DirScan {
  std::string path;  // absolute, symlinks resolved
  bool has_label = false;
  bool has_label_tmp = false;              // a label write that never completed
  std::vector<std::string> tipfs_entries;  // objects, meta, tipfs-label.tmp
  std::vector<std::string> other_entries;
};

Result<DirScan> ScanDisk(const std::string& given) {
  struct stat st;
  if (::stat(given.c_str(), &st) != 0) return ErrnoStatus("mkfs: disk " + given);
  if (!S_ISDIR(st.st_mode)) {
    return Status::FromErrno(ENOTDIR, "mkfs: disk " + given + " is not a directory");
  }
  char resolved[PATH_MAX];
  if (::realpath(given.c_str(), resolved) == nullptr) return ErrnoStatus("mkfs: realpath " + given);
  DirScan scan;
  scan.path = resolved;
  if (::access(scan.path.c_str(), W_OK | X_OK) != 0) {
    return ErrnoStatus("mkfs: disk " + scan.path + " is not writable");
  }
  DIR* dir = ::opendir(scan.path.c_str());
  if (dir == nullptr) return ErrnoStatus("mkfs: list " + scan.path);
  while (dirent* d = ::readdir(dir)) {
    const std::string name = d->d_name;
    if (name == "." || name == ".." || name == "lost+found") continue;
    if (name == kLabelFile) {
      scan.has_label = true;
    } else if (name == kLabelTmp) {
      scan.has_label_tmp = true;
    } else if (name == "objects" || name == "meta") {
      scan.tipfs_entries.push_back(name);
    } else {
      scan.other_entries.push_back(name);
    }
  }
  ::closedir(dir);
  return scan;
}

Status EraseTipfsEntries(const DirScan& scan) {
  std::error_code ec;
  for (const char* name : {"objects", "meta", kLabelTmp, kLabelFile}) {
    const std::filesystem::path p = std::filesystem::path(scan.path) / name;
    std::filesystem::remove_all(p, ec);
    if (ec) return Status::FromErrno(ec.value(), "mkfs: erase " + p.string() + ": " + ec.message());
  }
  return Status::OK();
}

// Cached object descriptors per disk. The soft RLIMIT_NOFILE is often 1024 while the hard one is
// far higher, so it is raised (up to the hard limit) to fit the default cache on every disk; the
// cache is then sized to use at most half of the limit, leaving the rest to the process.
size_t FdBudgetPerDisk(uint32_t disk_count) {
  const uint64_t want_total = uint64_t{disk_count} * PosixDisk::kDefaultMaxOpenFiles * 2 + 256;
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 64;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want_total) {
    struct rlimit raised = rl;
    raised.rlim_cur =
        rl.rlim_max == RLIM_INFINITY ? want_total : std::min<rlim_t>(rl.rlim_max, want_total);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  if (rl.rlim_cur == RLIM_INFINITY) return PosixDisk::kDefaultMaxOpenFiles;
  const uint64_t per_disk = rl.rlim_cur / 2 / disk_count;
  return static_cast<size_t>(std::clamp<uint64_t>(per_disk, 16, PosixDisk::kDefaultMaxOpenFiles));
}

}  // namespace

Result<Label> ReadLabel(const std::string& disk_path) {
  struct stat st;
  if (::stat(disk_path.c_str(), &st) != 0) {
    return ErrnoStatus(disk_path + " is missing");
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::FromErrno(ENOTDIR, disk_path + " is not a directory");
  }
  const std::string path = LabelPath(disk_path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(disk_path + " has no tipfs label");
    return ErrnoStatus("read " + path);
  }
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
  return Parse(path, text);
}

Status WriteLabel(const std::string& disk_path, const Label& label) {
  return WriteFileDurably(LabelPath(disk_path), Serialize(label));
}

std::string MetaPath(const Label& label) { return label.disk_paths.at(0) + "/meta"; }

Result<Label> Mkfs(const MkfsOptions& options) {
  const size_t n = options.disks.size();
  if (n < 1 || n > Layout::kMaxDisks) {
    return Status::InvalidArgument("mkfs: need 1 to 64 disks, got " + std::to_string(n));
  }
  Status unit_ok = CheckStripeUnit(options.stripe_unit);
  if (!unit_ok.ok()) return unit_ok.WithContext("mkfs");

  // Validate every disk before touching any of them.
  std::vector<DirScan> scans;
  std::map<std::pair<dev_t, ino_t>, std::string> seen;
  for (const std::string& given : options.disks) {
    Result<DirScan> scan = ScanDisk(given);
    if (!scan.ok()) return scan.status();
    struct stat st;
    if (::stat(scan->path.c_str(), &st) != 0) return ErrnoStatus("mkfs: disk " + scan->path);
    auto [it, inserted] = seen.emplace(std::make_pair(st.st_dev, st.st_ino), given);
    if (!inserted) {
      return Status::InvalidArgument("mkfs: " + given + " and " + it->second +
                                     " are the same directory");
    }
    if (scan->has_label && !options.force) {
      Result<Label> old = ReadLabel(scan->path);
      std::string what = old.ok() ? " (volume " + old->volume_uuid + ", disk " +
                                        std::to_string(old->index) + " of " +
                                        std::to_string(old->count) + ")"
                                  : "";
      return Status::Exists("mkfs: " + scan->path + " already holds a tipfs volume" + what +
                            "; use --force to erase it");
    }
    if (!scan->has_label && !scan->tipfs_entries.empty()) {
      return Status::FromErrno(ENOTEMPTY, "mkfs: " + scan->path + " holds '" +
                                              scan->tipfs_entries[0] +
                                              "' but no tipfs label; refusing to touch it" +
                                              (options.force ? " even with --force" : ""));
    }
    if (scan->has_label_tmp && !scan->has_label && !options.force) {
      return Status::FromErrno(ENOTEMPTY, "mkfs: " + scan->path + " holds an unfinished " +
                                              kLabelTmp + "; use --force to replace it");
    }
    if (!scan->other_entries.empty() && !options.force) {
      return Status::FromErrno(ENOTEMPTY, "mkfs: " + scan->path + " is not empty (holds '" +
                                              scan->other_entries[0] +
                                              "'); use an empty directory or --force");
    }
    scans.push_back(std::move(*scan));
  }

  Result<std::string> uuid = NewUuid();
  if (!uuid.ok()) return uuid.status().WithContext("mkfs");
  Label label;
  label.volume_uuid = *uuid;
  label.count = static_cast<uint32_t>(n);
  label.stripe_unit = options.stripe_unit;
  label.format_version = kFormatVersion;
  for (const DirScan& s : scans) label.disk_paths.push_back(s.path);

  for (uint32_t i = 0; i < n; ++i) {
    const DirScan& scan = scans[i];
    if (scan.has_label || scan.has_label_tmp) TIPFS_RETURN_IF_ERROR(EraseTipfsEntries(scan));
    Label mine = label;
    mine.index = i;
    // The label goes first: a crash before objects/ exists leaves a labelled directory that
    // mkfs --force may erase, never an unlabelled objects/ that it must refuse.
    Status s = WriteLabel(scan.path, mine);
    if (!s.ok()) return s.WithContext("mkfs: disk " + scan.path);
    const std::string objects = scan.path + "/objects";
    if (::mkdir(objects.c_str(), 0700) != 0) return ErrnoStatus("mkfs: mkdir " + objects);
    const int dfd = ::open(scan.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || ::fsync(dfd) != 0) {
      const int err = errno;
      if (dfd >= 0) ::close(dfd);
      return ErrnoStatus("mkfs: fsync " + scan.path, err);
    }
    ::close(dfd);
  }
  return label;
}

Result<std::unique_ptr<Volume>> Volume::Open(const std::string& any_disk, OpenOptions options) {
  Result<Label> first = ReadLabel(any_disk);
  if (!first.ok()) return first.status();
  const Label& given = *first;
  std::vector<std::string> paths = given.disk_paths;
  // The directory the caller named is disk `given.index`, even if the volume was moved since
  // mkfs recorded its path.
  char resolved[PATH_MAX];
  if (::realpath(any_disk.c_str(), resolved) != nullptr) paths[given.index] = resolved;

  Label disk0;
  for (uint32_t i = 0; i < given.count; ++i) {
    const std::string prefix = "disk " + std::to_string(i) + " " + paths[i];
    Result<Label> l = i == given.index ? first : ReadLabel(paths[i]);
    if (!l.ok()) {
      if (l.error() == ENOENT || l.error() == ENOTDIR) {
        return Status::FromErrno(l.error(),
                                 "disk " + std::to_string(i) + " " + l.status().message());
      }
      return l.status().WithContext("disk " + std::to_string(i));
    }
    if (l->volume_uuid != given.volume_uuid) {
      return Status::InvalidArgument(prefix + " belongs to another volume (uuid " + l->volume_uuid +
                                     ", expected " + given.volume_uuid + ")");
    }
    if (l->index != i) {
      return Status::InvalidArgument(prefix + " holds index " + std::to_string(l->index) +
                                     ", expected " + std::to_string(i) + " (disks reordered?)");
    }
    if (l->count != given.count || l->stripe_unit != given.stripe_unit) {
      return Status::InvalidArgument(
          prefix + " disagrees with " + any_disk + " (count " + std::to_string(l->count) + " vs " +
          std::to_string(given.count) + ", stripe unit " + std::to_string(l->stripe_unit) + " vs " +
          std::to_string(given.stripe_unit) + ")");
    }
    if (i == 0) disk0 = *l;
  }
  disk0.disk_paths = paths;

  // One ring and submitting thread per disk: a disk's requests never queue behind another's.
  std::vector<std::unique_ptr<IoRing>> rings;
  const size_t max_open_files = FdBudgetPerDisk(given.count);
  std::vector<std::unique_ptr<Disk>> disks;
  for (uint32_t i = 0; i < given.count; ++i) {
    Result<std::unique_ptr<IoRing>> ring =
        IoRing::Create(options.ring_entries, "tipfs-disk" + std::to_string(i));
    if (!ring.ok()) return ring.status().WithContext("open volume: io_uring unavailable");
    rings.push_back(std::move(*ring));
    Result<std::unique_ptr<PosixDisk>> d =
        PosixDisk::Open(paths[i], i, rings.back().get(), max_open_files);
    if (!d.ok()) return d.status();
    std::unique_ptr<Disk> disk = std::move(*d);
    if (options.wrap_disk) disk = options.wrap_disk(std::move(disk), i);
    disks.push_back(std::move(disk));
  }
  auto volume = std::make_unique<Volume>(std::move(disk0), std::move(disks));
  volume->rings_ = std::move(rings);
  return volume;
}

}  // namespace tipfs::stripe
