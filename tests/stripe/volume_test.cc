// Labels, mkfs and Volume::Open on temporary directories: every refusal names the path and the
// problem and leaves every directory exactly as it was.
#include "stripe/volume.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "stripe/io_ring.h"
#include "stripe/mkfs.h"
#include "stripe/posix_disk.h"
#include "stripe/striped_io.h"
#include "tests/stripe/file_snapshot.h"

namespace tipfs::stripe {
namespace {

using testing::ReadWholeFile;
using testing::Snapshot;
using testing::TempDir;
using testing::WriteWholeFile;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Opening a volume starts an io_uring; where the kernel refuses one, those tests cannot run.
#define SKIP_WITHOUT_IO_URING()                                                           \
  do {                                                                                    \
    auto ring = IoRing::Create(1);                                                        \
    if (!ring.ok()) GTEST_SKIP() << "io_uring unavailable: " << ring.status().ToString(); \
  } while (0)

class VolumeTest : public ::testing::Test {
 protected:
  std::vector<std::string> MakeDirs(int n, const std::string& prefix = "d") {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) out.push_back(tmp_.MakeDir(prefix + std::to_string(i)));
    return out;
  }
  Label MustMkfs(const std::vector<std::string>& disks, uint32_t unit = kDefaultStripeUnit) {
    MkfsOptions o;
    o.disks = disks;
    o.stripe_unit = unit;
    Result<Label> l = Mkfs(o);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? *l : Label();
  }
  // Runs `f`, which must fail with `err` and a message containing `part`, and checks that nothing
  // under the temporary directory changed.
  template <typename F>
  void ExpectRefusedUnchanged(F f, int err, const std::string& part) {
    const auto before = Snapshot(tmp_.path());
    Status s = f();
    EXPECT_EQ(s.error(), err) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), part)) << "message: " << s.message() << "\nwant: " << part;
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line";
    EXPECT_EQ(Snapshot(tmp_.path()), before) << "a refused operation changed the disks";
  }
  Status MkfsStatus(std::vector<std::string> disks, bool force = false,
                    uint32_t unit = kDefaultStripeUnit) {
    MkfsOptions o;
    o.disks = std::move(disks);
    o.force = force;
    o.stripe_unit = unit;
    return Mkfs(o).status();
  }
  Status OpenStatus(const std::string& disk) {
    auto v = Volume::Open(disk, OpenOptions());
    return v.status();
  }

  TempDir tmp_;
};

TEST_F(VolumeTest, MkfsWritesLabelsAndOpenFindsTheWholeVolume) {
  SKIP_WITHOUT_IO_URING();
  auto dirs = MakeDirs(4);
  Label l0 = MustMkfs(dirs, 16384);
  EXPECT_EQ(l0.count, 4u);
  EXPECT_EQ(l0.index, 0u);
  EXPECT_EQ(l0.volume_uuid.size(), 36u);
  EXPECT_EQ(MetaPath(l0), dirs[0] + "/meta");
  for (int i = 0; i < 4; ++i) {
    auto l = ReadLabel(dirs[i]);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_EQ(l->index, static_cast<uint32_t>(i));
    EXPECT_EQ(l->volume_uuid, l0.volume_uuid);
    EXPECT_EQ(l->stripe_unit, 16384u);
    EXPECT_EQ(l->format_version, 1u);  // a volume of directories stays readable by older tipfs
    EXPECT_EQ(l->disk_names, dirs);
    EXPECT_TRUE(std::filesystem::is_directory(dirs[i] + "/objects"));
    const std::string text = ReadWholeFile(dirs[i] + "/tipfs-label");
    EXPECT_TRUE(Contains(text, "index=" + std::to_string(i) + "\n"));
    EXPECT_TRUE(Contains(text, "checksum="));
  }
  // Any disk identifies the volume; data written through one open is there in the next.
  const std::string data(300000, 'q');
  {
    auto v = Volume::Open(dirs[2], OpenOptions());
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ((*v)->disk_count(), 4u);
    EXPECT_EQ((*v)->label().volume_uuid, l0.volume_uuid);
    EXPECT_EQ((*v)->label().disk_names, dirs);
    EXPECT_EQ((*v)->layout().stripe_unit(), 16384u);
    StripedIo io(v->get());
    ASSERT_TRUE(io.Write(77, 0, data.data(), data.size()).ok());
    ASSERT_TRUE(io.Sync(77).ok());
  }
  auto v = Volume::Open(dirs[0], OpenOptions());
  ASSERT_TRUE(v.ok());
  StripedIo io(v->get());
  std::string back(data.size(), '\0');
  ASSERT_TRUE(io.Read(77, 0, back.size(), back.data()).ok());
  EXPECT_EQ(back, data);
}

