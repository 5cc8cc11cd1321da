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
#include "speculate/site_waits.h"
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

TEST_F(SiteStoreTest, RefutedSitesGoApartAndWhatAnotherRunLearnedStays) {
  SiteStore store(0x5e);
  CriticalSites learned;
  learned.Insert(21);
  learned.Insert(22);
  ASSERT_TRUE(store.Save(learned).ok());
  CriticalSites elsewhere;  // a concurrent run of the program learned 24 after this one loaded
  elsewhere.Insert(24);
  ASSERT_TRUE(store.Save(elsewhere).ok());
  CriticalSites refuted;
  refuted.Insert(21);
  ASSERT_TRUE(store.Refute(refuted).ok());
  CriticalSites loaded;
  ASSERT_TRUE(store.Load(&loaded).ok());
  EXPECT_EQ(loaded.size(), 2u);
  EXPECT_FALSE(loaded.Contains(21));
  EXPECT_TRUE(loaded.Contains(22) && loaded.Contains(24));
  CriticalSites back;
  ASSERT_TRUE(store.LoadRefuted(&back).ok());
  EXPECT_EQ(back.size(), 1u);
  EXPECT_TRUE(back.Contains(21));

  CriticalSites rest;  // refuting the rest removes the file, and refuted sites accumulate
  rest.Insert(22);
  rest.Insert(24);
  ASSERT_TRUE(store.Refute(rest).ok());
  EXPECT_FALSE(std::filesystem::exists(store.Path()));
  EXPECT_TRUE(store.Refute(rest).ok()) << "refuting what is no longer stored is no error";
  back = CriticalSites();
  ASSERT_TRUE(store.LoadRefuted(&back).ok());
  EXPECT_EQ(back.size(), 3u);
  EXPECT_NE(store.RefutedPath(), store.Path());
  EXPECT_EQ(store.Load(&back).error(), ENOENT) << "refuted sites are not learned sites";
  struct stat st;
  ASSERT_EQ(stat(store.RefutedPath().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(CriticalSitesTest, RemoveAllKeepsTheOthersFindable) {
  CriticalSites sites, gone;
  for (uint64_t s = 1; s <= 40; ++s) sites.Insert(s * CriticalSites::kCapacity);  // collide
  for (uint64_t s = 1; s <= 40; s += 2) gone.Insert(s * CriticalSites::kCapacity);
  sites.RemoveAll(gone);
  EXPECT_EQ(sites.size(), 20u);
  for (uint64_t s = 1; s <= 40; ++s) {
    EXPECT_EQ(sites.Contains(s * CriticalSites::kCapacity), s % 2 == 0) << s;
  }
}

// ---- SiteWaitJudge: whether the learned waits pay ------------------------------------------

TEST(SiteWaitJudgeTest, TwoLostChildrenThatMostlyWaitedDropTheWaits) {
  SiteWaitJudge judge;
  EXPECT_TRUE(judge.GiveSites());
  judge.ChildJudged(/*given_sites=*/true, /*logged_reads=*/10, /*waits=*/10, /*paid=*/false);
  EXPECT_TRUE(judge.GiveSites()) << "one loss is not a pattern";
  judge.ChildJudged(true, 4, 3, false);
  EXPECT_FALSE(judge.GiveSites());
  EXPECT_TRUE(judge.dropped());
  EXPECT_FALSE(judge.refuted());
}

TEST(SiteWaitJudgeTest, AChildThatPaidWithTheWaitsEndsTheStreak) {
  SiteWaitJudge judge;
  judge.ChildJudged(true, 10, 10, false);
  judge.ChildJudged(true, 10, 10, true);  // waiting there paid once: the streak starts again
  EXPECT_EQ(judge.losses_in_a_row(), 0u);
  judge.ChildJudged(true, 10, 10, false);
  EXPECT_TRUE(judge.GiveSites());
  judge.ChildJudged(true, 10, 10, false);
  EXPECT_FALSE(judge.GiveSites());
}

TEST(SiteWaitJudgeTest, LossesWhereTheWaitsWereNotMostReadsDoNotCount) {
  SiteWaitJudge judge;
  // A parser waiting at each file's header, then reading its records without waits: the waits
  // have work to overlap with, and such children losing is not the waits' doing.
  for (int i = 0; i < 5; ++i) judge.ChildJudged(true, 10, 5, false);
  judge.ChildJudged(true, 0, 0, false);    // logged nothing
  judge.ChildJudged(false, 10, 0, false);  // forked without the sites
  EXPECT_TRUE(judge.GiveSites());
  EXPECT_EQ(judge.losses_in_a_row(), 0u);
}

TEST(SiteWaitJudgeTest, OnlyAChildWithoutTheWaitsThatPaysRefutesThem) {
  SiteWaitJudge judge;
  judge.ChildJudged(false, 10, 0, true);  // paid before any drop: refutes nothing
  EXPECT_FALSE(judge.refuted());
  judge.ChildJudged(true, 10, 10, false);
  judge.ChildJudged(true, 10, 10, false);
  ASSERT_TRUE(judge.dropped());
  judge.ChildJudged(true, 10, 10, true);   // forked with them before the drop: not evidence
  judge.ChildJudged(false, 10, 0, false);  // without them, and lost: the waits stay dropped
  EXPECT_FALSE(judge.refuted());
  EXPECT_FALSE(judge.GiveSites());
  judge.ChildJudged(false, 10, 0, true);
  EXPECT_TRUE(judge.refuted());
  EXPECT_FALSE(judge.GiveSites());
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
