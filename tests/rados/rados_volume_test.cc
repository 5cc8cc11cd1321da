// Volumes with RADOS disks on a real cluster (label rados): mkfs over namespaces, mixed with
// directories; the labels in the pool; and mount's refusals of a missing, foreign or reordered
// RADOS disk, each one line naming the disk, as for directories.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "stripe/disk_name.h"
#include "stripe/mkfs.h"
#include "stripe/rados_disk.h"
#include "stripe/volume.h"
#include "tests/rados/rados_test_env.h"
#include "tests/stripe/disk_requests.h"
#include "tests/support/temp_dir.h"

namespace tipfs::stripe {
namespace {

using testing::NamespaceObjects;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

class RadosVolumeTest : public ::testing::Test {
 protected:
  void SetUp() override { TIPFS_REQUIRE_CEPH_OR_SKIP(); }
  void TearDown() override {
    for (const std::string& ns : namespaces_) testing::EmptyNamespace(ns);
  }

  // A fresh namespace's disk name.
  std::string Namespace(const std::string& tag) {
    namespaces_.push_back(testing::FreshNamespace(tag));
    return testing::RadosDiskName(namespaces_.back());
  }
  std::string NamespaceOf(const std::string& disk) { return ParseDiskName(disk)->rados.nspace; }

  Result<Label> Make(const std::vector<std::string>& disks, const std::string& meta = "",
                     bool force = false) {
    MkfsOptions o;
    o.disks = disks;
    o.meta_dir = meta;
    o.force = force;
    o.rados_object_size = 1 << 20;
    return Mkfs(o);
  }
  void ExpectOneLine(const Status& s, int err, const std::string& part) {
    EXPECT_EQ(s.error(), err) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), part)) << "message: " << s.message() << "\nwant: " << part;
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line";
  }
  // Copies one namespace's label object over another's.
  void CopyLabel(const std::string& from, const std::string& to) {
    RadosConnections c;
    auto a = c.OpenNamespace(*ParseDiskName(from));
    auto b = c.OpenNamespace(*ParseDiskName(to));
    ASSERT_TRUE(a.ok() && b.ok());
    Result<std::string> text = (*a)->ReadSmallObject(kLabelName, 65536);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    ASSERT_TRUE((*b)->WriteFullObject(kLabelName, *text).ok());
  }

  testing::TempDir tmp_;
  std::vector<std::string> namespaces_;
};

TEST_F(RadosVolumeTest, MixedVolumeOfDirectoriesAndNamespaces) {
  const std::vector<std::string> disks = {tmp_.MakeDir("d0"), Namespace("m1"), tmp_.MakeDir("d2"),
                                          Namespace("m3")};
  Result<Label> made = Make(disks);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(made->format_version, 2u);
  EXPECT_EQ(made->meta_dir, "");  // disk 0 is a directory: the metadata lives there
  EXPECT_EQ(made->rados_object_size, 1u << 20);
  EXPECT_EQ(NamespaceObjects(NamespaceOf(disks[1])), (std::vector<std::string>{"tipfs-label"}));
  Result<Label> label3 = ReadLabel(disks[3]);
  ASSERT_TRUE(label3.ok()) << label3.status().ToString();
  EXPECT_EQ(label3->index, 3u);
  EXPECT_EQ(label3->disk_names, disks);
  for (const std::string& any : {disks[3], disks[0]}) {
    OpenOptions options;
    options.take_leases = false;
    auto v = Volume::Open(any, options);
    ASSERT_TRUE(v.ok()) << any << ": " << v.status().ToString();
    EXPECT_EQ((*v)->label().disk_names, disks);
    EXPECT_EQ((*v)->rados_disk(0), nullptr);
    ASSERT_NE((*v)->rados_disk(1), nullptr);
    EXPECT_EQ((*v)->rados_disk(1)->object_size(), 1u << 20);
    EXPECT_EQ((*v)->disk(3)->name(),
              "disk 3 (rados:" + testing::CephPool() + "/" + NamespaceOf(disks[3]) + ")");
    EXPECT_EQ((*v)->rados_stats().size(), 2u);
    // statfs counts a backing store once: both namespaces name the one cluster, the directories
    // their file system, never the same store as the cluster.
    std::vector<uint64_t> stores;
    for (uint32_t i = 0; i < 4; ++i) {
      Result<DiskUsage> usage = (*v)->disk(i)->Usage();
      ASSERT_TRUE(usage.ok()) << i << ": " << usage.status().ToString();
      EXPECT_NE(usage->store_id, 0u) << i;
      stores.push_back(usage->store_id);
    }
    EXPECT_EQ(stores[1], stores[3]);
    EXPECT_EQ(stores[0], stores[2]);
    EXPECT_NE(stores[0], stores[1]);
  }
}

