// Volume: identifying a volume from any of its disks, checking every label, opening the disks.
#include "stripe/volume.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "stripe/disk_name.h"
#include "stripe/io_ring.h"
#include "stripe/posix_disk.h"
#include "stripe/rados_disk.h"

namespace tipfs::stripe {

namespace {

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

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The canonical form of a name the caller gave: a resolved path, or the parsed rados: name.
std::string CanonicalName(const std::string& given) {
  if (IsRadosName(given)) {
    Result<DiskName> name = ParseDiskName(given);
    return name.ok() ? name->ToString() : given;
  }
  char resolved[PATH_MAX];
  return ::realpath(given.c_str(), resolved) != nullptr ? std::string(resolved) : given;
}

}  // namespace

Result<Label> IdentifyVolume(const std::string& any_disk, RadosConnections* rados) {
  Result<Label> label = ReadLabel(any_disk, rados);
  if (!label.ok() && label.error() == ENOENT && !IsRadosName(any_disk) && IsDirectory(any_disk)) {
    // Not a disk: perhaps the metadata directory of a volume whose disks are elsewhere.
    Result<Label> home = ReadHomeLabel(any_disk);
    if (home.ok()) {
      home->meta_dir = CanonicalName(any_disk);
      home->index = 0;
      return home;
    }
    if (home.error() != ENOENT) return home.status();
  }
  if (!label.ok()) return label.status();
  // The disk the caller named is disk `index`, even if it moved since mkfs recorded its name.
  const std::string recorded = label->disk_names[label->index];
  const std::string now = CanonicalName(any_disk);
  if (label->meta_dir == recorded) label->meta_dir = now;
  label->disk_names[label->index] = now;
  return label;
}

Volume::Volume(Label label, std::vector<std::unique_ptr<Disk>> disks)
    : label_(std::move(label)),
      layout_(static_cast<uint32_t>(disks.size()), label_.stripe_unit),
      disks_(std::move(disks)) {}

Volume::~Volume() {
  // Disks first: each waits for its in-flight ops, which complete on its ring's thread.
  disks_.clear();
  rings_.clear();
}

std::vector<Disk*> Volume::disks() const {
  std::vector<Disk*> out;
  out.reserve(disks_.size());
  for (const auto& d : disks_) out.push_back(d.get());
  return out;
}

std::vector<NamedRadosStats> Volume::rados_stats() const {
  std::vector<NamedRadosStats> out;
  for (uint32_t i = 0; i < rados_disks_.size(); ++i) {
    if (rados_disks_[i] == nullptr) continue;
    out.push_back({i, rados_disks_[i]->rados_namespace().display(), rados_disks_[i]->Stats()});
  }
  return out;
}

Result<std::unique_ptr<Volume>> Volume::Open(const std::string& any_disk, OpenOptions options) {
  RadosConnections rados(options.rados);
  Result<Label> given = IdentifyVolume(any_disk, &rados);
  if (!given.ok()) return given.status();
  const bool via_home = !IsRadosName(any_disk) && given->meta_dir == CanonicalName(any_disk) &&
                        given->disk_names[given->index] != given->meta_dir;
  const std::vector<std::string>& names = given->disk_names;

  for (uint32_t i = 0; i < given->count; ++i) {
    const std::string prefix = "disk " + std::to_string(i) + " " + names[i];
    Result<Label> l = i == given->index && !via_home ? given : ReadLabel(names[i], &rados);
    if (!l.ok()) {
      if (l.error() == ENOENT || l.error() == ENOTDIR) {
        return Status::FromErrno(l.error(),
                                 "disk " + std::to_string(i) + " " + l.status().message());
      }
      return l.status().WithContext("disk " + std::to_string(i));
    }
    if (l->volume_uuid != given->volume_uuid) {
      return Status::InvalidArgument(prefix + " belongs to another volume (uuid " + l->volume_uuid +
                                     ", expected " + given->volume_uuid + ")");
    }
    if (l->index != i) {
      return Status::InvalidArgument(prefix + " holds index " + std::to_string(l->index) +
                                     ", expected " + std::to_string(i) + " (disks reordered?)");
    }
    if (l->count != given->count || l->stripe_unit != given->stripe_unit ||
        l->rados_object_size != given->rados_object_size) {
      return Status::InvalidArgument(
          prefix + " disagrees with " + any_disk + " (count " + std::to_string(l->count) + " vs " +
          std::to_string(given->count) + ", stripe unit " + std::to_string(l->stripe_unit) +
          " vs " + std::to_string(given->stripe_unit) + ")");
    }
  }
  Label label = *given;
  label.index = 0;
  if (!label.meta_dir.empty() && !IsDirectory(label.meta_dir)) {
    return Status::NotFound("metadata directory " + label.meta_dir +
                            " is missing on this host: the metadata of a volume on RADOS pools "
                            "stays on the host that holds that directory (see tipfs(8))");
  }

  std::vector<std::unique_ptr<RadosNamespace>> namespaces(label.count);
  bool any_directory = false;
  for (uint32_t i = 0; i < label.count; ++i) {
    if (!IsRadosName(names[i])) {
      any_directory = true;
      continue;
    }
    Result<DiskName> name = ParseDiskName(names[i]);
    if (!name.ok()) return name.status().WithContext("disk " + std::to_string(i));
    Result<std::unique_ptr<RadosNamespace>> ns = rados.OpenNamespace(*name);
    if (!ns.ok()) return ns.status().WithContext("disk " + std::to_string(i));
    namespaces[i] = std::move(*ns);
  }

  // One ring and submitting thread per directory disk: a disk's requests never queue behind
  // another's.
  std::vector<std::unique_ptr<IoRing>> rings;
  const size_t max_open_files = any_directory ? FdBudgetPerDisk(label.count) : 0;
  std::vector<std::unique_ptr<Disk>> disks;
  std::vector<RadosDisk*> rados_disks(label.count, nullptr);
  for (uint32_t i = 0; i < label.count; ++i) {
    std::unique_ptr<Disk> disk;
    if (namespaces[i] == nullptr) {
      Result<std::unique_ptr<IoRing>> ring =
          IoRing::Create(options.ring_entries, "tipfs-disk" + std::to_string(i));
      if (!ring.ok()) return ring.status().WithContext("open volume: io_uring unavailable");
      rings.push_back(std::move(*ring));
      Result<std::unique_ptr<PosixDisk>> d =
          PosixDisk::Open(names[i], i, rings.back().get(), max_open_files, options.direct_io);
      if (!d.ok()) return d.status();
      disk = std::move(*d);
    } else {
      std::unique_ptr<RadosLease> lease;
      if (options.take_leases) {
        Result<std::unique_ptr<RadosLease>> taken =
            RadosLease::Acquire(namespaces[i].get(), options.lease);
        if (!taken.ok()) return taken.status().WithContext("disk " + std::to_string(i));
        lease = std::move(*taken);
      }
      RadosDiskOptions disk_options;
      disk_options.index = i;
      disk_options.object_size = label.rados_object_size;
      Result<std::unique_ptr<RadosDisk>> d =
          RadosDisk::Open(std::move(namespaces[i]), disk_options, std::move(lease));
      if (!d.ok()) return d.status().WithContext("disk " + std::to_string(i));
      rados_disks[i] = d->get();
      disk = std::move(*d);
    }
    if (options.wrap_disk) disk = options.wrap_disk(std::move(disk), i);
    disks.push_back(std::move(disk));
  }
  auto volume = std::make_unique<Volume>(std::move(label), std::move(disks));
  volume->rados_disks_ = std::move(rados_disks);
  volume->rings_ = std::move(rings);
  return volume;
}

}  // namespace tipfs::stripe
