// fsck's namespace pass: plans the repairs of the metadata store from one scan. Everything here
// works on the scan in memory; fsck.cc applies the plan. The plan is made the same way with and
// without --repair, so a check reports exactly what a repair would do.
#include <sys/stat.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include "fsck/fsck_internal.h"
#include "meta/meta_encoding.h"

namespace tipfs::fsck {

using meta::DirEntry;
using meta::EntryRecord;
using meta::Ino;
using meta::Inode;
using meta::kRootIno;

namespace {

constexpr char kLostFound[] = "lost+found";

const char* TypeName(uint32_t type) {
  switch (type) {
    case S_IFREG:
      return "file";
    case S_IFDIR:
      return "directory";
    case S_IFLNK:
      return "symlink";
    case S_IFIFO:
      return "fifo";
    case S_IFSOCK:
      return "socket";
    case S_IFCHR:
      return "character device";
    case S_IFBLK:
      return "block device";
    default:
      return "unknown type";
  }
}

std::string Quoted(const std::string& name) { return "\"" + name + "\""; }

// The planner's working state: the scan indexed, and the repairs decided so far.
class Planner {
 public:
  explicit Planner(const meta::StoreScan& scan) : scan_(scan) {}

  NamespacePlan Run() {
    Index();
    CheckRoot();
    CheckEntries();
    CheckDirectoryNames();
    Reattach();
    CheckFiles();
    CheckDirectories();
    CheckStrayRecords();
    CheckSuperblock();
    Finish();
    return std::move(plan_);
  }

 private:
  void Add(ProblemKind kind, std::string description, std::string repair = "") {
    Problem p;
    p.kind = kind;
    p.description = std::move(description);
    p.repairable = !repair.empty();
    p.repair = std::move(repair);
    plan_.problems.push_back(std::move(p));
  }

  void Index() {
    for (const Inode& inode : scan_.inodes) {
      inodes_[inode.ino] = inode;
      max_ino_ = std::max(max_ino_, inode.ino);
    }
    plan_.inodes = scan_.inodes.size();
    plan_.entries = scan_.entries.size();
    for (const meta::DamagedRecord& d : scan_.damaged) {
      Add(ProblemKind::kDamagedRecord, d.problem.message());
      if (d.key.size() >= 9) {
        const Ino ino = meta::encoding::KeyIno(d.key);
        if (d.key[0] == meta::encoding::kInodeTag && d.key.size() == 9) {
          unreadable_.insert(ino);
          max_ino_ = std::max(max_ino_, ino);
        }
      }
    }
    for (const EntryRecord& e : scan_.entries) {
      max_ino_ = std::max({max_ino_, e.parent, e.entry.ino});
    }
    orphans_.insert(scan_.orphans.begin(), scan_.orphans.end());
    for (Ino ino : scan_.orphans) max_ino_ = std::max(max_ino_, ino);
    for (Ino ino : scan_.symlink_targets) max_ino_ = std::max(max_ino_, ino);
    for (Ino ino : scan_.xattr_owners) max_ino_ = std::max(max_ino_, ino);
    scanned_max_ino_ = max_ino_;
  }

  void Modified(Ino ino) { modified_.insert(ino); }

  // Plans the reclamation of an orphan; call right after adding its problem.
  void Reclaim(Ino ino) {
    plan_.reclaim.push_back(ino);
    plan_.reclaim_problem.push_back(plan_.problems.size() - 1);
  }

  void DeleteEntry(const EntryRecord& e) {
    plan_.batch.delete_entries.emplace_back(e.parent, e.entry.name);
  }

  void CheckRoot() {
    auto root = inodes_.find(kRootIno);
    if (root == inodes_.end()) return;  // MetaStore::Open refuses such a store
    if (root->second.parent != kRootIno) {
      Add(ProblemKind::kRoot,
          "root directory: parent pointer says " + std::to_string(root->second.parent) +
              ", should be itself",
          "parent pointer set to 1");
      root->second.parent = kRootIno;
      Modified(kRootIno);
    }
  }