TEST_F(RadosVolumeTest, VolumeOfNamespacesOnlyKeepsItsMetadataInANamedDirectory) {
  const std::vector<std::string> disks = {Namespace("r0"), Namespace("r1")};
  Result<Label> refused = Make(disks);
  ExpectOneLine(refused.status(), EINVAL, "every disk is a RADOS pool: name a local directory");
  EXPECT_TRUE(NamespaceObjects(NamespaceOf(disks[0])).empty()) << "a refused mkfs wrote";
  const std::string meta = tmp_.MakeDir("meta");
  Result<Label> made = Make(disks, meta);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(HomeDir(*made), meta);
  EXPECT_TRUE(std::filesystem::exists(meta + "/tipfs-volume"));
  for (const std::string& any : {meta, disks[1]}) {
    auto v = Volume::Open(any, OpenOptions());
    ASSERT_TRUE(v.ok()) << any << ": " << v.status().ToString();
    EXPECT_EQ(MetaPath((*v)->label()), meta + "/meta");
  }
  // The metadata directory is part of the volume: without it, nothing opens.
  std::filesystem::rename(meta, tmp_.path() + "/elsewhere");
  ExpectOneLine(Volume::Open(disks[0], OpenOptions()).status(), ENOENT,
                "metadata directory " + meta + " is missing on this host");
}

TEST_F(RadosVolumeTest, OpenRefusesMissingForeignAndReorderedNamespaces) {
  const std::vector<std::string> disks = {tmp_.MakeDir("d0"), Namespace("a1"), Namespace("a2")};
  ASSERT_TRUE(Make(disks).ok());
  const std::vector<std::string> others = {tmp_.MakeDir("o0"), Namespace("b1")};
  ASSERT_TRUE(Make(others).ok());
  const std::string saved = Namespace("saved");
  CopyLabel(disks[1], saved);

  // Missing: the label object is gone (the namespace was emptied).
  testing::EmptyNamespace(NamespaceOf(disks[1]));
  ExpectOneLine(Volume::Open(disks[0], OpenOptions()).status(), ENOENT,
                "disk 1 " + disks[1] + " has no tipfs label");
  // Foreign: another volume's label.
  CopyLabel(others[1], disks[1]);
  ExpectOneLine(Volume::Open(disks[0], OpenOptions()).status(), EINVAL,
                "disk 1 " + disks[1] + " belongs to another volume");
  // Reordered: disk 2's label where disk 1's belongs.
  CopyLabel(disks[2], disks[1]);
  ExpectOneLine(Volume::Open(disks[0], OpenOptions()).status(), EINVAL,
                "disk 1 " + disks[1] + " holds index 2, expected 1 (disks reordered?)");
  // Corrupt: a flipped byte.
  {
    RadosConnections c;
    auto ns = c.OpenNamespace(*ParseDiskName(disks[1]));
    ASSERT_TRUE(ns.ok());
    ASSERT_TRUE(
        (*ns)->WriteFullObject(kLabelName, "# tipfs volume label\nchecksum=fnv1a64:00\n").ok());
  }
  ExpectOneLine(Volume::Open(disks[0], OpenOptions()).status(), EUCLEAN, "is corrupt");
  CopyLabel(saved, disks[1]);
  EXPECT_TRUE(Volume::Open(disks[0], OpenOptions()).ok());
  // A pool that does not exist.
  const std::string nowhere = "rados:tipfs-no-such-pool/x?conf=" + testing::CephConf();
  ExpectOneLine(ReadLabel(nowhere).status(), ENOENT,
                "pool 'tipfs-no-such-pool' does not exist (create it: ceph osd pool create");
}

TEST_F(RadosVolumeTest, MkfsRefusesWhatIsNotItsOwnAndForceErasesOnlyTipfsObjects) {
  const std::string a = Namespace("f0");
  const std::string b = Namespace("f1");
  const std::string meta = tmp_.MakeDir("meta");
  {  // someone else's object in the namespace
    RadosConnections c;
    auto ns = c.OpenNamespace(*ParseDiskName(b));
    ASSERT_TRUE(ns.ok());
    ASSERT_TRUE((*ns)->WriteFullObject("not-tipfs", "keep me").ok());
  }
  ExpectOneLine(
      Make({a, b}, meta).status(), ENOTEMPTY,
      "mkfs: " + b + " is not empty (holds 'not-tipfs'); use an empty namespace or --force");
  ExpectOneLine(Make({a, a}, meta).status(), EINVAL, "are the same namespace");
  ASSERT_TRUE(Make({a, b}, meta, /*force=*/true).ok());
  // A volume's namespace is refused without force, naming the volume...
  Result<Label> first = ReadLabel(a);
  ASSERT_TRUE(first.ok());
  ExpectOneLine(Make({a}, tmp_.MakeDir("meta2")).status(), EEXIST,
                "mkfs: " + a + " already holds a tipfs volume (volume " + first->volume_uuid);
  // ...and erased with force: its parts go, the other object stays.
  {
    auto v = Volume::Open(meta, OpenOptions());
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    std::string data(3 << 20, 'x');
    Result<uint64_t> w = testing::SubmitAndWait((*v)->disk(1), DiskRequest::Kind::kWrite, 77, 0,
                                                data.size(), data.data());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    EXPECT_EQ(NamespaceObjects(NamespaceOf(b)).size(), 5u);  // label, other, 3 parts of 1 MiB
    // Mounted (the volume holds its leases): not even --force erases it.
    ExpectOneLine(Make({a, b}, tmp_.MakeDir("meta3"), true).status(), EBUSY,
                  "is mounted by tipfs pid " + std::to_string(getpid()));
  }
  ASSERT_TRUE(Make({a, b}, meta, /*force=*/true).ok());
  EXPECT_EQ(NamespaceObjects(NamespaceOf(b)),
            (std::vector<std::string>{"not-tipfs", "tipfs-label"}));
}

}  // namespace
}  // namespace tipfs::stripe
