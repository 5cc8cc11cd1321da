// Mkfs: checks every disk (and the metadata directory), then labels them; see mkfs.h.
//
// mkfs --force erases tipfs's own entries of a disk that carries a tipfs label (a directory's
// tipfs-label, tipfs-label.tmp, objects/ and meta/; a namespace's tipfs-label and part objects) and
// leaves everything else alone; tipfs entries on a disk without a tipfs label are not tipfs's and
// make mkfs refuse even with --force. An otherwise empty directory may hold lost+found (the root
// of a freshly made file system).
#include "stripe/mkfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>

#include "stripe/disk_name.h"
#include "stripe/layout.h"
#include "stripe/rados_disk.h"
#include "stripe/rados_lease.h"

namespace tipfs::stripe {

namespace {

constexpr char kLabelTmp[] = "tipfs-label.tmp";
constexpr char kHomeLabelTmp[] = "tipfs-volume.tmp";
constexpr char kPidFile[] = "tipfs.pid";
constexpr size_t kRemovesInFlight = 64;

// What a candidate disk (or the metadata directory) holds, from the point of view of mkfs.
struct DiskScan {
  DiskName name;         // directories: the resolved path
  std::string identity;  // the same disk twice has the same identity
  bool has_label = false;
  bool has_label_tmp = false;              // a label write that never completed
  std::vector<std::string> tipfs_entries;  // objects, meta / part objects
  std::vector<std::string> other_entries;
  std::unique_ptr<RadosNamespace> ns;  // RADOS disks
};

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

// A directory disk, or the metadata directory (`home`: its label copy is tipfs-volume).
Result<DiskScan> ScanDirectory(const std::string& given, bool home) {
  const std::string what = home ? "mkfs: metadata directory " : "mkfs: disk ";
  struct stat st;
  if (::stat(given.c_str(), &st) != 0) return ErrnoStatus(what + given);
  if (!S_ISDIR(st.st_mode)) {
    return Status::FromErrno(ENOTDIR, what + given + " is not a directory");
  }
  char resolved[PATH_MAX];
  if (::realpath(given.c_str(), resolved) == nullptr) return ErrnoStatus("mkfs: realpath " + given);
  DiskScan scan;
  scan.name.path = resolved;
  scan.identity = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  if (::access(resolved, W_OK | X_OK) != 0)
    return ErrnoStatus(what + resolved + " is not writable");
  DIR* dir = ::opendir(resolved);
  if (dir == nullptr) return ErrnoStatus("mkfs: list " + scan.name.path);
  while (dirent* d = ::readdir(dir)) {
    const std::string name = d->d_name;
    if (name == "." || name == ".." || name == "lost+found") continue;
    if (name == (home ? kHomeLabelName : kLabelName)) {
      scan.has_label = true;
    } else if (name == (home ? kHomeLabelTmp : kLabelTmp)) {
      scan.has_label_tmp = true;
    } else if (name == "meta" || (!home && name == "objects") || (home && name == kPidFile)) {
      scan.tipfs_entries.push_back(name);
    } else {
      scan.other_entries.push_back(name);
    }
  }
  ::closedir(dir);
  return scan;
}

Result<DiskScan> ScanRados(const std::string& given, RadosConnections* rados) {
  Result<DiskName> parsed = ParseDiskName(given);
  if (!parsed.ok()) return parsed.status().WithContext("mkfs");
  DiskScan scan;
  scan.name = *parsed;
  // The label must work from any working directory: conf and keyring become absolute.
  for (std::string* path : {&scan.name.rados.conf, &scan.name.rados.keyring}) {
    if (path->empty()) continue;
    char resolved[PATH_MAX];
    if (::realpath(path->c_str(), resolved) == nullptr)
      return ErrnoStatus("mkfs: " + given + ": " + *path);
    *path = resolved;
  }
  Result<std::unique_ptr<RadosNamespace>> ns = rados->OpenNamespace(scan.name);
  if (!ns.ok()) return ns.status().WithContext("mkfs");
  scan.ns = std::move(*ns);
  scan.identity = scan.ns->cluster()->fsid() + "/" + std::to_string(scan.ns->pool_id()) + "/" +
                  scan.name.rados.nspace;
  std::vector<std::string> names;
  Status listed = scan.ns->ListObjectNames(&names);
  if (!listed.ok()) return listed.WithContext("mkfs");
  for (const std::string& name : names) {
    ObjectId object;
    uint64_t part;
    if (name == kLabelName) {
      scan.has_label = true;
    } else if (RadosDisk::ParsePartName(name, &object, &part)) {
      scan.tipfs_entries.push_back(name);
    } else {
      scan.other_entries.push_back(name);
    }
  }
  if (scan.has_label) {
    // A mounted volume is never erased, not even with --force: take its lease for a moment.
    Result<std::unique_ptr<RadosLease>> lease = RadosLease::Acquire(scan.ns.get());
    if (!lease.ok()) return lease.status().WithContext("mkfs");
  }
  return scan;
}

Status RemoveObjects(const RadosNamespace& ns, const std::vector<std::string>& names) {
  Status status;
  for (size_t start = 0; start < names.size(); start += kRemovesInFlight) {
    const size_t end = std::min(names.size(), start + kRemovesInFlight);
    std::vector<rados_completion_t> batch;
    for (size_t i = start; i < end; ++i) {
      rados_completion_t c = nullptr;
      rados_aio_create_completion2(nullptr, nullptr, &c);
      if (rados_aio_remove(ns.ioctx(), names[i].c_str(), c) < 0) {
        rados_aio_release(c);
        c = nullptr;
      }
      batch.push_back(c);
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      int rc = -EIO;
      if (batch[i] != nullptr) {
        rados_aio_wait_for_complete(batch[i]);
        rc = rados_aio_get_return_value(batch[i]);
        rados_aio_release(batch[i]);
      }
      if (rc < 0 && rc != -ENOENT && status.ok()) {
        status = ns.Error("mkfs: erase " + ns.display() + " object " + names[start + i], rc);
      }
    }
  }
  return status;
}

Status EraseTipfsEntries(const DiskScan& scan, bool home) {
  if (scan.name.is_rados()) {
    std::vector<std::string> names = scan.tipfs_entries;
    names.push_back(kLabelName);
    return RemoveObjects(*scan.ns, names);
  }
  std::error_code ec;
  std::vector<std::string> names = {"meta"};
  if (home) {
    names.insert(names.end(), {kPidFile, kHomeLabelTmp, kHomeLabelName});
  } else {
    names.insert(names.end(), {"objects", kLabelTmp, kLabelName});
  }
  for (const std::string& name : names) {
    const std::filesystem::path p = std::filesystem::path(scan.name.path) / name;
    std::filesystem::remove_all(p, ec);
    if (ec) return Status::FromErrno(ec.value(), "mkfs: erase " + p.string() + ": " + ec.message());
  }
  return Status::OK();
}

// The refusals shared by disks and the metadata directory.
Status CheckReusable(const DiskScan& scan, const std::string& where, bool force,
                     RadosConnections* rados, bool home) {
  if (scan.has_label && !force) {
    Result<Label> old =
        home ? ReadHomeLabel(scan.name.path) : ReadLabel(scan.name.ToString(), rados);
    const std::string what = old.ok() ? " (volume " + old->volume_uuid + ", disk " +
                                            std::to_string(old->index) + " of " +
                                            std::to_string(old->count) + ")"
                                      : "";
    return Status::Exists("mkfs: " + where + " already holds a tipfs volume" +
                          (home ? " (volume " + (old.ok() ? old->volume_uuid : "?") + ")" : what) +
                          "; use --force to erase it");
  }
  if (!scan.has_label && !scan.tipfs_entries.empty()) {
    return Status::FromErrno(ENOTEMPTY, "mkfs: " + where + " holds '" + scan.tipfs_entries[0] +
                                            "' but no tipfs label; refusing to touch it" +
                                            (force ? " even with --force" : ""));
  }
  if (scan.has_label_tmp && !scan.has_label && !force) {
    return Status::FromErrno(ENOTEMPTY, "mkfs: " + where + " holds an unfinished " +
                                            (home ? kHomeLabelTmp : kLabelTmp) +
                                            "; use --force to replace it");
  }
  if (!scan.other_entries.empty() && !force) {
    return Status::FromErrno(
        ENOTEMPTY,
        "mkfs: " + where + " is not empty (holds '" + scan.other_entries[0] + "'); use " +
            (scan.name.is_rados() ? "an empty namespace" : "an empty directory") + " or --force");
  }
  return Status::OK();
}

Status SyncDirectory(const std::string& path) {
  const int dfd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || ::fsync(dfd) != 0) {
    const int err = errno;
    if (dfd >= 0) ::close(dfd);
    return ErrnoStatus("mkfs: fsync " + path, err);
  }
  ::close(dfd);
  return Status::OK();
}

bool IsPowerOfTwoIn(uint64_t v, uint64_t lo, uint64_t hi) {
  return v >= lo && v <= hi && (v & (v - 1)) == 0;
}

}  // namespace

