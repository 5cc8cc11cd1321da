// History recordings without a mount: the file format round-trips, a file out of bounds or torn
// is refused, a recording replaces the last one of its command, and the directory keeps at most
// kMaxRecordings of them, private to the user.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "speculate/history_file.h"
#include "tests/speculate/state_dir_fixture.h"

namespace tipfs::spec {
namespace {

Recording Sample() {
  Recording r;
  r.executable = "/usr/bin/ld";
  r.argv = {"ld", "-r", "a.o"};
  r.cwd = "/mnt/tipfs/build";
  r.files = {{"/mnt/tipfs/build/a.o", 12, 4096, 1700000000123456789}};
  r.reads = {{0, 0, 4096}, {0, 100, 50}};
  return r;
}

class HistoryFileTest : public tipfs::spec::testing::StateDirTest {};

TEST_F(HistoryFileTest, ARecordingComesBackAsSavedInAPrivateFile) {
  const uint64_t key = HistoryKey(1, "/usr/bin/ld", Sample().argv, Sample().cwd);
  EXPECT_EQ(LoadRecording(key).error(), ENOENT);
  ASSERT_TRUE(SaveRecording(key, Sample()).ok());
  Result<Recording> loaded = LoadRecording(key);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->argv, Sample().argv);
  EXPECT_EQ(loaded->cwd, Sample().cwd);
  ASSERT_EQ(loaded->files.size(), 1u);
  EXPECT_EQ(loaded->files[0].mtime_nanos, 1700000000123456789);
  ASSERT_EQ(loaded->reads.size(), 2u);
  EXPECT_EQ(loaded->reads[1].offset, 100u);
  struct stat st;
  ASSERT_EQ(stat(HistoryPath(key).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((dir_ + "/history").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  Recording shorter = Sample();
  shorter.reads.pop_back();
  ASSERT_TRUE(SaveRecording(key, shorter).ok());  // replaces
  EXPECT_EQ(LoadRecording(key)->reads.size(), 1u);
}

TEST_F(HistoryFileTest, TheKeyIsTheWholeCommand) {
  const uint64_t key = HistoryKey(1, "/usr/bin/ld", {"ld", "-r", "a.o"}, "/m");
  EXPECT_NE(key, HistoryKey(1, "/usr/bin/ld", {"ld", "-r", "b.o"}, "/m"));
  EXPECT_NE(key, HistoryKey(1, "/usr/bin/ld", {"ld", "-ra.o"}, "/m"));
  EXPECT_NE(key, HistoryKey(1, "/usr/bin/ld", {"ld", "-r", "a.o"}, "/n"));
  EXPECT_NE(key, HistoryKey(2, "/usr/bin/ld", {"ld", "-r", "a.o"}, "/m"));
  EXPECT_NE(key, HistoryKey(1, "/usr/bin/gold", {"ld", "-r", "a.o"}, "/m"));
}

// gcc's collect2 and ld get temporary names made afresh each run (the plugin's resolution file,
// objects compiled on the way, response files): those are the same command each run. Names
// outside the temporary directories, and names in them that are not mkstemp-like, are not.
TEST_F(HistoryFileTest, FreshTemporaryNamesAreTheSameCommand) {
  const std::vector<std::string> temp = {"/work/tmp/t1", "/tmp", "/var/tmp"};
  auto stable = [&](std::vector<std::string> argv) { return StableArguments(argv, temp); };
  auto same = [&](const std::vector<std::string>& a, const std::vector<std::string>& b) {
    return HistoryKey(1, "/usr/bin/ld", stable(a), "/m") ==
           HistoryKey(1, "/usr/bin/ld", stable(b), "/m");
  };
  EXPECT_TRUE(same({"ld", "-plugin-opt=-fresolution=/tmp/ccBfpO2D.res", "a.o", "/tmp/cc4xQz9a.o"},
                   {"ld", "-plugin-opt=-fresolution=/tmp/ccW0kLmq.res", "a.o", "/tmp/ccT2bb8Z.o"}));
  EXPECT_EQ(stable({"-plugin-opt=-fresolution=/tmp/ccBfpO2D.res"})[0],
            "-plugin-opt=-fresolution=/tmp/XXXXXXXX.res");
  EXPECT_TRUE(same({"ld", "/tmp/ccuahbmi.s"}, {"ld", "/tmp/ccQ2x9Za.s"})) << "all lower case";
  EXPECT_TRUE(same({"ld", "@/var/tmp/ccAbC12d"}, {"ld", "@/var/tmp/cc9bCx1q"})) << "response file";
  EXPECT_TRUE(same({"ld", "-o/tmp/ccAbC12d.o"}, {"ld", "-o/tmp/cc9bCx1q.o"}));
  EXPECT_TRUE(same({"ld", "/work/tmp/t1/ccAbC12d.ld"}, {"ld", "/work/tmp/t1/ccZZ1x0q.ld"}))
      << "in $TMPDIR";
  EXPECT_TRUE(same({"ld", "/tmp/tmp.Xa8f3kL2ab/x.o"}, {"ld", "/tmp/tmp.q81MzzP0ce/x.o"}))
      << "in a directory of mktemp -d";
  EXPECT_TRUE(same({"py", "/tmp/tmpk3j_9x2a.json"}, {"py", "/tmp/tmpbq0zz_1m.json"}));
  // Other arguments stay apart.
  EXPECT_FALSE(same({"ld", "/tmp/results"}, {"ld", "/tmp/outputs"})) << "words";
  EXPECT_FALSE(same({"ld", "/tmp/ccAbC12d.o"}, {"ld", "/tmp/ccAbC12d.so"}));
  EXPECT_FALSE(same({"ld", "/tmp/a/ccAbC12d.o"}, {"ld", "/tmp/b/ccAbC12d.o"}));
  EXPECT_FALSE(same({"ld", "/home/u/tmp/ccAbC12d.o"}, {"ld", "/home/u/tmp/cc9bCx1q.o"}));
  EXPECT_FALSE(same({"ld", "/data/ccAbC12d.o"}, {"ld", "/data/cc9bCx1q.o"}));
  EXPECT_FALSE(same({"ld", "/tmpfs/ccAbC12d.o"}, {"ld", "/tmpfs/cc9bCx1q.o"}));
  EXPECT_FALSE(same({"ld", "/tmp/ccAbC12d/x.o"}, {"ld", "/tmp/ccAbC12d/y.o"}));
  EXPECT_FALSE(same({"ld", "a.o", "/tmp/ccAbC12d.o"}, {"ld", "b.o", "/tmp/ccAbC12d.o"}));
}

TEST_F(HistoryFileTest, ATornOrOversizedFileIsRefused) {
  const std::string data = FormatRecording(Sample());
  EXPECT_TRUE(ParseRecording(data).ok());
  EXPECT_EQ(ParseRecording(data.substr(0, data.size() - 3)).error(), EUCLEAN);
  EXPECT_EQ(ParseRecording(data + "x").error(), EUCLEAN);
  EXPECT_EQ(ParseRecording("TIPSITE1").error(), EUCLEAN);
  Recording bad = Sample();
  bad.reads.push_back({7, 0, 1});  // names a file it does not have
  EXPECT_EQ(ParseRecording(FormatRecording(bad)).error(), EUCLEAN);
  Recording huge = Sample();
  huge.reads.assign(kMaxHistoryReads + 1, RecordedRead{0, 0, 1});
  Result<Recording> refused = ParseRecording(FormatRecording(huge));
  EXPECT_EQ(refused.error(), EUCLEAN);
  EXPECT_NE(refused.status().message().find("reads"), std::string::npos);
}

TEST_F(HistoryFileTest, TheDirectoryKeepsAtMostItsNumberOfRecordings) {
  for (size_t i = 0; i < kMaxRecordings + 5; ++i) {
    ASSERT_TRUE(SaveRecording(1000 + i, Sample()).ok());
  }
  Result<std::vector<RecordingEntry>> listed = ListRecordings();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), kMaxRecordings);
  EXPECT_TRUE(std::filesystem::exists(HistoryPath(1000 + kMaxRecordings + 4)));  // the newest
  Result<size_t> removed = ClearRecordings();
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, kMaxRecordings);
  EXPECT_TRUE(ListRecordings()->empty());
}

}  // namespace
}  // namespace tipfs::spec