TEST_F(VolumeTest, OpenAppliesWrapDisk) {
  SKIP_WITHOUT_IO_URING();
  auto dirs = MakeDirs(2);
  MustMkfs(dirs);
  std::vector<uint32_t> wrapped;
  OpenOptions o;
  o.wrap_disk = [&](std::unique_ptr<Disk> d, uint32_t i) {
    wrapped.push_back(i);
    return d;
  };
  ASSERT_TRUE(Volume::Open(dirs[1], o).ok());
  EXPECT_EQ(wrapped, (std::vector<uint32_t>{0, 1}));
}

TEST_F(VolumeTest, TenMiBOnFourPosixDisksPutsAQuarterOnEach) {
  SKIP_WITHOUT_IO_URING();
  auto dirs = MakeDirs(4);
  MustMkfs(dirs);
  auto v = Volume::Open(dirs[0], OpenOptions());
  ASSERT_TRUE(v.ok());
  StripedIo io(v->get());
  std::string data(10 << 20, '\0');
  std::mt19937_64 rng(3);
  for (char& c : data) c = static_cast<char>(rng());
  ASSERT_TRUE(io.Write(1234, 0, data.data(), data.size()).ok());
  for (int i = 0; i < 4; ++i) {
    auto info = (*v)->disk(i)->Stat(1234);
    ASSERT_TRUE(info.ok());
    EXPECT_NEAR(static_cast<double>(info->size), data.size() / 4.0, data.size() * 0.01);
  }
  std::string back(data.size(), '\0');
  ASSERT_TRUE(io.Read(1234, 0, back.size(), back.data()).ok());
  EXPECT_EQ(back, data);
}

TEST_F(VolumeTest, MkfsRefusesBadOptions) {
  auto dirs = MakeDirs(2);
  ExpectRefusedUnchanged([&] { return MkfsStatus({}); }, EINVAL, "1 to 64 disks");
  std::vector<std::string> many;
  for (int i = 0; i < 65; ++i) many.push_back(dirs[0]);
  ExpectRefusedUnchanged([&] { return MkfsStatus(many); }, EINVAL, "got 65");
  for (uint32_t unit : {0u, 2048u, 6000u, 128u << 20}) {
    ExpectRefusedUnchanged([&] { return MkfsStatus(dirs, false, unit); }, EINVAL,
                           "stripe unit " + std::to_string(unit));
  }
}

TEST_F(VolumeTest, MkfsRefusesMissingNonDirectoryAndDuplicates) {
  auto dirs = MakeDirs(2);
  ExpectRefusedUnchanged(
      [&] {
        return MkfsStatus({dirs[0], tmp_.path() + "/nope"});
      },
      ENOENT, tmp_.path() + "/nope");
  WriteWholeFile(tmp_.path() + "/afile", "x");
  ExpectRefusedUnchanged(
      [&] {
        return MkfsStatus({dirs[0], tmp_.path() + "/afile"});
      },
      ENOTDIR, "afile is not a directory");
  ExpectRefusedUnchanged(
      [&] {
        return MkfsStatus({dirs[0], dirs[1], dirs[0]});
      },
      EINVAL, "are the same directory");
  // The same directory through a symlink is still the same directory.
  std::filesystem::create_directory_symlink(dirs[1], tmp_.path() + "/link");
  ExpectRefusedUnchanged(
      [&] {
        return MkfsStatus({dirs[1], tmp_.path() + "/link"});
      },
      EINVAL, "same directory");
}

TEST_F(VolumeTest, MkfsRefusesExistingVolumeAndOtherFilesWithoutForce) {
  auto dirs = MakeDirs(3);
  MustMkfs({dirs[0], dirs[1]});
  ExpectRefusedUnchanged(
      [&] {
        return MkfsStatus({dirs[2], dirs[1]});
      },
      EEXIST, dirs[1] + " already holds a tipfs volume");
  WriteWholeFile(dirs[2] + "/precious.txt", "keep me");
  ExpectRefusedUnchanged([&] { return MkfsStatus({dirs[2]}); }, ENOTEMPTY,
                         dirs[2] + " is not empty (holds 'precious.txt')");
  // objects/ without a label is not ours: refused even with --force.
  auto other = tmp_.MakeDir("other");
  std::filesystem::create_directories(other + "/objects");
  ExpectRefusedUnchanged([&] { return MkfsStatus({other}, /*force=*/true); }, ENOTEMPTY,
                         other + " holds 'objects' but no tipfs label");
}

