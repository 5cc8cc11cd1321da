// fsck over an in-memory volume: each kind of damage is made on purpose, then a check must report
// it (exit 4), a repair must fix it and say so (exit 1), a second check must find the volume clean
// (exit 0), and the file system must work on the repaired volume.
#include "fsck/fsck.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <sys/stat.h>

#include <string>

#include "tests/support/volume_rig.h"

namespace tipfs::testing {
namespace {

using fsck::ProblemKind;
using fusefs::Caller;
using meta::Ino;
using meta::kRootIno;

std::string Pattern(size_t size, int seed) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>(seed * 31 + i * 7 + i / 4096);
  return s;
}

class FsckTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(rig_.Open().ok()); }

  fusefs::FileSystem* fs() { return rig_.fs(); }

  Ino MakeFile(Ino parent, const std::string& name, const std::string& data) {
    auto opened = fs()->Create(Caller{}, parent, name, 0644, O_RDWR);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    if (!opened.ok()) return 0;
    if (!data.empty()) {
      EXPECT_TRUE(fs()->Write(opened->inode.ino, 0, data.data(), data.size()).ok());
    }
    EXPECT_TRUE(fs()->Release(opened->inode.ino).ok());
    return opened->inode.ino;
  }
  Ino MakeDir(Ino parent, const std::string& name) {
    auto dir = fs()->MakeNode(Caller{}, parent, name, S_IFDIR | 0755, 0);
    EXPECT_TRUE(dir.ok()) << dir.status().ToString();
    return dir.ok() ? dir->ino : 0;
  }
  std::string ReadAll(Ino ino) {
    std::string out(4 << 20, '\0');
    auto n = fs()->Read(cache::ReadContext{}, ino, 0, out.size(), out.data());
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    out.resize(n.ok() ? *n : 0);
    return out;
  }
  meta::Inode Get(Ino ino) {
    auto inode = rig_.meta()->Get(ino);
    EXPECT_TRUE(inode.ok()) << inode.status().ToString();
    return inode.ok() ? *inode : meta::Inode{};
  }
  void Damage(const meta::RepairBatch& batch) { ASSERT_TRUE(rig_.meta()->ApplyRepair(batch).ok()); }

  fsck::CheckResult Check(bool repair) {
    fsck::CheckOptions options;
    options.repair = repair;
    return fsck::CheckVolume(rig_.volume(), rig_.meta(), options);
  }
  static std::string Lines(const fsck::CheckResult& r) {
    std::string out;
    for (const fsck::Problem& p : r.problems) {
      out += std::string(fsck::ProblemKindName(p.kind)) + ": " + p.Line() + "\n";
    }
    return out;
  }
  // Check reports `kind` (exit 4), repair fixes everything (exit 1), a second check is clean.
  void ExpectFound(ProblemKind kind) {
    fsck::CheckResult checked = Check(false);
    EXPECT_EQ(checked.ExitCode(), 4) << Lines(checked);
    EXPECT_TRUE(checked.Has(kind)) << Lines(checked);
    for (const fsck::Problem& p : checked.problems) EXPECT_FALSE(p.repaired) << p.Line();
    fsck::CheckResult repaired = Check(true);
    EXPECT_EQ(repaired.ExitCode(), 1) << Lines(repaired);
    EXPECT_TRUE(repaired.Has(kind)) << Lines(repaired);
    EXPECT_EQ(repaired.problems.size(), checked.problems.size()) << Lines(repaired);
    for (const fsck::Problem& p : repaired.problems) {
      EXPECT_TRUE(p.repaired) << p.Line();
      EXPECT_NE(p.Line().find("; repaired: "), std::string::npos) << p.Line();
    }
    fsck::CheckResult again = Check(false);
    EXPECT_EQ(again.ExitCode(), 0) << Lines(again);
  }
  // After a repair: the file system opens again and sees a consistent tree.
  void Remount() {
    ASSERT_TRUE(rig_.Open().ok());
    ASSERT_TRUE(fs()->Recover().ok());
  }

  VolumeRig rig_;
};

