// fsck's object pass: every object on every disk against the inode it belongs to.
#include <algorithm>

#include "fsck/fsck_internal.h"

namespace tipfs::fsck {

namespace {

std::string DiskName(stripe::Volume* volume, uint32_t d) {
  return "disk " + std::to_string(d) + " (" + volume->disk(d)->name() + ")";
}

}  // namespace

void Settle(Problem problem, CheckResult* result, const CheckOptions& options) {
  if (options.report) options.report(problem);
  result->problems.push_back(std::move(problem));
}

void CheckObjects(stripe::Volume* volume, const InodeMap& inodes, bool repair, CheckResult* result,
                  const CheckOptions& options) {
  const stripe::Layout& layout = volume->layout();
  CheckRadosParts(volume, repair, result, options);
  for (uint32_t d = 0; d < volume->disk_count(); ++d) {
    stripe::Disk* disk = volume->disk(d);
    std::vector<stripe::ObjectId> objects;
    Status listed = disk->ListObjects(&objects);
    if (!listed.ok()) {
      Problem p;
      p.kind = ProblemKind::kObjectError;
      p.description = DiskName(volume, d) + ": cannot list its objects: " + listed.ToString();
      Settle(std::move(p), result, options);
      continue;
    }
    std::sort(objects.begin(), objects.end());
    for (stripe::ObjectId id : objects) {
      ++result->objects;
      if (inodes.unreadable.count(id) != 0) continue;  // its record is reported damaged
      Problem p;
      p.repairable = true;
      Status fix;
      auto file = inodes.file_sizes.find(id);
      if (file == inodes.file_sizes.end()) {
        Result<stripe::ObjectInfo> info = disk->Stat(id);
        const std::string bytes =
            info.ok() ? std::to_string(info->size) + " bytes" : "size unknown";
        p.kind = ProblemKind::kLeakedObject;
        p.description = DiskName(volume, d) + ": object " + std::to_string(id) + " (" + bytes +
                        ") belongs to " +
                        (inodes.non_files.count(id) != 0
                             ? "inode " + std::to_string(id) + ", which is not a regular file"
                             : "no inode");
        p.repair = "object deleted";
        if (repair) fix = disk->Remove(id);
      } else {
        Result<stripe::ObjectInfo> info = disk->Stat(id);
        if (!info.ok()) {
          if (info.error() == ENOENT) continue;  // removed since listed
          p.kind = ProblemKind::kObjectError;
          p.repairable = false;
          p.description = DiskName(volume, d) + ": object " + std::to_string(id) +
                          " cannot be examined: " + info.status().ToString();
          Settle(std::move(p), result, options);
          continue;
        }
        const uint64_t share = layout.ObjectSize(id, d, file->second);
        if (info->size <= share) continue;
        p.kind = ProblemKind::kObjectTooLong;
        p.description = "inode " + std::to_string(id) + ": its object on " + DiskName(volume, d) +
                        " is " + std::to_string(info->size) + " bytes, but a file of " +
                        std::to_string(file->second) + " bytes keeps at most " +
                        std::to_string(share) + " there";
        p.repair = "trimmed to " + std::to_string(share) + " bytes";
        if (repair) fix = disk->Truncate(id, share);
      }
      if (repair) {
        p.repaired = fix.ok();
        if (!fix.ok()) p.repair += " failed: " + fix.ToString();
      }
      Settle(std::move(p), result, options);
    }
  }
}

}  // namespace tipfs::fsck