  void CheckEntries() {
    for (const EntryRecord& e : scan_.entries) {
      const Ino parent = e.parent;
      const Ino child = e.entry.ino;
      const std::string where =
          "directory " + std::to_string(parent) + ": entry " + Quoted(e.entry.name);
      if (unreadable_.count(parent) == 0) {
        auto p = inodes_.find(parent);
        if (p == inodes_.end()) {
          Add(ProblemKind::kDanglingEntry,
              "entry " + Quoted(e.entry.name) + " (inode " + std::to_string(child) +
                  ") is in directory " + std::to_string(parent) + ", which does not exist",
              "entry deleted");
          DeleteEntry(e);
          continue;
        }
        if (!S_ISDIR(p->second.mode)) {
          Add(ProblemKind::kDanglingEntry,
              "entry " + Quoted(e.entry.name) + " is in inode " + std::to_string(parent) +
                  ", which is a " + TypeName(p->second.mode & S_IFMT) + ", not a directory",
              "entry deleted");
          DeleteEntry(e);
          continue;
        }
      }
      if (unreadable_.count(child) != 0) continue;  // reported as a damaged record
      auto c = inodes_.find(child);
      if (c == inodes_.end()) {
        Add(ProblemKind::kDanglingEntry,
            where + " names inode " + std::to_string(child) + ", which does not exist",
            "entry deleted");
        DeleteEntry(e);
        continue;
      }
      if (child == kRootIno || child == parent) {
        Add(ProblemKind::kDirectoryNames,
            where + " names " + (child == kRootIno ? "the root directory" : "its own directory"),
            "entry deleted");
        DeleteEntry(e);
        continue;
      }
      const uint32_t type = c->second.mode & S_IFMT;
      if (e.entry.type != type) {
        Add(ProblemKind::kEntryType,
            where + " says " + TypeName(e.entry.type) + ", but inode " + std::to_string(child) +
                " is a " + TypeName(type),
            "entry type set to " + std::string(TypeName(type)));
        plan_.batch.put_entries.push_back(EntryRecord{parent, DirEntry{e.entry.name, child, type}});
      }
      entries_in_[parent].insert(e.entry.name);
      if (S_ISDIR(c->second.mode)) {
        directory_names_[child].push_back(&e);
      } else {
        ++file_names_[child];
      }
    }
  }

  void CheckDirectoryNames() {
    for (auto& [ino, inode] : inodes_) {
      if (!S_ISDIR(inode.mode) || ino == kRootIno) continue;
      auto names = directory_names_.find(ino);
      if (names == directory_names_.end()) continue;
      const EntryRecord* keep = names->second.front();
      for (const EntryRecord* e : names->second) {
        if (e->parent == inode.parent) {
          keep = e;
          break;
        }
      }
      for (const EntryRecord* e : names->second) {
        if (e == keep) continue;
        Add(ProblemKind::kDirectoryNames,
            "directory " + std::to_string(ino) + " has " + std::to_string(names->second.size()) +
                " names; entry " + Quoted(e->entry.name) + " in directory " +
                std::to_string(e->parent) + " is one too many",
            "entry deleted");
        DeleteEntry(*e);
        entries_in_[e->parent].erase(e->entry.name);
      }
      name_of_[ino] = keep;
      children_[keep->parent].insert(ino);
      if (inode.parent != keep->parent) {
        Add(ProblemKind::kParentPointer,
            "directory " + std::to_string(ino) + ": parent pointer says " +
                std::to_string(inode.parent) + ", but it is named in directory " +
                std::to_string(keep->parent),
            "parent pointer set to " + std::to_string(keep->parent));
        inode.parent = keep->parent;
        Modified(ino);
      }
    }
  }

  void Mark(Ino start) {
    std::deque<Ino> queue{start};
    while (!queue.empty()) {
      Ino dir = queue.front();
      queue.pop_front();
      if (!reached_.insert(dir).second) continue;
      auto kids = children_.find(dir);
      if (kids == children_.end()) continue;
      for (Ino kid : kids->second) queue.push_back(kid);
    }
  }