TEST_F(VolumeTest, UnfinishedLabelNeedsForce) {
  auto dirs = MakeDirs(1);
  WriteWholeFile(dirs[0] + "/tipfs-label.tmp", "half a label");
  ExpectRefusedUnchanged([&] { return MkfsStatus(dirs); }, ENOTEMPTY,
                         dirs[0] + " holds an unfinished tipfs-label.tmp");
  ASSERT_TRUE(MkfsStatus(dirs, /*force=*/true).ok());
  EXPECT_FALSE(std::filesystem::exists(dirs[0] + "/tipfs-label.tmp"));
  EXPECT_TRUE(ReadLabel(dirs[0]).ok());
}

TEST_F(VolumeTest, MkfsAllowsLostAndFound) {
  auto dirs = MakeDirs(1);
  std::filesystem::create_directories(dirs[0] + "/lost+found");
  MustMkfs(dirs);
  EXPECT_TRUE(std::filesystem::is_directory(dirs[0] + "/lost+found"));
}

TEST_F(VolumeTest, ForceErasesOnlyTipfsEntries) {
  SKIP_WITHOUT_IO_URING();
  auto dirs = MakeDirs(2);
  Label old = MustMkfs(dirs);
  {
    auto v = Volume::Open(dirs[0], OpenOptions());
    ASSERT_TRUE(v.ok());
    StripedIo io(v->get());
    const std::string data(200000, 'z');
    ASSERT_TRUE(io.Write(5, 0, data.data(), data.size()).ok());
  }
  std::filesystem::create_directories(dirs[0] + "/meta/db");
  WriteWholeFile(dirs[0] + "/meta/db/CURRENT", "x");
  WriteWholeFile(dirs[1] + "/notes.txt", "mine");
  MkfsOptions o;
  o.disks = dirs;
  o.force = true;
  Result<Label> fresh = Mkfs(o);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_NE(fresh->volume_uuid, old.volume_uuid);
  EXPECT_EQ(ReadWholeFile(dirs[1] + "/notes.txt"), "mine");
  EXPECT_FALSE(std::filesystem::exists(dirs[0] + "/meta"));
  for (const auto& d : dirs) {
    EXPECT_TRUE(std::filesystem::is_empty(d + "/objects"));
    EXPECT_EQ(ReadLabel(d)->volume_uuid, fresh->volume_uuid);
  }
}

TEST_F(VolumeTest, OpenRefusesMissingDiskOrLabel) {
  SKIP_WITHOUT_IO_URING();
  auto dirs = MakeDirs(3);
  MustMkfs(dirs);
  std::filesystem::rename(dirs[2], tmp_.path() + "/away");
  ExpectRefusedUnchanged([&] { return OpenStatus(dirs[0]); }, ENOENT,
                         "disk 2 " + dirs[2] + " is missing");
  std::filesystem::rename(tmp_.path() + "/away", dirs[2]);
  std::filesystem::rename(dirs[1] + "/tipfs-label", tmp_.path() + "/label1");
  ExpectRefusedUnchanged([&] { return OpenStatus(dirs[0]); }, ENOENT,
                         "disk 1 " + dirs[1] + " has no tipfs label");
  ExpectRefusedUnchanged([&] { return OpenStatus(dirs[1]); }, ENOENT,
                         dirs[1] + " has no tipfs label");
  ExpectRefusedUnchanged([&] { return OpenStatus(tmp_.path() + "/nowhere"); }, ENOENT,
                         tmp_.path() + "/nowhere is missing");
  std::filesystem::rename(tmp_.path() + "/label1", dirs[1] + "/tipfs-label");
  EXPECT_TRUE(OpenStatus(dirs[0]).ok());
}

TEST_F(VolumeTest, OpenRefusesForeignAndReorderedDisks) {
  auto dirs = MakeDirs(3);
  MustMkfs(dirs);
  auto others = MakeDirs(3, "other");
  MustMkfs(others);
  // Disk 1 of another volume sits where disk 1 belongs.
  std::filesystem::rename(dirs[1], tmp_.path() + "/mine1");
  std::filesystem::rename(others[1], dirs[1]);
  ExpectRefusedUnchanged([&] { return OpenStatus(dirs[0]); }, EINVAL,
                         "disk 1 " + dirs[1] + " belongs to another volume");
  std::filesystem::rename(dirs[1], others[1]);
  std::filesystem::rename(tmp_.path() + "/mine1", dirs[1]);
  // Disks 1 and 2 swapped (e.g. two mount points exchanged).
  std::filesystem::rename(dirs[1], tmp_.path() + "/swap");
  std::filesystem::rename(dirs[2], dirs[1]);
  std::filesystem::rename(tmp_.path() + "/swap", dirs[2]);
  ExpectRefusedUnchanged([&] { return OpenStatus(dirs[0]); }, EINVAL,
                         "disk 1 " + dirs[1] + " holds index 2, expected 1");
}