Result<Label> Mkfs(const MkfsOptions& options) {
  const size_t n = options.disks.size();
  if (n < 1 || n > Layout::kMaxDisks) {
    return Status::InvalidArgument("mkfs: need 1 to 64 disks, got " + std::to_string(n));
  }
  if (!IsPowerOfTwoIn(options.stripe_unit, 4096, 64u << 20)) {
    return Status::InvalidArgument("mkfs: stripe unit " + std::to_string(options.stripe_unit) +
                                   " must be a power of two from 4 KiB to 64 MiB");
  }
  // RADOS refuses objects above osd_max_object_size, 128 MiB by default.
  if (!IsPowerOfTwoIn(options.rados_object_size, 4096, 128u << 20)) {
    return Status::InvalidArgument("mkfs: RADOS object size " +
                                   std::to_string(options.rados_object_size) +
                                   " must be a power of two from 4 KiB to 128 MiB");
  }

  // Check every disk before touching any of them.
  RadosConnections rados(options.rados);
  std::vector<DiskScan> scans;
  std::map<std::string, std::string> seen;  // identity -> the name given first
  for (const std::string& given : options.disks) {
    Result<DiskScan> scan =
        IsRadosName(given) ? ScanRados(given, &rados) : ScanDirectory(given, /*home=*/false);
    if (!scan.ok()) return scan.status();
    auto [it, inserted] = seen.emplace(scan->identity, given);
    if (!inserted) {
      return Status::InvalidArgument("mkfs: " + given + " and " + it->second + " are the same " +
                                     (scan->name.is_rados() ? "namespace" : "directory"));
    }
    const std::string where = scan->name.ToString();
    TIPFS_RETURN_IF_ERROR(CheckReusable(*scan, where, options.force, &rados, /*home=*/false));
    scans.push_back(std::move(*scan));
  }

  // The metadata directory: named, or the first directory disk.
  int home_disk = -1;
  std::unique_ptr<DiskScan> home;
  if (!options.meta_dir.empty()) {
    Result<DiskScan> scan = ScanDirectory(options.meta_dir, /*home=*/true);
    if (!scan.ok()) return scan.status();
    for (size_t i = 0; i < scans.size(); ++i) {
      if (!scans[i].name.is_rados() && scans[i].identity == scan->identity) home_disk = int(i);
    }
    if (home_disk < 0) {
      TIPFS_RETURN_IF_ERROR(CheckReusable(*scan, "metadata directory " + scan->name.path,
                                          options.force, &rados, /*home=*/true));
      home = std::make_unique<DiskScan>(std::move(*scan));
    }
  } else {
    for (size_t i = 0; i < scans.size() && home_disk < 0; ++i) {
      if (!scans[i].name.is_rados()) home_disk = int(i);
    }
    if (home_disk < 0) {
      return Status::InvalidArgument(
          "mkfs: every disk is a RADOS pool: name a local directory for the metadata with "
          "--meta DIR");
    }
  }

  Result<std::string> uuid = NewUuid();
  if (!uuid.ok()) return uuid.status().WithContext("mkfs");
  Label label;
  label.volume_uuid = *uuid;
  label.count = static_cast<uint32_t>(n);
  label.stripe_unit = options.stripe_unit;
  label.rados_object_size = options.rados_object_size;
  for (const DiskScan& s : scans) label.disk_names.push_back(s.name.ToString());
  const std::string home_path = home ? home->name.path : scans[home_disk].name.path;
  if (home_path != label.disk_names[0]) label.meta_dir = home_path;
  label.format_version = RequiredFormatVersion(label);

  for (uint32_t i = 0; i < n; ++i) {
    const DiskScan& scan = scans[i];
    if (scan.has_label || scan.has_label_tmp) TIPFS_RETURN_IF_ERROR(EraseTipfsEntries(scan, false));
    Label mine = label;
    mine.index = i;
    const std::string name = scan.name.ToString();
    // The label goes first: a crash before objects/ exists leaves a labelled directory that
    // mkfs --force may erase, never an unlabelled objects/ that it must refuse.
    Status s = WriteLabel(name, mine, &rados);
    if (!s.ok()) return s.WithContext("mkfs: disk " + name);
    if (scan.name.is_rados()) continue;
    const std::string objects = scan.name.path + "/objects";
    if (::mkdir(objects.c_str(), 0700) != 0) return ErrnoStatus("mkfs: mkdir " + objects);
    TIPFS_RETURN_IF_ERROR(SyncDirectory(scan.name.path));
  }
  if (home) {
    if (home->has_label || home->has_label_tmp || options.force) {
      TIPFS_RETURN_IF_ERROR(EraseTipfsEntries(*home, true));
    }
    Status s = WriteHomeLabel(home->name.path, label);
    if (!s.ok()) return s.WithContext("mkfs: metadata directory " + home->name.path);
  }
  return label;
}

}  // namespace tipfs::stripe
