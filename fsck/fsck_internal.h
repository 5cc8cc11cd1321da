// Internals of fsck shared by its implementation files (not part of the interface).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "fsck/fsck.h"
#include "meta/meta_store.h"
#include "stripe/volume.h"

namespace tipfs::fsck {

// What the object pass needs to know about the inodes: regular files with their sizes, and
// every other inode number that exists (directories, symlinks, ..., and inodes whose record is
// damaged: their objects are not judged).
struct InodeMap {
  std::map<meta::Ino, uint64_t> file_sizes;
  std::set<meta::Ino> non_files;
  std::set<meta::Ino> unreadable;
};

// Plans the namespace repairs from one scan of the store: every problem with the repair that
// fixes it, the batch that carries the repairs, and the orphans to reclaim (objects first, then
// the record). Applies nothing.
struct NamespacePlan {
  std::vector<Problem> problems;
  meta::RepairBatch batch;
  std::vector<meta::Ino> reclaim;  // orphans: remove objects, then meta::MetaStore::DeleteInode
  std::vector<size_t> reclaim_problem;  // for each of `reclaim`, its index in `problems`
  InodeMap after;                       // the inodes as they will be once the plan is applied
  uint64_t inodes = 0;
  uint64_t entries = 0;
  uint64_t expected_inode_count = 0;  // records once the plan is applied (before reclaiming)
};
NamespacePlan PlanNamespace(const meta::StoreScan& scan);

// Inode numbers of the scan as the object pass sees them, without any repair.
InodeMap InodesOf(const meta::StoreScan& scan);

// The object pass over every disk; appends problems, repairs when `repair`.
void CheckObjects(stripe::Volume* volume, const InodeMap& inodes, bool repair, CheckResult* result,
                  const CheckOptions& options);

// The parts of every RADOS disk's objects against their heads' records (fsck/rados_check.cc).
void CheckRadosParts(stripe::Volume* volume, bool repair, CheckResult* result,
                     const CheckOptions& options);

// Adds a settled problem to the result and reports it.
void Settle(Problem problem, CheckResult* result, const CheckOptions& options);

}  // namespace tipfs::fsck