TEST_F(VolumeTest, OpenRefusesDisagreeingOrUnknownLabels) {
  SKIP_WITHOUT_IO_URING();
  auto dirs = MakeDirs(2);
  Label l0 = MustMkfs(dirs);
  Label l1 = *ReadLabel(dirs[1]);
  Label bad = l1;
  bad.stripe_unit = 4096;
  ASSERT_TRUE(WriteLabel(dirs[1], bad).ok());
  ExpectRefusedUnchanged([&] { return OpenStatus(dirs[0]); }, EINVAL,
                         "disk 1 " + dirs[1] + " disagrees");
  bad = l1;
  bad.format_version = kFormatVersion + 1;
  ASSERT_TRUE(WriteLabel(dirs[1], bad).ok());
  ExpectRefusedUnchanged([&] { return OpenStatus(dirs[0]); }, EPROTONOSUPPORT,
                         "format version 3, this tipfs reads versions 1 to 2");
  ASSERT_TRUE(WriteLabel(dirs[1], l1).ok());
  EXPECT_TRUE(OpenStatus(dirs[1]).ok());
}

TEST_F(VolumeTest, TamperedLabelIsCorruption) {
  SKIP_WITHOUT_IO_URING();
  auto dirs = MakeDirs(2);
  MustMkfs(dirs);
  const std::string path = dirs[1] + "/tipfs-label";
  const std::string good = ReadWholeFile(path);
  // Every single flipped byte is detected (a digit changed, a path changed, ...).
  for (size_t i = 0; i < good.size(); i += 7) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x04);
    WriteWholeFile(path, bad);
    Result<Label> l = ReadLabel(dirs[1]);
    ASSERT_FALSE(l.ok()) << "flip at " << i << " went unnoticed";
    EXPECT_TRUE(Contains(l.status().message(), path)) << l.status().message();
  }
  WriteWholeFile(path, good.substr(0, good.size() / 2));
  EXPECT_EQ(ReadLabel(dirs[1]).error(), EUCLEAN);
  std::string index_flip = good;
  index_flip[index_flip.find("index=1") + 6] = '0';
  WriteWholeFile(path, index_flip);
  ExpectRefusedUnchanged([&] { return OpenStatus(dirs[0]); }, EUCLEAN,
                         "disk 1: " + path + " is corrupt (checksum mismatch)");
  WriteWholeFile(path, "");
  EXPECT_EQ(ReadLabel(dirs[1]).error(), EUCLEAN);
  WriteWholeFile(path, good);
  EXPECT_TRUE(OpenStatus(dirs[0]).ok());
}

TEST_F(VolumeTest, OpenFindsAVolumeWhoseDirectoriesMoved) {
  SKIP_WITHOUT_IO_URING();
  // The named disk is trusted for its own index even when mkfs recorded another path for it.
  auto dirs = MakeDirs(1);
  MustMkfs(dirs);
  const std::string moved = tmp_.path() + "/moved";
  std::filesystem::rename(dirs[0], moved);
  auto v = Volume::Open(moved, OpenOptions());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ((*v)->label().disk_names[0], moved);
}

// The metadata may live in a directory that is no disk (as a volume of RADOS pools needs): the
// label records it, the directory holds the store and a copy of the label, and names the volume.
TEST_F(VolumeTest, MetadataDirectoryApartFromTheDisks) {
  SKIP_WITHOUT_IO_URING();
  auto dirs = MakeDirs(2);
  const std::string home = tmp_.MakeDir("home");
  MkfsOptions o;
  o.disks = dirs;
  o.meta_dir = home;
  Result<Label> made = Mkfs(o);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(made->meta_dir, home);
  EXPECT_EQ(made->format_version, 2u);  // version 1 cannot say where the metadata is
  EXPECT_EQ(MetaPath(*made), home + "/meta");
  Result<Label> copy = ReadHomeLabel(home);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(copy->volume_uuid, made->volume_uuid);
  for (const std::string& name : {home, dirs[1]}) {
    auto v = Volume::Open(name, OpenOptions());
    ASSERT_TRUE(v.ok()) << name << ": " << v.status().ToString();
    EXPECT_EQ(HomeDir((*v)->label()), home);
    EXPECT_EQ((*v)->label().disk_names, dirs);
  }
  // A second volume may not take the directory over, unless forced.
  auto others = MakeDirs(1, "o");
  o.disks = others;
  ExpectRefusedUnchanged([&] { return Mkfs(o).status(); }, EEXIST,
                         "metadata directory " + home + " already holds a tipfs volume");
  // Naming a disk as the metadata directory is naming that disk's own.
  o.disks = dirs;
  o.meta_dir = dirs[1];
  o.force = true;
  made = Mkfs(o);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(HomeDir(*made), dirs[1]);
  EXPECT_FALSE(std::filesystem::exists(dirs[1] + "/tipfs-volume"));
}

}  // namespace
}  // namespace tipfs::stripe
