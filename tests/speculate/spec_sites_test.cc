// Read sites and learned waits without a mount: the keys of call paths, the set of critical
// sites, their store between runs (private files, bounded, corruption refused), the program key,
// and the child's bound on tainted bytes ahead in the hint log.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "speculate/read_site.h"
#include "speculate/shared_log.h"
#include "speculate/site_store.h"
#include "speculate/state_dir.h"
#include "tests/speculate/state_dir_fixture.h"

namespace tipfs::spec {
namespace {

// Two call paths that end in the same function.
__attribute__((noinline)) uint64_t SiteOf(const ObjectTable& objects) {
  uint64_t site = ReadSiteHere(objects, /*skip_own_frames=*/false);
  asm volatile("" ::: "memory");  // no tail call: this frame stays on the stack
  return site;
}
__attribute__((noinline)) uint64_t FromHere(const ObjectTable& objects) {
  uint64_t site = SiteOf(objects);
  asm volatile("" ::: "memory");
  return site;
}
__attribute__((noinline)) uint64_t FromThere(const ObjectTable& objects) {
  uint64_t site = SiteOf(objects);
  asm volatile("" ::: "memory");
  return site;
}

TEST(ReadSiteTest, TheSameCallPathHasTheSameKeyAndAnotherOneAnother) {
  ObjectTable objects;
  ASSERT_GT(objects.Refresh(), 1);  // the test program, libc, ...
  EXPECT_NE(objects.main_id(), 0u);
  uint64_t here[2];
  // One call instruction, reached twice (as a program's read loop does): a count the compiler
  // cannot see, so it cannot unroll the loop into two calls.
  volatile int count = 2;
  for (int i = 0; i < count; ++i) here[i] = FromHere(objects);
  uint64_t there = FromThere(objects);
  EXPECT_NE(here[0], 0u);
  EXPECT_EQ(here[0], here[1]);
  EXPECT_NE(here[0], there);
}

TEST(ReadSiteTest, AddressesMapToTheirObjectAndOffset) {
  ObjectTable objects;
  objects.Refresh();
  uint64_t id = 0, offset = 0, libc_id = 0, libc_offset = 0;
  ASSERT_TRUE(objects.Lookup(reinterpret_cast<uintptr_t>(&FromHere), &id, &offset));
  EXPECT_EQ(id, objects.main_id());
  ASSERT_TRUE(objects.Lookup(reinterpret_cast<uintptr_t>(&getpid), &libc_id, &libc_offset));
  EXPECT_NE(libc_id, id);
  EXPECT_FALSE(objects.Lookup(0x10, &id, &offset));  // nothing is mapped there
}

TEST(CriticalSitesTest, HoldsUpToItsCapacityAndNeverZero) {
  CriticalSites sites;
  EXPECT_FALSE(sites.Insert(0));
  EXPECT_TRUE(sites.Insert(42));
  EXPECT_TRUE(sites.Insert(42));  // already there
  EXPECT_EQ(sites.size(), 1u);
  for (uint64_t s = 1; sites.size() < CriticalSites::kCapacity; ++s) sites.Insert(s * 7919);
  EXPECT_FALSE(sites.Insert(3));
  EXPECT_TRUE(sites.Contains(42));
  EXPECT_TRUE(sites.Contains(7919));
  EXPECT_FALSE(sites.Contains(3));
  uint64_t copy[CriticalSites::kCapacity];
  EXPECT_EQ(sites.CopyTo(copy, CriticalSites::kCapacity), CriticalSites::kCapacity);
  sites.Clear();
  EXPECT_FALSE(sites.Contains(42));
}

class SiteStoreTest : public tipfs::spec::testing::StateDirTest {};

TEST_F(SiteStoreTest, SavedSitesComeBackMergedAndPrivate) {
  SiteStore store(0xabc);
  CriticalSites first;
  EXPECT_EQ(store.Load(&first).error(), ENOENT);  // nothing learned yet
  first.Insert(11);
  first.Insert(12);
  ASSERT_TRUE(store.Save(first).ok());
  CriticalSites second;
  second.Insert(13);
  ASSERT_TRUE(store.Save(second).ok());  // another run: the union is kept
  CriticalSites loaded;
  ASSERT_TRUE(store.Load(&loaded).ok());
  EXPECT_EQ(loaded.size(), 3u);
  EXPECT_TRUE(loaded.Contains(11) && loaded.Contains(12) && loaded.Contains(13));
  struct stat st;
  ASSERT_EQ(stat(store.Path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(SiteStore(0xdef).Load(&loaded).error(), ENOENT);  // another program's are apart
}

TEST_F(SiteStoreTest, AForeignFileIsRefusedAndLeftAlone) {
  SiteStore store(7);
  ASSERT_TRUE(store.Save(CriticalSites()).ok());
  { std::ofstream(store.Path()) << "not a site file"; }
  CriticalSites sites;
  Status status = store.Load(&sites);
  EXPECT_EQ(status.error(), EUCLEAN);
  EXPECT_NE(status.message().find(store.Path()), std::string::npos) << status.ToString();
  EXPECT_EQ(ParseSiteFile("TIPSITE1" + std::string(5, 'x')).error(), EUCLEAN);  // torn
}

TEST_F(SiteStoreTest, TheDirectoryKeepsTheNewestPrograms) {
  std::string sites_dir = *StateSubdirectory("sites");
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(WritePrivateFile(sites_dir + "/p" + std::to_string(i), "x").ok());
    struct timespec times[2] = {{100 + i, 0}, {100 + i, 0}};  // p0 oldest
    utimensat(AT_FDCWD, (sites_dir + "/p" + std::to_string(i)).c_str(), times, 0);
  }
  PruneOldest(sites_dir, 3);
  EXPECT_FALSE(std::filesystem::exists(sites_dir + "/p0"));
  EXPECT_FALSE(std::filesystem::exists(sites_dir + "/p1"));
  EXPECT_TRUE(std::filesystem::exists(sites_dir + "/p4"));
}

TEST_F(SiteStoreTest, AStateDirectoryOthersMayWriteIsRefused) {
  ASSERT_EQ(mkdir(dir_.c_str(), 0777), 0);
  chmod(dir_.c_str(), 0777);
  Result<std::string> sub = StateSubdirectory("sites");
  EXPECT_EQ(sub.error(), EPERM);
  EXPECT_NE(sub.status().message().find("writable by others"), std::string::npos);
}

TEST(ProgramKeyTest, AScriptIsKeyedApartFromItsInterpreter) {
  std::string script = ::testing::TempDir() + "/key-" + std::to_string(getpid()) + ".py";
  { std::ofstream(script) << "print(1)\n"; }
  uint64_t interpreter = ProgramKey(99, {"python3"});
  uint64_t with_script = ProgramKey(99, {"python3", script});
  EXPECT_EQ(interpreter, 99u);
  EXPECT_NE(with_script, interpreter);
  EXPECT_EQ(ProgramKey(99, {"ld", "-r", script}), 99u);      // options are not scripts
  EXPECT_EQ(ProgramKey(99, {"cat", "/etc/hostname"}), 99u);  // data files are not either
  unlink(script.c_str());
}

TEST(SharedLogTaintTest, TaintedBytesAheadAreBoundedApartFromCleanOnes) {
  auto log = std::make_unique<SharedLog>();
  log->Reset(100, 1 << 20, /*max_tainted=*/300);
  log->Append({1, 1, 0, 500});  // clean, and larger than the tainted bound
  EXPECT_TRUE(log->HasRoom());
  log->Append({1, 1, 500, 100});
  log->MarkTainted(1, 77, 600);  // the second read came back without data
  EXPECT_TRUE(log->tainted());
  EXPECT_EQ(log->without_data_site.load(), 77u);
  log->Append({1, 1, 600, 200});
  EXPECT_TRUE(log->HasRoom()) << "200 tainted bytes ahead with a bound of 300";
  log->Append({1, 1, 800, 100});
  EXPECT_FALSE(log->HasRoom()) << "300 tainted bytes ahead";
  ASSERT_EQ(log->MatchNext(1, 1, 0), MatchResult::kMatched);
  ASSERT_EQ(log->MatchNext(1, 1, 500), MatchResult::kMatched);
  EXPECT_FALSE(log->HasRoom()) << "consuming clean entries frees no tainted room";
  ASSERT_EQ(log->MatchNext(1, 1, 600), MatchResult::kMatched);
  EXPECT_TRUE(log->HasRoom());
}

}  // namespace
}  // namespace tipfs::spec
