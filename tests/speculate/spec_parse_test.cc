// Speculation for programs that parse what they read (issue 10), on a real mount (label
// integration). A speculating child that reads data it did not get goes on with zeros, which a
// parser rejects: its reads up to and including that one are clean (the program will make them),
// later ones tainted. These tests run parsers that exit non-zero on bad data, in lockstep (the
// child always reads before the program, so it always meets cold data), and check what a user
// would: the same output, clean hints consumed after children ended, tainted hints within their
// budget, and, on a second run, children waiting at the read site that killed the first run's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "tests/speculate/spec_mount_fixture.h"

namespace tipfs::spec::testing {
namespace {

namespace fs = std::filesystem;

class SpecParseTest : public SpecMountTest {
 protected:
  void SetUp() override {
    SpecMountTest::SetUp();
    if (mount_ == nullptr || !mount_->mounted()) return;
    state_dir_ = scratch_.root() + "/state";  // learned sites go here, not to $HOME
    fs::create_directories(Path("records"));
    ASSERT_EQ(RunCommand(std::string(PARSE_RECORDS) + " --make 24 " + Path("records")), 0);
    for (int i = 0; i < 24; ++i) {
      char name[32];
      snprintf(name, sizeof(name), "records/rec%03d.bin", i);
      files_.push_back(name);
    }
  }

  static int RunCommand(const std::string& command) {
    return tipfs::testing::RunCommand(command + " 2>&1");
  }

  std::vector<std::string> Parser() const {
    std::vector<std::string> argv = {PARSE_RECORDS};
    argv.insert(argv.end(), files_.begin(), files_.end());
    return argv;
  }

  // Plain and speculated, both cold; the speculated run with `extra` set. Returns its counters.
  std::map<std::string, uint64_t> CompareRuns(const std::vector<std::string>& argv,
                                              const Environment& extra, int exit_status = 0,
                                              const std::vector<std::string>& run_options = {}) {
    Remount();
    RunResult plain = scratch_.Run(argv, false, mount_->mountpoint());
    EXPECT_EQ(plain.exit_status, exit_status) << plain.out.substr(0, 300);
    scratch_.ClearLogs();
    Remount();
    Environment environment = {{"TIPSPEC_STATE_DIR", state_dir_}};
    environment.insert(environment.end(), extra.begin(), extra.end());
    RunResult speculated = RunSpeculated(argv, environment, run_options);
    EXPECT_EQ(speculated.exit_status, exit_status);
    EXPECT_TRUE(speculated.out == plain.out) << "outputs differ:\n"
                                             << plain.out.substr(0, 300) << "\nand\n"
                                             << speculated.out.substr(0, 300);
    return scratch_.Stats();
  }

  std::vector<std::string> JsonLoader();

