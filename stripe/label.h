// Label: what every disk of a volume records about the volume, so that any disk names the others
// and a missing, foreign or reordered disk is found before anything changes.
//
// A directory disk keeps it in the file <dir>/tipfs-label; a RADOS disk in the object
// "tipfs-label" of its pool namespace (the same object carries the mount's lease lock, see
// rados_lease.h). A volume whose metadata directory is not one of its disks (a volume of RADOS
// disks only) keeps a copy in <meta dir>/tipfs-volume, so that directory names the volume too.
//
// Format version 1 is a volume of directories with its metadata on disk 0, readable by every
// tipfs; version 2 adds RADOS disks, `meta` (the metadata directory) and `rados_object_size`.
// This tipfs writes version 1 whenever the volume fits it.
//
// Errors (one line, naming the disk): ENOENT missing directory or label, ENOTDIR not a
// directory, EUCLEAN corrupt label, EPROTONOSUPPORT unknown format version, and the errors of
// reaching a RADOS cluster (EIO when it does not answer, ENOENT for a missing pool).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace tipfs::stripe {

class RadosConnections;

constexpr uint32_t kFormatVersion = 2;  // the newest this tipfs reads and writes
constexpr uint32_t kDefaultStripeUnit = 64 * 1024;
// RADOS disks cut each file's per-disk object into objects of this many bytes (the object size
// RBD and CephFS use); see docs/DESIGN.md, "RADOS disks".
constexpr uint32_t kDefaultRadosObjectSize = 4u << 20;

constexpr char kLabelName[] = "tipfs-label";       // file in a directory, object in a namespace
constexpr char kHomeLabelName[] = "tipfs-volume";  // copy in a metadata directory

struct Label {
  std::string volume_uuid;
  uint32_t index = 0;
  uint32_t count = 0;
  uint32_t stripe_unit = kDefaultStripeUnit;
  uint32_t format_version = kFormatVersion;
  // In index order: absolute directory paths and rados: names (stripe/disk_name.h).
  std::vector<std::string> disk_names;
  // The local directory holding the metadata store and the pid file; empty: disk 0.
  std::string meta_dir;
  uint32_t rados_object_size = kDefaultRadosObjectSize;

  bool has_rados_disks() const;
};

// The oldest format that can express `label` (1 or 2).
uint32_t RequiredFormatVersion(const Label& label);

// Where the metadata store, the pid file and the home copy of the label live.
std::string HomeDir(const Label& label);
// Where the metadata store of the volume lives: HomeDir/meta.
std::string MetaPath(const Label& label);

// The label's text: one key=value per line and an FNV-1a checksum line covering the rest.
std::string SerializeLabel(const Label& label);
// `where` names the file or object in messages.
Result<Label> ParseLabel(const std::string& where, const std::string& text);

// Reads and checks one disk's label. `rados` connects to the clusters of RADOS disks (a
// temporary registry when null).
Result<Label> ReadLabel(const std::string& disk_name, RadosConnections* rados = nullptr);
// Replaces one disk's label atomically (a directory: temporary file, fsync, rename, fsync of the
// directory; RADOS: one write_full). For mkfs, fsck repairs and tests; it checks nothing about
// the rest of the volume.
Status WriteLabel(const std::string& disk_name, const Label& label,
                  RadosConnections* rados = nullptr);

// The copy in a metadata directory that is not a disk.
Result<Label> ReadHomeLabel(const std::string& dir);
Status WriteHomeLabel(const std::string& dir, const Label& label);

}  // namespace tipfs::stripe