  bool IsRemovedDirectory(Ino ino, const Inode& inode) const {
    // rmdir'ed while open (or a cwd): nameless, no links, empty. Reclaimed, not reattached.
    auto inside = entries_in_.find(ino);
    return name_of_.count(ino) == 0 && inode.nlink == 0 &&
           (inside == entries_in_.end() || inside->second.empty());
  }

  // The /lost+found directory, created in the plan when missing; 0 when its name is taken by
  // something that is not a directory.
  Ino LostFound() {
    if (lost_found_ != 0) return lost_found_;
    for (const EntryRecord& e : scan_.entries) {
      if (e.parent != kRootIno || e.entry.name != kLostFound) continue;
      auto inode = inodes_.find(e.entry.ino);
      if (inode != inodes_.end() && S_ISDIR(inode->second.mode) && reached_.count(e.entry.ino)) {
        return lost_found_ = e.entry.ino;
      }
      return 0;
    }
    Inode dir;
    dir.ino = std::max(scan_.next_ino, max_ino_ + 1);
    max_ino_ = dir.ino;
    dir.mode = S_IFDIR | 0700;
    dir.nlink = 2;
    dir.parent = kRootIno;
    dir.atime = dir.mtime = dir.ctime = meta::Time::Now();
    inodes_[dir.ino] = dir;
    Modified(dir.ino);
    plan_.batch.put_entries.push_back(
        EntryRecord{kRootIno, DirEntry{kLostFound, dir.ino, S_IFDIR}});
    entries_in_[kRootIno].insert(kLostFound);
    children_[kRootIno].insert(dir.ino);
    reached_.insert(dir.ino);
    return lost_found_ = dir.ino;
  }

  // Enters `ino` into /lost+found as "#<ino>"; returns the path, or "" when impossible.
  std::string Attach(Ino ino) {
    const Ino lost_found = LostFound();
    if (lost_found == 0) return "";
    std::string name = "#" + std::to_string(ino);
    for (int n = 1; entries_in_[lost_found].count(name) != 0; ++n) {
      name = "#" + std::to_string(ino) + "." + std::to_string(n);
    }
    entries_in_[lost_found].insert(name);
    const uint32_t type = inodes_[ino].mode & S_IFMT;
    plan_.batch.put_entries.push_back(EntryRecord{lost_found, DirEntry{name, ino, type}});
    return std::string("/") + kLostFound + "/" + name;
  }

  void Reattach() {
    Mark(kRootIno);
    for (Ino ino : unreadable_) Mark(ino);  // cannot judge what hangs below a damaged record
    for (auto& [ino, inode] : inodes_) {
      if (!S_ISDIR(inode.mode) || reached_.count(ino) != 0) continue;
      if (IsRemovedDirectory(ino, inode)) continue;
      // Climb to the top of the unreachable part: a nameless directory, or the member of a
      // cycle of names whose entry closes the cycle.
      Ino top = ino;
      std::set<Ino> seen{top};
      bool cycle = false;
      while (true) {
        auto name = name_of_.find(top);
        if (name == name_of_.end()) break;
        const Ino parent = name->second->parent;
        if (seen.count(parent) != 0) {
          cycle = true;
          break;
        }
        seen.insert(parent);
        top = parent;
      }
      std::string description = "directory " + std::to_string(top) +
                                " is not reachable from the root" +
                                (cycle ? " (its names form a cycle)" : "");
      const std::string path = Attach(top);
      if (path.empty()) {
        Add(ProblemKind::kUnreachable,
            description + "; " + kLostFound + " is taken by something that is not a directory");
        Mark(top);  // reported once; do not report what hangs below it again
        continue;
      }
      if (cycle) {
        const EntryRecord* old = name_of_[top];
        DeleteEntry(*old);
        entries_in_[old->parent].erase(old->entry.name);
        children_[old->parent].erase(top);
      }
      Add(ProblemKind::kUnreachable, description, "moved to " + path);
      inodes_[top].parent = lost_found_;
      Modified(top);
      children_[lost_found_].insert(top);
      Mark(top);
    }
  }