TEST_F(FsckTest, AHealthyVolumeIsClean) {
  Ino dir = MakeDir(kRootIno, "d");
  Ino file = MakeFile(dir, "f", Pattern(700'000, 1));
  ASSERT_TRUE(fs()->Link(file, kRootIno, "hard").ok());
  ASSERT_TRUE(fs()->MakeNode(Caller{}, dir, "s", S_IFLNK | 0777, 0, "f").ok());
  ASSERT_TRUE(fs()->SetXattr(file, "user.k", "v", 0).ok());
  fsck::CheckResult r = Check(false);
  EXPECT_EQ(r.ExitCode(), 0) << Lines(r);
  EXPECT_EQ(r.inodes, 4u);
  EXPECT_EQ(r.entries, 4u);
  EXPECT_EQ(r.objects, rig_.ObjectCount());
  EXPECT_EQ(Check(true).ExitCode(), 0);
}

TEST_F(FsckTest, LeakedObjectIsDeleted) {
  MakeFile(kRootIno, "f", Pattern(100'000, 2));
  const uint64_t before = rig_.ObjectCount();
  ASSERT_TRUE(rig_.disk(2)->Truncate(999'999, 12345).ok());  // an object of no inode
  ExpectFound(ProblemKind::kLeakedObject);
  EXPECT_FALSE(rig_.HasObjects(999'999));
  EXPECT_EQ(rig_.ObjectCount(), before);
}

TEST_F(FsckTest, ObjectLongerThanItsFileIsTrimmedAndTheDataKept) {
  const std::string data = Pattern(70'000, 3);  // one full unit on one disk, 4464 bytes on the next
  Ino ino = MakeFile(kRootIno, "f", data);
  const stripe::Layout& layout = rig_.volume()->layout();
  const uint32_t d = layout.DiskOfOffset(ino, 65536);
  ASSERT_TRUE(rig_.disk(d)->Truncate(ino, 65536).ok());  // bytes past the end of file
  ExpectFound(ProblemKind::kObjectTooLong);
  EXPECT_EQ(rig_.disk(d)->Contents(ino).size(), 70'000u - 65536u);
  EXPECT_EQ(ReadAll(ino), data);
}

TEST_F(FsckTest, WrongLinkCountsAreCorrected) {
  Ino dir = MakeDir(kRootIno, "d");
  Ino file = MakeFile(dir, "f", "x");
  ASSERT_TRUE(fs()->Link(file, kRootIno, "g").ok());
  meta::Inode f = Get(file), d = Get(dir), root = Get(kRootIno);
  f.nlink = 7;
  d.nlink = 9;
  root.nlink = 2;  // should be 3: d is a subdirectory
  Damage({.put_inodes = {f, d, root}});
  ExpectFound(ProblemKind::kLinkCount);
  EXPECT_EQ(Get(file).nlink, 2u);
  EXPECT_EQ(Get(dir).nlink, 2u);
  EXPECT_EQ(Get(kRootIno).nlink, 3u);
}

TEST_F(FsckTest, EntryOfAMissingInodeIsDeletedAndItsObjectsToo) {
  Ino gone = MakeFile(kRootIno, "gone", Pattern(200'000, 4));
  Ino kept = MakeFile(kRootIno, "kept", Pattern(5000, 5));
  Damage({.delete_inodes = {gone}});
  fsck::CheckResult checked = Check(false);
  EXPECT_TRUE(checked.Has(ProblemKind::kDanglingEntry)) << Lines(checked);
  EXPECT_TRUE(checked.Has(ProblemKind::kLeakedObject)) << Lines(checked);
  EXPECT_TRUE(checked.Has(ProblemKind::kSuperblock)) << Lines(checked);  // inode count
  ExpectFound(ProblemKind::kDanglingEntry);
  EXPECT_EQ(fs()->Lookup(kRootIno, "gone").error(), ENOENT);
  EXPECT_FALSE(rig_.HasObjects(gone));
  EXPECT_EQ(ReadAll(kept), Pattern(5000, 5));
}

TEST_F(FsckTest, UnreachableDirectoryMovesToLostFoundWithItsContents) {
  Ino dir = MakeDir(kRootIno, "lost");
  Ino file = MakeFile(dir, "inside", Pattern(90'000, 6));
  Damage({.delete_entries = {{kRootIno, "lost"}}});
  ExpectFound(ProblemKind::kUnreachable);
  Remount();
  auto lost_found = fs()->Lookup(kRootIno, "lost+found");
  ASSERT_TRUE(lost_found.ok()) << lost_found.status().ToString();
  auto moved = fs()->Lookup(lost_found->ino, "#" + std::to_string(dir));
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->ino, dir);
  EXPECT_EQ(moved->parent, lost_found->ino);
  auto inside = fs()->Lookup(dir, "inside");
  ASSERT_TRUE(inside.ok());
  EXPECT_EQ(ReadAll(file), Pattern(90'000, 6));
  EXPECT_EQ(Get(kRootIno).nlink, 3u);  // lost+found
  EXPECT_EQ(Get(lost_found->ino).nlink, 3u);
  // The repaired tree takes normal operations: the moved directory can be emptied and removed.
  ASSERT_TRUE(fs()->Unlink(dir, "inside").ok());
  ASSERT_TRUE(fs()->Rmdir(lost_found->ino, "#" + std::to_string(dir)).ok());
  Remount();  // the removed directory's record goes with the kernel's references
  EXPECT_EQ(Check(false).ExitCode(), 0);
}

TEST_F(FsckTest, DirectoryCycleIsBrokenIntoLostFound) {
  Ino a = MakeDir(kRootIno, "a");
  Ino b = MakeDir(a, "b");
  // Detach a from the root and name it inside b: a -> b -> a, reachable from nowhere.
  meta::Inode ia = Get(a);
  ia.parent = b;
  Damage({.put_inodes = {ia},
          .put_entries = {{b, meta::DirEntry{"a-again", a, S_IFDIR}}},
          .delete_entries = {{kRootIno, "a"}}});
  ExpectFound(ProblemKind::kUnreachable);
  Remount();
  auto lost_found = fs()->Lookup(kRootIno, "lost+found");
  ASSERT_TRUE(lost_found.ok());
  auto listing = fs()->ListDir(lost_found->ino);
  ASSERT_TRUE(listing.ok());
  ASSERT_EQ(listing->size(), 1u);
  // Whichever member was cut loose, the other hangs below it and both are reachable again.
  const Ino top = listing->front().ino;
  const Ino other = top == a ? b : a;
  EXPECT_TRUE(top == a || top == b);
  EXPECT_EQ(Get(other).parent, top);
  EXPECT_EQ(Get(top).parent, lost_found->ino);
}

TEST_F(FsckTest, NamelessFileWithLinksMovesToLostFound) {
  Ino file = MakeFile(kRootIno, "f", Pattern(3000, 7));
  Damage({.delete_entries = {{kRootIno, "f"}}});
  ExpectFound(ProblemKind::kUnreachable);
  Remount();
  auto lost_found = fs()->Lookup(kRootIno, "lost+found");
  ASSERT_TRUE(lost_found.ok());
  auto moved = fs()->Lookup(lost_found->ino, "#" + std::to_string(file));
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->nlink, 1u);
  EXPECT_EQ(ReadAll(file), Pattern(3000, 7));
}

TEST_F(FsckTest, OrphanLeftByACrashIsReclaimed) {
  auto opened = fs()->Create(Caller{}, kRootIno, "open-then-unlinked", 0644, O_RDWR);
  ASSERT_TRUE(opened.ok());
  const Ino ino = opened->inode.ino;
  const std::string data = Pattern(300'000, 8);
  ASSERT_TRUE(fs()->Write(ino, 0, data.data(), data.size()).ok());
  ASSERT_TRUE(fs()->Unlink(kRootIno, "open-then-unlinked").ok());
  rig_.Close();  // "crash": the handle is never released
  ASSERT_TRUE(rig_.Open().ok());
  ASSERT_TRUE(rig_.HasObjects(ino));
  ExpectFound(ProblemKind::kOrphan);
  EXPECT_FALSE(rig_.HasObjects(ino));
  EXPECT_EQ(rig_.meta()->Get(ino).error(), ENOENT);
  EXPECT_EQ(rig_.meta()->GetCounts()->inodes, 1u);
}

TEST_F(FsckTest, LowInodeCounterIsRaisedSoNumbersAreNotReused) {
  Ino file = MakeFile(kRootIno, "f", "data");
  Damage({.next_ino = file});  // the next create would reuse `file`'s number
  ExpectFound(ProblemKind::kSuperblock);
  Remount();
  Ino another = MakeFile(kRootIno, "g", "more");
  EXPECT_GT(another, file);
  EXPECT_EQ(ReadAll(file), "data");
}

TEST_F(FsckTest, EntryTypeParentPointerAndExtraDirectoryNamesAreFixed) {
  Ino d = MakeDir(kRootIno, "d");
  Ino e = MakeDir(kRootIno, "e");
  Ino file = MakeFile(kRootIno, "f", "x");
  meta::Inode id = Get(d);
  id.parent = e;  // wrong: d is named in the root
  Damage({.put_inodes = {id},
          .put_entries = {{kRootIno, meta::DirEntry{"f", file, S_IFDIR}},  // wrong type
                          {e, meta::DirEntry{"d-twice", d, S_IFDIR}}}});   // a second name
  fsck::CheckResult checked = Check(false);
  EXPECT_TRUE(checked.Has(ProblemKind::kEntryType)) << Lines(checked);
  EXPECT_TRUE(checked.Has(ProblemKind::kDirectoryNames)) << Lines(checked);
  ExpectFound(ProblemKind::kEntryType);
  // One name is kept, the one the parent pointer agrees with (e/"d-twice"), and the pointer
  // still agrees with it.
  EXPECT_EQ(fs()->Lookup(kRootIno, "d").error(), ENOENT);
  auto kept = fs()->Lookup(e, "d-twice");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->ino, d);
  EXPECT_EQ(Get(d).parent, e);
  EXPECT_EQ(Get(e).nlink, 3u);
  EXPECT_EQ(Get(kRootIno).nlink, 3u);
  auto list = fs()->ListDir(kRootIno);
  ASSERT_TRUE(list.ok());
  for (const meta::DirEntry& entry : *list) {
    if (entry.name == "f") {
      EXPECT_EQ(entry.type, static_cast<uint32_t>(S_IFREG));
    }
  }
}

TEST_F(FsckTest, WrongParentPointerOfAReachableDirectoryIsFixed) {
  Ino d = MakeDir(kRootIno, "d");
  Ino e = MakeDir(kRootIno, "e");
  meta::Inode ie = Get(e);
  ie.parent = d;
  Damage({.put_inodes = {ie}});
  ExpectFound(ProblemKind::kParentPointer);
  EXPECT_EQ(Get(e).parent, kRootIno);
}

TEST_F(FsckTest, StrayRecordsOfMissingInodesAreDeleted) {
  Damage({.set_orphans = {4242}});
  ExpectFound(ProblemKind::kStrayRecord);
  EXPECT_TRUE(rig_.meta()->ListOrphans()->empty());
}

TEST_F(FsckTest, DamagedRecordsAndMissingSymlinkTargetsAreReportedAndLeft) {
  Ino file = MakeFile(kRootIno, "f", "x");
  auto link = fs()->MakeNode(Caller{}, kRootIno, "s", S_IFLNK | 0777, 0, "f");
  ASSERT_TRUE(link.ok());
  rig_.Close();
  {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), rig_.meta_path(), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string inode_key(1, 'I'), target_key(1, 'L');
    for (int shift = 56; shift >= 0; shift -= 8) {
      inode_key.push_back(static_cast<char>(file >> shift));
      target_key.push_back(static_cast<char>(link->ino >> shift));
    }
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), inode_key, "\x01garbage").ok());
    ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), target_key).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "Zjunk", "?").ok());
  }
  ASSERT_TRUE(rig_.Open().ok());
  for (bool repair : {false, true}) {
    fsck::CheckResult r = Check(repair);
    EXPECT_EQ(r.ExitCode(), 4) << Lines(r);
    EXPECT_TRUE(r.Has(ProblemKind::kDamagedRecord)) << Lines(r);
    EXPECT_TRUE(r.Has(ProblemKind::kSymlinkTarget)) << Lines(r);
    // The damaged inode's name and objects are not judged: nothing of it is deleted.
    EXPECT_FALSE(r.Has(ProblemKind::kDanglingEntry)) << Lines(r);
    EXPECT_FALSE(r.Has(ProblemKind::kLeakedObject)) << Lines(r);
    for (const fsck::Problem& p : r.problems) {
      EXPECT_FALSE(p.repaired) << p.Line();
      EXPECT_NE(p.Line().find("left as is"), std::string::npos) << p.Line();
    }
  }
  EXPECT_TRUE(rig_.HasObjects(file));
}

TEST_F(FsckTest, ManyProblemsAtOnceAreAllRepairedInOnePass) {
  Ino a = MakeDir(kRootIno, "a");
  Ino f = MakeFile(a, "f", Pattern(150'000, 9));
  Ino g = MakeFile(kRootIno, "g", Pattern(10, 10));
  meta::Inode ig = Get(g);
  ig.nlink = 3;
  Damage({.put_inodes = {ig}, .delete_entries = {{kRootIno, "a"}}, .set_orphans = {777}});
  ASSERT_TRUE(rig_.disk(0)->Truncate(888'888, 1).ok());
  ExpectFound(ProblemKind::kUnreachable);
  Remount();
  EXPECT_EQ(ReadAll(f), Pattern(150'000, 9));
  EXPECT_EQ(Get(g).nlink, 1u);
}

}  // namespace
}  // namespace tipfs::testing
