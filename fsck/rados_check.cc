// fsck's pass over the parts of RADOS disks' objects (stripe/rados_disk.h): each file's object on
// a RADOS disk is cut into parts whose head records them, and removal and truncation trust those
// records. A part the head does not record would outlive its file; a record of a missing part is
// left by a crash between recording and writing. Runs before the object pass, so that pass sees
// the sizes the repaired records give (and trims a recorded part that lies past its file).
#include "fsck/fsck_internal.h"
#include "stripe/rados_disk.h"

namespace tipfs::fsck {

void CheckRadosParts(stripe::Volume* volume, bool repair, CheckResult* result,
                     const CheckOptions& options) {
  for (uint32_t d = 0; d < volume->disk_count(); ++d) {
    stripe::RadosDisk* disk = volume->rados_disk(d);
    if (disk == nullptr) continue;
    std::vector<stripe::RadosPartProblem> found;
    Status checked = disk->CheckParts(repair, &found);
    for (const stripe::RadosPartProblem& f : found) {
      Problem p;
      p.repairable = true;
      p.repaired = f.repaired;
      const std::string part = stripe::RadosDisk::PartName(f.object, f.part);
      if (f.kind == stripe::RadosPartProblem::Kind::kUnrecorded) {
        p.kind = ProblemKind::kUnrecordedPart;
        p.description = disk->name() + ": part " + part + " of object " + std::to_string(f.object) +
                        " is not recorded in its head";
        p.repair = "recorded";
      } else {
        p.kind = ProblemKind::kStalePartRecord;
        p.description = disk->name() + ": the head of object " + std::to_string(f.object) +
                        " records part " + part + ", which does not exist";
        p.repair = "record dropped";
      }
      if (repair && !f.repaired) p.repair += " failed: " + f.repair_error.ToString();
      Settle(std::move(p), result, options);
    }
    if (!checked.ok()) {
      Problem p;
      p.kind = ProblemKind::kObjectError;
      p.description = disk->name() + ": cannot check its parts: " + checked.ToString();
      Settle(std::move(p), result, options);
    }
  }
}

}  // namespace tipfs::fsck
