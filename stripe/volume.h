// Volume: N disks (directories and RADOS pools, stripe/disk_name.h) that together hold a tipfs
// file system, and a local metadata directory.
//
// A directory disk holds
//   tipfs-label       the label (stripe/label.h)
//   objects/          one sparse object per file (objects/<2 hex>/<16 hex inode>)
// a RADOS disk holds the object tipfs-label (which also carries the mount's lease) and the parts
// of each file's object (stripe/rados_disk.h). The metadata directory (disk 0, or the one the
// label names) holds
//   meta/             the metadata store (RocksDB), created and opened by meta
//   tipfs.pid         while mounted
//   tipfs-volume      a copy of the label, when it is not a disk
//
// Open validates everything and fails with one message that names the disk and the problem,
// changing nothing when it fails. A Volume is thread-safe once open.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stripe/disk.h"
#include "stripe/label.h"
#include "stripe/layout.h"
#include "stripe/rados_cluster.h"
#include "stripe/rados_lease.h"
#include "stripe/rados_stats.h"

namespace tipfs::stripe {

class IoRing;
class RadosDisk;

struct OpenOptions {
  // Wraps each opened disk before the volume uses it (emulation, fault injection). Identity when
  // empty.
  std::function<std::unique_ptr<Disk>(std::unique_ptr<Disk> disk, uint32_t index)> wrap_disk;
  // Queue depth of each directory disk's io_uring.
  uint32_t ring_entries = 256;
  // RADOS disks: the operation timeout, and the lease that keeps other mounts out.
  RadosClientOptions rados;
  RadosLeaseOptions lease;
  bool take_leases = true;
  // Aligned reads bypass the backing file system's page cache (O_DIRECT) where it supports it
  // (stripe/posix_disk.h); the rest stays buffered.
  bool direct_io = false;
};

// Reads the label of `any_disk` (a disk of the volume, or its metadata directory) and returns it
// with every name as this host sees the volume: the disk (or directory) the caller named replaces
// the name recorded at mkfs, so a volume whose directories moved still opens. `index` is that
// disk's, or 0 for a metadata directory. Checks nothing about the other disks.
Result<Label> IdentifyVolume(const std::string& any_disk, RadosConnections* rados = nullptr);

class Volume {
 public:
  // `any_disk` may be any disk of the volume, or its metadata directory: the label names the
  // others, and each of them must carry a label of the same volume with the expected index
  // ("disk 2 /x/d2 belongs to another volume", "... holds index 3, expected 2", "... has no tipfs
  // label", "rados:p/ns1 is mounted by tipfs pid 12 on host h1").
  static Result<std::unique_ptr<Volume>> Open(const std::string& any_disk, OpenOptions options);

  // Builds a volume over disks the caller made (tests: in-memory or fault-injecting disks).
  Volume(Label label, std::vector<std::unique_ptr<Disk>> disks);
  ~Volume();

  const Label& label() const { return label_; }
  const Layout& layout() const { return layout_; }
  uint32_t disk_count() const { return static_cast<uint32_t>(disks_.size()); }
  Disk* disk(uint32_t index) const { return disks_[index].get(); }
  std::vector<Disk*> disks() const;
  // The RADOS disk under disk `index`'s wrappers, or null when it is a directory (or the volume
  // was built from caller-made disks).
  RadosDisk* rados_disk(uint32_t index) const {
    return index < rados_disks_.size() ? rados_disks_[index] : nullptr;
  }
  // The statistics of every RADOS disk (empty for a volume of directories).
  std::vector<NamedRadosStats> rados_stats() const;

 private:
  Label label_;
  Layout layout_;
  std::vector<std::unique_ptr<Disk>> disks_;
  std::vector<RadosDisk*> rados_disks_;  // by index; owned through disks_
  // One io_uring per PosixDisk that Open made (none for caller-made disks). The destructor drops
  // disks_ first: they drain their ops on these rings.
  std::vector<std::unique_ptr<IoRing>> rings_;
};

}  // namespace tipfs::stripe