  void CheckFiles() {
    for (auto& [ino, inode] : inodes_) {
      if (S_ISDIR(inode.mode)) continue;
      const std::string what =
          std::string(TypeName(inode.mode & S_IFMT)) + " " + std::to_string(ino);
      const uint32_t names = file_names_[ino];
      const bool marked = orphans_.count(ino) != 0;
      if (names == 0) {
        if (inode.nlink == 0) {
          Add(ProblemKind::kOrphan,
              what + ": unlinked" +
                  (marked ? ", its data awaits reclamation" : ", and not marked as an orphan"),
              "data and record reclaimed");
          Reclaim(ino);
          continue;
        }
        const std::string path = Attach(ino);
        if (path.empty()) {
          Add(ProblemKind::kUnreachable,
              what + ": link count " + std::to_string(inode.nlink) + ", but no entry names it");
          continue;
        }
        Add(ProblemKind::kUnreachable,
            what + ": link count " + std::to_string(inode.nlink) + ", but no entry names it",
            "moved to " + path + ", link count 1");
        inode.nlink = 1;
        Modified(ino);
        if (marked) plan_.batch.clear_orphans.push_back(ino);
        continue;
      }
      if (inode.nlink != names) {
        Add(ProblemKind::kLinkCount,
            what + ": link count " + std::to_string(inode.nlink) + ", but " +
                std::to_string(names) + (names == 1 ? " entry names" : " entries name") + " it",
            "link count set to " + std::to_string(names));
        inode.nlink = names;
        Modified(ino);
      }
      if (marked) {
        Add(ProblemKind::kStrayRecord, what + ": marked as an orphan, but entries name it",
            "orphan mark removed");
        plan_.batch.clear_orphans.push_back(ino);
      }
    }
  }

  void CheckDirectories() {
    for (auto& [ino, inode] : inodes_) {
      if (!S_ISDIR(inode.mode)) continue;
      const bool marked = orphans_.count(ino) != 0;
      if (ino != kRootIno && reached_.count(ino) == 0 && IsRemovedDirectory(ino, inode)) {
        Add(ProblemKind::kOrphan,
            "directory " + std::to_string(ino) + ": removed" +
                (marked ? ", its record awaits reclamation" : ", and not marked as an orphan"),
            "record reclaimed");
        Reclaim(ino);
        continue;
      }
      auto kids = children_.find(ino);
      const uint32_t expected = 2 + (kids == children_.end() ? 0 : kids->second.size());
      if (inode.nlink != expected) {
        Add(ProblemKind::kLinkCount,
            "directory " + std::to_string(ino) + ": link count " + std::to_string(inode.nlink) +
                ", but it has " + std::to_string(expected - 2) + " subdirectories (expected " +
                std::to_string(expected) + ")",
            "link count set to " + std::to_string(expected));
        inode.nlink = expected;
        Modified(ino);
      }
      if (marked) {
        Add(ProblemKind::kStrayRecord,
            "directory " + std::to_string(ino) + ": marked as an orphan, but it is in the tree",
            "orphan mark removed");
        plan_.batch.clear_orphans.push_back(ino);
      }
    }
  }

