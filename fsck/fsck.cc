// fsck: the label pass, opening the volume, applying the namespace plan, then the object pass.
#include "fsck/fsck.h"

#include <sys/stat.h>

#include "fsck/fsck_internal.h"
#include "stripe/disk_name.h"
#include "stripe/striped_io.h"

namespace tipfs::fsck {

const char* ProblemKindName(ProblemKind kind) {
  switch (kind) {
    case ProblemKind::kLabel:
      return "label";
    case ProblemKind::kStoreDamaged:
      return "store-damaged";
    case ProblemKind::kDamagedRecord:
      return "damaged-record";
    case ProblemKind::kSuperblock:
      return "superblock";
    case ProblemKind::kRoot:
      return "root";
    case ProblemKind::kDanglingEntry:
      return "dangling-entry";
    case ProblemKind::kEntryType:
      return "entry-type";
    case ProblemKind::kDirectoryNames:
      return "directory-names";
    case ProblemKind::kParentPointer:
      return "parent-pointer";
    case ProblemKind::kUnreachable:
      return "unreachable";
    case ProblemKind::kLinkCount:
      return "link-count";
    case ProblemKind::kOrphan:
      return "orphan";
    case ProblemKind::kStrayRecord:
      return "stray-record";
    case ProblemKind::kSymlinkTarget:
      return "symlink-target";
    case ProblemKind::kLeakedObject:
      return "leaked-object";
    case ProblemKind::kObjectTooLong:
      return "object-too-long";
    case ProblemKind::kObjectError:
      return "object-error";
    case ProblemKind::kUnrecordedPart:
      return "unrecorded-part";
    case ProblemKind::kStalePartRecord:
      return "stale-part-record";
  }
  return "unknown";
}

std::string Problem::Line() const {
  std::string line = description;
  if (repaired) {
    line += "; repaired: " + repair;
  } else if (repairable && repair.find(" failed: ") != std::string::npos) {
    line += "; repair " + repair;
  } else if (repairable) {
    line += "; repairable with --repair (" + repair + ")";
  } else {
    line += "; left as is";
  }
  return line;
}

size_t CheckResult::repaired() const {
  size_t n = 0;
  for (const Problem& p : problems) n += p.repaired;
  return n;
}

size_t CheckResult::left() const { return problems.size() - repaired(); }

bool CheckResult::Has(ProblemKind kind) const {
  for (const Problem& p : problems) {
    if (p.kind == kind) return true;
  }
  return false;
}

int CheckResult::ExitCode() const {
  if (!error.ok()) return 8;
  if (left() > 0) return 4;
  return problems.empty() ? 0 : 1;
}

namespace {

void StoreDamaged(const Status& status, CheckResult* result, const CheckOptions& options) {
  Problem p;
  p.kind = ProblemKind::kStoreDamaged;
  p.description = status.message();
  Settle(std::move(p), result, options);
}

void ApplyPlan(stripe::Volume* volume, meta::MetaStore* meta, NamespacePlan* plan,
               CheckResult* result) {
  Status st = meta->ApplyRepair(plan->batch);
  if (!st.ok()) {
    result->error = st.WithContext("applying the repairs");
    return;
  }
  for (Problem& p : plan->problems) p.repaired = p.repairable;
  // Orphans: their objects go first, so that an interrupted repair leaves an orphan with fewer
  // objects (reclaimed by the next mount or check), never objects of no inode.
  stripe::StripedIo io(volume);
  for (size_t i = 0; i < plan->reclaim.size(); ++i) {
    const meta::Ino ino = plan->reclaim[i];
    Status reclaimed = io.Remove(ino);
    if (reclaimed.ok()) reclaimed = meta->DeleteInode(ino);
    if (!reclaimed.ok()) {
      Problem& p = plan->problems[plan->reclaim_problem[i]];
      p.repaired = false;
      p.repair += " failed: " + reclaimed.ToString();
    }
  }
}

}  // namespace

CheckResult CheckVolume(stripe::Volume* volume, meta::MetaStore* meta,
                        const CheckOptions& options) {
  CheckResult result;
  Result<meta::StoreScan> scan = meta->Scan();
  if (!scan.ok()) {
    if (scan.error() == EUCLEAN) {
      StoreDamaged(scan.status(), &result, options);
    } else {
      result.error = scan.status();
    }
    return result;
  }
  NamespacePlan plan = PlanNamespace(*scan);
  result.inodes = plan.inodes;
  result.entries = plan.entries;
  if (options.repair) ApplyPlan(volume, meta, &plan, &result);
  for (Problem& p : plan.problems) Settle(std::move(p), &result, options);
  if (!result.error.ok()) return result;
  CheckObjects(volume, options.repair ? plan.after : InodesOf(*scan), options.repair, &result,
               options);
  return result;
}

CheckResult RepairObjects(stripe::Volume* volume, meta::MetaStore* meta) {
  CheckResult result;
  Result<meta::StoreScan> scan = meta->Scan();
  if (!scan.ok()) {
    result.error = scan.status();
    return result;
  }
  CheckOptions options;
  options.repair = true;
  CheckObjects(volume, InodesOf(*scan), /*repair=*/true, &result, options);
  return result;
}

namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A damaged or missing label may be rewritten where the disk itself is still there: a
// directory with its objects/, a pool namespace that opens.
bool CanHoldLabel(const std::string& name, stripe::RadosConnections* rados) {
  if (!stripe::IsRadosName(name)) return IsDirectory(name + "/objects");
  Result<stripe::DiskName> parsed = stripe::ParseDiskName(name);
  return parsed.ok() && rados->OpenNamespace(*parsed).ok();
}

// Checks every disk's label against the reference label (the disk named on the command line);
// rewrites damaged or missing ones. Returns false when a label problem is left (the volume
// cannot be opened then).
bool CheckLabels(const stripe::Label& reference, const CheckOptions& options, CheckResult* result) {
  bool usable = true;
  stripe::RadosConnections rados;
  for (uint32_t i = 0; i < reference.disk_names.size(); ++i) {
    const std::string& name = reference.disk_names[i];
    const std::string disk = "disk " + std::to_string(i) + " (" + name + ")";
    Problem p;
    p.kind = ProblemKind::kLabel;
    Result<stripe::Label> label = stripe::ReadLabel(name, &rados);
    if (label.ok()) {
      if (label->volume_uuid != reference.volume_uuid) {
        p.description = disk + ": its label belongs to volume " + label->volume_uuid;
      } else if (label->index != i) {
        p.description = disk + ": its label says index " + std::to_string(label->index);
      } else if (label->count != reference.count || label->stripe_unit != reference.stripe_unit ||
                 label->disk_names != reference.disk_names ||
                 label->meta_dir != reference.meta_dir ||
                 label->rados_object_size != reference.rados_object_size ||
                 label->format_version != reference.format_version) {
        p.description = disk + ": its label disagrees with the others about the volume";
      } else {
        continue;
      }
    } else if ((label.error() == EUCLEAN || label.error() == ENOENT) &&
               CanHoldLabel(name, &rados)) {
      p.description = disk + ": " + label.status().message();
      p.repairable = true;
      p.repair = "label rewritten from the other disks'";
      if (options.repair) {
        stripe::Label fixed = reference;
        fixed.index = i;
        Status written = stripe::WriteLabel(name, fixed, &rados);
        p.repaired = written.ok();
        if (!written.ok()) p.repair += " failed: " + written.ToString();
      }
    } else {
      p.description = disk + ": " + label.status().message();
    }
    usable &= p.repaired;
    Settle(std::move(p), result, options);
  }
  return usable;
}

// The label of the disk or metadata directory named on the command line, as written there.
Result<stripe::Label> ReferenceLabel(const std::string& any_disk) {
  Result<stripe::Label> label = stripe::ReadLabel(any_disk);
  if (label.ok() || label.error() != ENOENT || stripe::IsRadosName(any_disk) ||
      !IsDirectory(any_disk)) {
    return label;
  }
  Result<stripe::Label> home = stripe::ReadHomeLabel(any_disk);
  return home.ok() ? home : label;
}

}  // namespace