  std::string state_dir_;
  std::vector<std::string> files_;
};

// Each child reads the next file's header without its data, fails the magic check on zeros and
// exits 1 (ends). What it read up to that header was real: those hints are consumed by the
// program, and libtipspec's figure of consumed hints is the mount's own.
TEST_F(SpecParseTest, AParserGivesItsOutputAndChildrenEndingOnGarbageLeaveCleanHintsUsed) {
  std::map<std::string, uint64_t> stats = CompareRuns(Parser(), {{"TIPSPEC_WAIT", "0"}});
  EXPECT_GE(stats["child_ended_program_exit"], 1u) << "no child ended on garbage";
  EXPECT_GE(stats["hints_clean"], 1u);
  const uint64_t clean = MountCounter(mount_->mountpoint(), "hints.speculative.consumed");
  const uint64_t tainted = MountCounter(mount_->mountpoint(), "hints.speculative_tainted.consumed");
  EXPECT_GE(clean, 1u) << ReadFile(mount_->mountpoint() + "/.tipfs/stats");
  EXPECT_EQ(stats["hints_consumed"], clean + tainted) << "libtipspec and the mount disagree";
  EXPECT_EQ(stats["mount_consumed_clean"], clean);
}

// A child's read without data ends in a size check of the file (how long the read would have
// been). A FUSE kernel holds atime stale after the child's O_DIRECT read, so fstat(2) there was a
// GETATTR round trip to the daemon for every file the child read ahead; the size alone is answered
// from the attributes the kernel holds. The mount counts the GETATTRs it answered: the speculated
// run, whose children read every file ahead without data, asks for no more than the program alone.
TEST_F(SpecParseTest, AChildsReadsWithoutDataAskTheMountForNoAttributes) {
  Remount();
  RunResult plain = scratch_.Run(Parser(), false, mount_->mountpoint());
  ASSERT_EQ(plain.exit_status, 0) << plain.out.substr(0, 300);
  const uint64_t alone = MountCounter(mount_->mountpoint(), "fuse.getattr.ops");
  scratch_.ClearLogs();
  Remount();
  RunResult speculated = RunSpeculated(Parser(), {{"TIPSPEC_STATE_DIR", state_dir_}});
  EXPECT_EQ(speculated.exit_status, 0);
  EXPECT_TRUE(speculated.out == plain.out) << "outputs differ";
  std::map<std::string, uint64_t> stats = scratch_.Stats();
  EXPECT_GE(stats["reads_without_data"], static_cast<uint64_t>(files_.size() / 2));
  EXPECT_LE(MountCounter(mount_->mountpoint(), "fuse.getattr.ops"), alone)
      << "the program alone: " << alone << ", reads without data " << stats["reads_without_data"]
      << "\n"
      << ReadFile(mount_->mountpoint() + "/.tipfs/stats");
}

// 20 JSON files of growing sizes and a script that json.load()s them in a shuffled order; the
// command line that runs it.
std::vector<std::string> SpecParseTest::JsonLoader() {
  fs::create_directories(Path("json"));
  for (int i = 0; i < 20; ++i) {
    std::string body = "{\"id\": " + std::to_string(i) + ", \"values\": [";
    for (int k = 0; k < 50 + 31 * i; ++k) body += (k ? ", " : "") + std::to_string(k * i % 977);
    WriteFile(Path("json/sample" + std::to_string(i) + ".json"), body + "]}\n");
  }
  const std::string script = scratch_.root() + "/load.py";
  WriteFile(script,
            "import json, os, random, sys\n"
            "names = sorted(os.listdir('json'))\n"
            "random.Random(7).shuffle(names)\n"
            "total = 0\n"
            "for name in names:\n"
            "    with open(os.path.join('json', name)) as f:\n"
            "        sample = json.load(f)\n"
            "    total += sum(sample['values'])\n"
            "    print(name, sample['id'], total)\n");
  return {"python3", script};
}

TEST_F(SpecParseTest, APythonJsonLoaderGivesItsOutputUnderSpeculation) {
  if (!HaveProgram("python3")) GTEST_SKIP() << "python3 not installed";
  std::map<std::string, uint64_t> stats = CompareRuns(JsonLoader(), {{"TIPSPEC_WAIT", "0"}});
  EXPECT_GE(stats["forks"], 1u);
  EXPECT_GE(stats["child_ended_program_exit"] + stats["child_ended_forbidden"] +
                stats["offtrack_mismatch"],
            1u)
      << "no child took json's error path";
  EXPECT_GE(MountCounter(mount_->mountpoint(), "hints.speculative.consumed"), 1u);
}

// On a bad header the program reads up to 64 MiB of the file in one call. The child meets zeros
// in the header of a file that is no record file and hints that huge read (its own bound on
// tainted bytes raised); the mount keeps at most its tainted budget (mounted with 64 KiB, less
// than one FUSE read of the child) outstanding and trims the rest. The program itself finds the
// real header bad too.
class SpecParseBudgetTest : public SpecParseTest {
 protected:
  std::string MoreMountArgs() const override { return "--tainted-hint-budget 64K"; }
};

TEST_F(SpecParseBudgetTest, TaintedHintsNeverExceedTheirBudget) {
  WriteFile(Path("big"), std::string(4 << 20, 'f'));
  std::vector<std::string> argv = {PARSE_RECORDS, "--huge-on-bad", files_[0], "big"};
  std::map<std::string, uint64_t> stats =
      CompareRuns(argv,
                  {{"TIPSPEC_WAIT", "0"},
                   {"TIPSPEC_MAX_TAINTED_BYTES", "64M"},
                   {"TIPSPEC_MAX_AHEAD_BYTES", "64M"}},
                  /*exit_status=*/1);  // "big" is no record file: the program says so
  EXPECT_GE(stats["hints_tainted"], 1u);
  const std::string mnt = mount_->mountpoint();
  EXPECT_LE(MountCounter(mnt, "hints.tainted.outstanding_max.bytes"), 64u << 10);
  EXPECT_GT(MountCounter(mnt, "hints.tainted.trimmed.bytes"), 0u)
      << ReadFile(mnt + "/.tipfs/stats");
}

// The first run's children die at the header read (zeros fail the magic): that read site is
// learned and kept in the state directory. The second run starts knowing it, and its children
// wait there (the data is hinted first), parse real headers and go on. (Without predicted reads,
// which would answer most of those waits: the next test.)
TEST_F(SpecParseTest, ASecondRunWaitsAtTheSiteThatKilledTheFirstRunsChildren) {
  const Environment learned = {{"TIPSPEC_WAIT", "learned"}, {"TIPSPEC_PREDICT", "0"}};
  std::map<std::string, uint64_t> first = CompareRuns(Parser(), learned);
  EXPECT_GE(first["sites_learned"], 1u) << "nothing learned";
  EXPECT_EQ(first["sites_known"], 0u);
  ASSERT_TRUE(fs::exists(state_dir_ + "/sites")) << "learned sites are not kept";
  std::map<std::string, uint64_t> second = CompareRuns(Parser(), learned);
  EXPECT_GE(second["sites_known"], 1u);
  EXPECT_GE(second["waits_at_sites"], 1u) << "no child waited at the learned site";
  // Waiting at the header, a child gets real data and parses more than one file.
  EXPECT_LT(second["forks"], first["forks"]);
  // `tipfs run --sites-clear` forgets what was learned: the next run starts knowing nothing.
  RunResult cleared = scratch_.Run({"sh", "-c", TipfsBinary() + " run --sites-clear 2>&1"}, false,
                                   mount_->mountpoint(), {{"TIPSPEC_STATE_DIR", state_dir_}});
  EXPECT_EQ(cleared.exit_status, 0) << cleared.out;
  EXPECT_EQ(cleared.out, "removed 1 site file\n");
  EXPECT_TRUE(fs::is_empty(state_dir_ + "/sites"));
  std::map<std::string, uint64_t> third = CompareRuns(Parser(), learned);
  EXPECT_EQ(third["sites_known"], 0u) << "cleared sites were loaded";
  RunResult refused =
      scratch_.Run({"sh", "-c", TipfsBinary() + " run --sites-clear --history-clear 2>&1"}, false,
                   mount_->mountpoint(), {{"TIPSPEC_STATE_DIR", state_dir_}});
  EXPECT_EQ(refused.exit_status, 2);
  EXPECT_EQ(std::count(refused.out.begin(), refused.out.end(), '\n'), 1) << refused.out;
}

// A program with one read site (--one-site: header and records come from one read call, as GNU
// grep's do). The first run learns the site from children that read the next file's header as
// zeros and exit. The second run removes a file after each one (the child ends there): every
// child is given the site, so each waits at every read it makes and covers the rest of one file
// (parsing it at length: --work) for one hint.
// Once two such children in a row lost, later children of the run are given no sites and do not
// wait (with the old code every logged read waited: waits_at_sites == hints_issued).
TEST_F(SpecParseTest, WaitsAtALearnedSiteThatKeepLosingAreDropped) {
  std::vector<std::string> argv = {PARSE_RECORDS, "--one-site"};
  argv.insert(argv.end(), files_.begin(), files_.end());
  const Environment learned = {{"TIPSPEC_WAIT", "learned"}, {"TIPSPEC_PREDICT", "0"}};
  std::map<std::string, uint64_t> first = CompareRuns(argv, learned);
  ASSERT_GE(first["sites_learned"], 1u) << "the one site was not learned";
  // The work per file makes each child's CPU (beyond the program's stalls) cost more than the one
  // read its hint can save.
  argv.insert(argv.begin() + 2, {"--unlink-after", scratch_.root() + "/tmp", "--work", "400"});
  std::map<std::string, uint64_t> second = CompareRuns(argv, learned);
  EXPECT_GE(second["sites_known"], 1u);
  EXPECT_GE(second["waits_at_sites"], 1u) << "the learned waits were not tried first";
  EXPECT_EQ(second["site_waits_dropped"], 1u)
      << "lost " << second["children_lost"] << ", paid " << second["children_paid"];
  EXPECT_LT(second["waits_at_sites"], second["hints_issued"]) << "every child still waited";
}

// Predicted reads (TIPSPEC_PREDICT, the default): at a learned site, a child's read without data
// gets the bytes of an earlier real read there instead of waiting. This parser reads each file's
// records at offsets its header gives, so a child that parsed another file's header goes astray
// at the next read: the prediction is blamed, and later children of the run wait at that site
// instead (sites_unpredictable), as they do with predictions off. The output is unchanged.
TEST_F(SpecParseTest, APredictionThatSendsAChildAstrayIsNotMadeThereAgain) {
  std::map<std::string, uint64_t> predicted = CompareRuns(Parser(), {{"TIPSPEC_WAIT", "learned"}});
  EXPECT_GE(predicted["sites_learned"], 1u);
  EXPECT_GE(predicted["reads_predicted"], 1u);
  EXPECT_GE(predicted["sites_unpredictable"], 1u) << "no prediction was blamed";
  EXPECT_LE(predicted["sites_unpredictable"], predicted["sites_learned"]);
  EXPECT_GE(predicted["waits_at_sites"], 1u) << "no child waited after the blame";
  fs::remove_all(state_dir_);  // learn afresh
  std::map<std::string, uint64_t> waited =
      CompareRuns(Parser(), {{"TIPSPEC_WAIT", "learned"}, {"TIPSPEC_PREDICT", "0"}});
  EXPECT_EQ(waited["reads_predicted"], 0u);
  EXPECT_EQ(waited["sites_unpredictable"], 0u);
}

// The same for json.load(): a child that learned the loader's one read site parses the bytes of
// a file it read for the next file it has no data for (padded with newlines, which JSON skips),
// so json.load() succeeds and the child goes on to the next file. `tipfs run --predict off`: the
// next run (knowing the site) waits there instead.
TEST_F(SpecParseTest, APythonJsonLoadersChildrenParsePredictedFiles) {
  if (!HaveProgram("python3")) GTEST_SKIP() << "python3 not installed";
  const Environment learned = {{"TIPSPEC_WAIT", "learned"}};
  std::map<std::string, uint64_t> stats = CompareRuns(JsonLoader(), learned);
  EXPECT_GE(stats["sites_learned"], 1u);
  EXPECT_GE(stats["reads_predicted"], 3u);
  EXPECT_EQ(stats["sites_unpredictable"], 0u);
  EXPECT_GE(MountCounter(mount_->mountpoint(), "hints.speculative_tainted.consumed"), 3u)
      << ReadFile(mount_->mountpoint() + "/.tipfs/stats");
  std::map<std::string, uint64_t> off = CompareRuns(JsonLoader(), learned, 0, {"--predict", "off"});
  EXPECT_GE(off["sites_known"], 1u);
  EXPECT_EQ(off["reads_predicted"], 0u);
  EXPECT_GE(off["waits_at_sites"], 1u);
}

// A loader reads each file whole (st_size + 1 bytes, until end of file) and checks that the
// header accounts for every byte read, as the loader workload does with its samples. A kept read
// padded to the next file's length fails that check (the header says the kept file's length);
// a whole kept file, returned at its own length and followed by the end of the file, passes it,
// so the child parses on, opens the next file and hints it. No prediction is blamed.
TEST_F(SpecParseTest, AWholeFileLoadersChildrenParseWholeFilesPredictedForThem) {
  std::vector<std::string> argv = {PARSE_RECORDS, "--whole"};
  argv.insert(argv.end(), files_.begin(), files_.end());
  std::map<std::string, uint64_t> stats = CompareRuns(argv, {{"TIPSPEC_WAIT", "learned"}});
  EXPECT_GE(stats["sites_learned"], 1u);
  EXPECT_GE(stats["reads_predicted_whole"], 3u) << "no whole file was predicted";
  EXPECT_EQ(stats["sites_not_whole"], 0u);
  EXPECT_EQ(stats["sites_unpredictable"], 0u) << "a prediction sent a child astray";
  EXPECT_GE(MountCounter(mount_->mountpoint(), "hints.speculative_tainted.consumed"), 3u)
      << ReadFile(mount_->mountpoint() + "/.tipfs/stats");
}

// The same loader checking the bytes it read against st_size instead: a whole other file is too
// short or too long, the child takes the error path, and the whole-file prediction is blamed.
// Later children of the run pad a kept read to the file's length there, which passes that check
// (the header's records lie within it), and go on.
TEST_F(SpecParseTest, AWholeFileThatFailsASizeCheckIsPaddedThereInstead) {
  std::vector<std::string> argv = {PARSE_RECORDS, "--whole", "--size-check"};
  argv.insert(argv.end(), files_.begin(), files_.end());
  std::map<std::string, uint64_t> stats = CompareRuns(argv, {{"TIPSPEC_WAIT", "learned"}});
  EXPECT_GE(stats["reads_predicted_whole"], 1u);
  EXPECT_EQ(stats["sites_not_whole"], 1u) << "the whole-file prediction was not blamed";
  EXPECT_GE(stats["reads_predicted"], stats["reads_predicted_whole"] + 3)
      << "no padded prediction after the blame";
  EXPECT_EQ(stats["sites_unpredictable"], 0u);
}

// A linker's two passes (--tables): pass 1 reads every file's header and checks it against the
// file's size, so a predicted header (another file's) sends a child astray at once and children
// wait at headers from then on (sites_unpredictable 1). Pass 2 reads each file's records as two
// tables from one call, as a linker reads an object's relocation sections, and checks every
// entry against what pass 1 read (a name of a record of the file, 1..count, then of one of 8
// kinds, 1..8). A child that learned that site predicts the next files' tables: zeros (entry 0)
// fail, and so would the first table of another file standing for a second one (its names go
// beyond 8), or a larger file's table (its names beyond this file's count); then that site too
// is blamed, its reads are waited for, and few are predicted. The kept table of the same kind of
// a smaller file, repeated to the read's length, passes: the children predict the tables of the
// files ahead and hint them (tainted hints consumed). The output is the program's.
// Stripe units of 4 KiB and direct reads: the blocks a child's wait at a header brings are not
// the whole file, so pass 2 finds the tables not cached.
class SpecParseSmallUnitsTest : public SpecParseTest {
 protected:
  VolumeSpec Spec() const override {
    VolumeSpec spec = SpecParseTest::Spec();
    spec.mkfs_args = "--stripe-unit 4K";
    return spec;
  }
  std::string DataCache() const override { return "direct"; }
};

TEST_F(SpecParseSmallUnitsTest, ALinkersTablesArePredictedFromKeptTablesOfTheSameKind) {
  std::vector<std::string> argv = {PARSE_RECORDS, "--tables"};
  argv.insert(argv.end(), files_.begin(), files_.end());
  std::map<std::string, uint64_t> stats = CompareRuns(argv, {{"TIPSPEC_WAIT", "learned"}});
  EXPECT_EQ(stats["sites_learned"], 2u) << "the header and the tables";
  EXPECT_LE(stats["sites_unpredictable"], 1u) << "a predicted table sent a child astray";
  // Headers are predicted at most once per child before their site is blamed; only the tables of
  // files ahead, predicted on, make more predictions than there are files.
  EXPECT_GT(stats["reads_predicted"], files_.size()) << "tables were not predicted";
  EXPECT_GE(MountCounter(mount_->mountpoint(), "hints.speculative_tainted.consumed"), 6u)
      << ReadFile(mount_->mountpoint() + "/.tipfs/stats");
}

// The site learned is that of the child's latest read without data before it went astray, not
// its first. With --trailer the program reads 8 bytes of a side file after each file's records
// and does not check them: a child that gets zeros there goes on, reads the next file's header
// without data and dies on it. Blaming its first read without data learned the trailer's site,
// where waiting gains nothing (the children of a linker waited at its string tables, in lockstep
// with it): one site more than the same program learns without the trailer reads.
TEST_F(SpecParseTest, TheSiteLearnedIsThatOfTheLatestReadWithoutDataBeforeTheChildWentAstray) {
  const Environment learned = {{"TIPSPEC_WAIT", "learned"}, {"TIPSPEC_PREDICT", "0"}};
  std::map<std::string, uint64_t> plain = CompareRuns(Parser(), learned);
  ASSERT_GE(plain["sites_learned"], 1u);
  fs::remove_all(state_dir_);  // learn afresh
  WriteFile(Path("side"), std::string(files_.size() << 16, 'x'));
  std::vector<std::string> argv = {PARSE_RECORDS, "--trailer", "side"};
  argv.insert(argv.end(), files_.begin(), files_.end());
  std::map<std::string, uint64_t> trailer = CompareRuns(argv, learned);
  EXPECT_GE(trailer["reads_without_data"], 2u);
  EXPECT_EQ(trailer["sites_learned"], plain["sites_learned"])
      << "the trailer's site was learned (forks " << trailer["forks"] << ")";
}

// The program reads each file's header (cold: it stalls), then its records in two reads (cached).
// A child forked after the header's stall logs the second records read, which the program uses,
// and ends at the linker-like unlink after the file; the next child is forked at the program's
// very next read, the next header, which did not follow a stall: without that rule nothing
// would fork until after the next header's.
class SpecParseSlowDisksTest : public SpecParseTest {
 protected:
  std::string MoreMountArgs() const override {
    return "--disk-model hdd";
  }  // a cold read takes milliseconds
};

TEST_F(SpecParseSlowDisksTest, AfterAUsefulChildEndsTheNextIsForkedAtOnce) {
  std::vector<std::string> argv = {PARSE_RECORDS, "--unlink-after", scratch_.root() + "/tmp"};
  argv.insert(argv.end(), files_.begin(), files_.end());
  std::map<std::string, uint64_t> stats =
      CompareRuns(argv, {{"TIPSPEC_WAIT", "learned"}, {"TIPSPEC_STALL_USEC", "5000"}});
  EXPECT_GE(stats["child_ended_forbidden"], 2u);
  EXPECT_GE(stats["forks_at_once"], 1u) << "every fork waited for a stall";
}

}  // namespace
}  // namespace tipfs::spec::testing