  void CheckStrayRecords() {
    std::set<Ino> strays;
    auto stray = [&](Ino ino, const char* record) {
      if (inodes_.count(ino) != 0 || unreadable_.count(ino) != 0) return false;
      Add(ProblemKind::kStrayRecord,
          std::string(record) + " of inode " + std::to_string(ino) + ", which does not exist",
          "record deleted");
      if (strays.insert(ino).second) plan_.batch.delete_inodes.push_back(ino);
      return true;
    };
    for (Ino ino : scan_.orphans) stray(ino, "orphan mark");
    for (Ino ino : scan_.xattr_owners) stray(ino, "extended attributes");
    std::set<Ino> with_target(scan_.symlink_targets.begin(), scan_.symlink_targets.end());
    for (Ino ino : scan_.symlink_targets) {
      if (stray(ino, "symlink target")) continue;
      auto inode = inodes_.find(ino);
      if (inode != inodes_.end() && !S_ISLNK(inode->second.mode)) {
        Add(ProblemKind::kStrayRecord, "inode " + std::to_string(ino) + " is a " +
                                           TypeName(inode->second.mode & S_IFMT) +
                                           " but has a symlink target record");
      }
    }
    for (const auto& [ino, inode] : inodes_) {
      if (S_ISLNK(inode.mode) && with_target.count(ino) == 0) {
        Add(ProblemKind::kSymlinkTarget, "symlink " + std::to_string(ino) + " has no target");
      }
    }
  }

  void CheckSuperblock() {
    if (scan_.next_ino <= scanned_max_ino_) {
      Add(ProblemKind::kSuperblock,
          "superblock: next inode number " + std::to_string(scan_.next_ino) + ", but inode " +
              std::to_string(scanned_max_ino_) + " is in use",
          "next inode number set to " + std::to_string(max_ino_ + 1));
    }
    if (scan_.next_ino <= max_ino_) plan_.batch.next_ino = max_ino_ + 1;
    const uint64_t records = scan_.inodes.size() + unreadable_.size();
    if (scan_.inode_count != records) {
      Add(ProblemKind::kSuperblock,
          "superblock: inode count " + std::to_string(scan_.inode_count) + ", but " +
              std::to_string(records) + " inode records exist",
          "inode count corrected");
    }
    plan_.expected_inode_count = inodes_.size() + unreadable_.size();
    if (scan_.inode_count != plan_.expected_inode_count) {
      plan_.batch.inode_count = plan_.expected_inode_count;
    }
  }

  void Finish() {
    for (Ino ino : modified_) plan_.batch.put_inodes.push_back(inodes_[ino]);
    std::set<Ino> reclaimed(plan_.reclaim.begin(), plan_.reclaim.end());
    for (const auto& [ino, inode] : inodes_) {
      if (reclaimed.count(ino) != 0) continue;
      if (S_ISREG(inode.mode)) {
        plan_.after.file_sizes[ino] = inode.size;
      } else {
        plan_.after.non_files.insert(ino);
      }
    }
    plan_.after.unreadable = unreadable_;
  }

  const meta::StoreScan& scan_;
  NamespacePlan plan_;
  std::map<Ino, Inode> inodes_;
  std::set<Ino> unreadable_;  // inode records that do not decode
  std::set<Ino> orphans_;
  std::set<Ino> modified_;
  Ino max_ino_ = kRootIno;          // highest inode number in use, lost+found included
  Ino scanned_max_ino_ = kRootIno;  // the same in the store as scanned
  std::map<Ino, std::set<std::string>> entries_in_;  // kept entry names per directory
  std::map<Ino, std::vector<const EntryRecord*>> directory_names_;
  std::map<Ino, uint32_t> file_names_;
  std::map<Ino, const EntryRecord*> name_of_;  // a directory's one kept name
  std::map<Ino, std::set<Ino>> children_;      // subdirectories by kept names
  std::set<Ino> reached_;
  Ino lost_found_ = 0;
};

}  // namespace

NamespacePlan PlanNamespace(const meta::StoreScan& scan) { return Planner(scan).Run(); }

InodeMap InodesOf(const meta::StoreScan& scan) {
  InodeMap map;
  for (const Inode& inode : scan.inodes) {
    if (S_ISREG(inode.mode)) {
      map.file_sizes[inode.ino] = inode.size;
    } else {
      map.non_files.insert(inode.ino);
    }
  }
  for (const meta::DamagedRecord& d : scan.damaged) {
    if (d.key.size() == 9 && d.key[0] == meta::encoding::kInodeTag) {
      map.unreadable.insert(meta::encoding::KeyIno(d.key));
    }
  }
  return map;
}

}  // namespace tipfs::fsck