CheckResult RunFsck(const FsckOptions& options) {
  CheckResult result;
  Result<stripe::Label> reference = ReferenceLabel(options.disk);
  if (!reference.ok()) {
    result.error = reference.status().WithContext("cannot identify the volume");
    return result;
  }
  if (!CheckLabels(*reference, options.check, &result)) return result;

  Result<std::unique_ptr<stripe::Volume>> volume = stripe::Volume::Open(options.disk, {});
  if (!volume.ok()) {
    result.error =
        volume.error() == EBUSY
            ? Status::Busy("refusing to check a mounted volume: " + volume.status().message() +
                           " (unmount it first)")
            : volume.status();
    return result;
  }
  const std::string meta_path = stripe::MetaPath((*volume)->label());
  meta::MetaStoreOptions store_options;
  store_options.after_unclean_shutdown = options.after_unclean_shutdown;
  Result<std::unique_ptr<meta::MetaStore>> meta =
      meta::MetaStore::Open(meta_path, reference->volume_uuid, store_options);
  if (!meta.ok()) {
    switch (meta.error()) {
      case EBUSY:
        result.error =
            Status::Busy("refusing to check a mounted volume: " + meta.status().message() +
                         " (unmount it first)");
        break;
      case EUCLEAN:
      case ENOENT:
      case EINVAL:
        StoreDamaged(meta.status(), &result, options.check);
        break;
      default:
        result.error = meta.status();
    }
    return result;
  }
  CheckResult checked = CheckVolume(volume->get(), meta->get(), options.check);
  for (Problem& p : checked.problems) result.problems.push_back(std::move(p));
  result.inodes = checked.inodes;
  result.entries = checked.entries;
  result.objects = checked.objects;
  result.error = checked.error;
  return result;
}

}  // namespace tipfs::fsck
