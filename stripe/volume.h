// Volume: N backing directories ("disks") that together hold a tipfs file system.
//
// On disk, each backing directory holds
//   tipfs-label       the label: volume UUID, this disk's index, disk count, stripe unit, format
//                     version and the absolute paths of all disks, checksummed
//   objects/          one sparse object per file (objects/<2 hex>/<16 hex inode>)
// and disk 0 also holds
//   meta/             the metadata store (RocksDB), created and opened by meta.
//
// Mkfs and Open validate everything and fail with one message that names the path and the
// problem, changing nothing on disk when they fail. A Volume is thread-safe once open.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stripe/disk.h"
#include "stripe/layout.h"

namespace tipfs::stripe {

class IoRing;

constexpr uint32_t kFormatVersion = 1;
constexpr uint32_t kDefaultStripeUnit = 64 * 1024;

struct Label {
  std::string volume_uuid;
  uint32_t index = 0;
  uint32_t count = 0;
  uint32_t stripe_unit = kDefaultStripeUnit;
  uint32_t format_version = kFormatVersion;
  std::vector<std::string> disk_paths;  // absolute, in index order
};

struct MkfsOptions {
  std::vector<std::string> disks;  // 1..64 existing directories
  uint32_t stripe_unit = kDefaultStripeUnit;
  // Without force, a directory that already holds a volume, or any other file, is refused.
  bool force = false;
};

// Writes a fresh label and an empty objects/ directory on every disk. With force, an existing
// tipfs volume on those disks (labels, objects/, meta/) is erased first; other files are left.
// objects/ or meta/ in a directory without a tipfs label are refused even with force; lost+found
// is allowed. Errors: EINVAL (options, same directory twice), ENOENT/ENOTDIR, EACCES, EEXIST
// (already a volume), ENOTEMPTY (other files). Label errors (ReadLabel, Open): ENOENT (missing
// directory or label), EUCLEAN (corrupt), EPROTONOSUPPORT (format version), EINVAL (another
// volume, wrong index, disagreeing labels).
// Returns the label written to disk 0.
Result<Label> Mkfs(const MkfsOptions& options);

// Reads and checks one disk's label.
Result<Label> ReadLabel(const std::string& disk_path);

// Replaces one disk's label atomically (temporary file, fsync, rename, fsync of the directory).
// For mkfs, fsck repairs and tests; it checks nothing about the rest of the volume.
Status WriteLabel(const std::string& disk_path, const Label& label);

// Where the metadata store of the volume lives (inside disk 0).
std::string MetaPath(const Label& label);

struct OpenOptions {
  // Wraps each opened disk before the volume uses it (emulation, fault injection). Identity when
  // empty.
  std::function<std::unique_ptr<Disk>(std::unique_ptr<Disk> disk, uint32_t index)> wrap_disk;
  // Queue depth of each disk's io_uring.
  uint32_t ring_entries = 256;
};

class Volume {
 public:
  // `any_disk` may be any disk of the volume: its label names the others, and each of them must
  // carry a label of the same volume with the expected index ("disk 2 /x/d2 belongs to another
  // volume", "... holds index 3, expected 2", "... has no tipfs label").
  static Result<std::unique_ptr<Volume>> Open(const std::string& any_disk, OpenOptions options);

  // Builds a volume over disks the caller made (tests: in-memory or fault-injecting disks).
  Volume(Label label, std::vector<std::unique_ptr<Disk>> disks);
  ~Volume();

  const Label& label() const { return label_; }
  const Layout& layout() const { return layout_; }
  uint32_t disk_count() const { return static_cast<uint32_t>(disks_.size()); }
  Disk* disk(uint32_t index) const { return disks_[index].get(); }
  std::vector<Disk*> disks() const;

 private:
  Label label_;
  Layout layout_;
  std::vector<std::unique_ptr<Disk>> disks_;
  // One io_uring per PosixDisk that Open made (none for caller-made disks). The destructor drops
  // disks_ first: they drain their ops on these rings.
  std::vector<std::unique_ptr<IoRing>> rings_;
};

}  // namespace tipfs::stripe
