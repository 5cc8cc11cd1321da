// fsck: checks a tipfs volume and repairs what it safely can (`tipfs fsck [--repair] DISK`).
//
// What is checked, in order: the label of every disk (one damaged or missing label is rewritten
// from the others); the metadata store (damaged records, superblock counters, the root, every
// directory entry against the inode it names, directory names and parent pointers, reachability
// from the root, link counts, orphans and records of missing inodes); then every object on every
// disk against the inode it belongs to (objects of no inode are leaked space, objects longer
// than their file's share hold bytes past the end of file; missing or short objects are holes,
// which are fine). Each problem is one line; --repair fixes what it safely can (delete leaked
// objects, trim over-long ones, fix link counts and parent pointers, delete dangling entries,
// reclaim orphans, move unreachable inodes to /lost+found) and says what it did. Damaged records
// and foreign labels are reported and left alone: guessing could destroy data.
//
// Exit codes as e2fsck's: 0 clean, 1 problems found and all repaired, 4 problems left, 8 an
// operational error (no volume, mounted volume, I/O error while checking).
//
// The same object pass runs at mount after an unclean shutdown (RepairObjects): a daemon killed
// between writing an object and recording the new size leaves bytes past the end of file that a
// later extending write would otherwise expose inside a hole.
//
// Thread-safety: none needed; a check owns the volume (the metadata store's lock keeps the
// daemon and other checks out).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "meta/meta_store.h"
#include "stripe/volume.h"
#include "util/status.h"

namespace tipfs::fsck {

enum class ProblemKind : uint8_t {
  kLabel,            // a disk's label is missing, damaged or disagrees
  kStoreDamaged,     // the metadata store cannot be opened or read
  kDamagedRecord,    // a record that does not decode
  kSuperblock,       // inode counter or count wrong
  kRoot,             // root directory's own record is wrong
  kDanglingEntry,    // an entry in a missing directory or naming a missing inode
  kEntryType,        // an entry's file type differs from its inode's
  kDirectoryNames,   // a directory with more than one name, or an entry naming the root
  kParentPointer,    // a directory's parent pointer differs from where it is named
  kUnreachable,      // an inode that no path from the root reaches
  kLinkCount,        // nlink differs from the names (and subdirectories) counted
  kOrphan,           // unlinked inode whose data awaits reclamation (normal after a crash)
  kStrayRecord,      // an orphan mark, symlink target or xattr of a missing or linked inode
  kSymlinkTarget,    // a symlink without its target record
  kLeakedObject,     // an object that belongs to no file
  kObjectTooLong,    // an object longer than its file's share
  kObjectError,      // an object or disk that cannot be read
  kUnrecordedPart,   // a part of a RADOS disk's object that its head does not record
  kStalePartRecord,  // a head's record of a part that does not exist
};
const char* ProblemKindName(ProblemKind kind);

struct Problem {
  ProblemKind kind = ProblemKind::kLabel;
  std::string description;  // "inode 42: link count 3, but 2 entries name it"
  bool repairable = false;
  std::string repair;  // what --repair does ("link count set to 2")
  bool repaired = false;
  // One line: the description, then "; repaired: ..." or "; repairable with --repair" or
  // "; left as is".
  std::string Line() const;
};

struct CheckOptions {
  bool repair = false;
  // Called for every problem once it is settled (repaired or not). May be empty.
  std::function<void(const Problem&)> report;
};

struct CheckResult {
  std::vector<Problem> problems;
  uint64_t inodes = 0;   // inode records seen
  uint64_t entries = 0;  // directory entries seen
  uint64_t objects = 0;  // objects seen on all disks
  Status error;          // an operational error that stopped the check (exit code 8)

  size_t repaired() const;
  size_t left() const;
  bool Has(ProblemKind kind) const;
  // 0 clean, 1 everything found was repaired, 4 problems left, 8 operational error.
  int ExitCode() const;
};

// Checks the namespace in `meta` and the objects on `volume` (both already open; the store must
// not be in use by a file system). With options.repair, repairs as described above.
CheckResult CheckVolume(stripe::Volume* volume, meta::MetaStore* meta, const CheckOptions& options);

// The object pass alone, always repairing: deletes objects of no inode and trims objects longer
// than their file's share. For the mount after an unclean shutdown, after orphans were reclaimed.
CheckResult RepairObjects(stripe::Volume* volume, meta::MetaStore* meta);

struct FsckOptions {
  std::string disk;  // any disk of the volume
  CheckOptions check;
  // The volume's daemon did not exit cleanly (its pid file is still there): the store's log may
  // end in a torn record, which is then no damage (see MetaStoreOptions).
  bool after_unclean_shutdown = false;
};

// `tipfs fsck`: labels, then opens the volume and its store (refusing a mounted volume with an
// operational error), then CheckVolume.
CheckResult RunFsck(const FsckOptions& options);

}  // namespace tipfs::fsck
