// Hints from the last run (issue 10, item 4), on a real mount (label integration). `tipfs run`
// records the program's reads of the mount at its exit; the next run of the same command
// (executable, arguments, directory) discloses them ahead of the program as hints of source
// `history`. Speculation is kept out of most of these tests (a stall no read takes), so every
// hint the mount counts is history's. Each run is cold (remounted), and its output is compared
// with the program's own without tipfs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <filesystem>

#include "speculate/history.h"
#include "tests/speculate/spec_mount_fixture.h"

namespace tipfs::spec::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kFiles = 24;
// No read stalls this long: no speculating child is forked, only history hints.
const std::pair<std::string, std::string> kNoForks = {"TIPSPEC_STALL_USEC", "4000000000"};

class SpecHistoryTest : public SpecMountTest {
 protected:
  void SetUp() override {
    SpecMountTest::SetUp();
    if (mount_ == nullptr || !mount_->mounted()) return;
    state_dir_ = scratch_.root() + "/state";
    fs::create_directories(Path("records"));
    ASSERT_EQ(tipfs::testing::RunCommand(std::string(PARSE_RECORDS) + " --make " +
                                         std::to_string(kFiles) + " " + Path("records") + " 2>&1"),
              0);
    for (int i = 0; i < kFiles; ++i) {
      char name[32];
      snprintf(name, sizeof(name), "records/rec%03d.bin", i);
      files_.push_back(name);
    }
    parser_ = {PARSE_RECORDS};
    parser_.insert(parser_.end(), files_.begin(), files_.end());
    Remount();
    plain_ = scratch_.Run(parser_, false, mount_->mountpoint());
    ASSERT_EQ(plain_.exit_status, 0) << plain_.out.substr(0, 300);
  }

  // A cold run of argv under `tipfs run` with `options` before the `--`; its counters.
  std::map<std::string, uint64_t> Run(const std::vector<std::string>& argv,
                                      const std::vector<std::string>& options = {},
                                      Environment extra = {kNoForks}) {
    Remount();
    scratch_.ClearLogs();
    std::vector<std::string> command = {TipfsBinary(),  "run",
                                        "--mount",      mount_->mountpoint(),
                                        "--stats-file", scratch_.stats_file()};
    command.insert(command.end(), options.begin(), options.end());
    command.push_back("--");
    command.insert(command.end(), argv.begin(), argv.end());
    Environment environment = {{"TIPSPEC_LIBRARY", TIPSPEC_LIBRARY_PATH},
                               {"TIPSPEC_STATE_DIR", state_dir_}};
    environment.insert(environment.end(), extra.begin(), extra.end());
    if (!run_as_.empty()) {
      command.insert(command.begin(), run_as_.begin(), run_as_.end());
      WriteFile(scratch_.stats_file(), "");  // for the other user to append to
      chmod(scratch_.stats_file().c_str(), 0666);
    }
    last_ = scratch_.Run(command, false, mount_->mountpoint(), environment);
    EXPECT_EQ(last_.exit_status, 0);
    return scratch_.Stats();
  }

  uint64_t Mount(const std::string& key) { return MountCounter(mount_->mountpoint(), key); }
  std::string MountStats() { return ReadFile(mount_->mountpoint() + "/.tipfs/stats"); }

  std::vector<std::string> Recordings() const {
    std::vector<std::string> names;
    if (!fs::exists(state_dir_ + "/history")) return names;
    for (const auto& entry : fs::directory_iterator(state_dir_ + "/history")) {
      names.push_back(entry.path().string());
    }
    return names;
  }

  // tipfs run ARGS, stdout and stderr together.
  RunResult Cli(const std::string& args) {
    return scratch_.Run({"sh", "-c", TipfsBinary() + " run " + args + " 2>&1"}, false,
                        mount_->mountpoint(), {{"TIPSPEC_STATE_DIR", state_dir_}});
  }

  std::string state_dir_;
  std::vector<std::string> run_as_;  // a command that runs the rest as another user
  std::vector<std::string> files_;
  std::vector<std::string> parser_;
  RunResult plain_;
  RunResult last_;
};

// The first run records (one coalesced read per file: its header and records are sequential) in
// a private file; the second discloses them before the program reads, and the program's reads
// consume them: the mount counts history blocks consumed, libtipspec agrees, nothing cancelled.
TEST_F(SpecHistoryTest, TheSecondRunHintsFromHistoryAndConsumesThoseHints) {
  std::map<std::string, uint64_t> first = Run(parser_);
  EXPECT_TRUE(last_.out == plain_.out) << "outputs differ";
  EXPECT_EQ(first["forks"], 0u);
  EXPECT_EQ(first["history_hints"], 0u) << "nothing was recorded before";
  EXPECT_EQ(first["history_recorded"], static_cast<uint64_t>(kFiles));
  EXPECT_EQ(Mount("hints.history.bytes"), 0u);
  std::vector<std::string> recordings = Recordings();
  ASSERT_EQ(recordings.size(), 1u);
  struct stat st;
  ASSERT_EQ(stat(recordings[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
  ASSERT_EQ(stat((state_dir_ + "/history").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
  ASSERT_EQ(stat(state_dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  std::map<std::string, uint64_t> second = Run(parser_);
  EXPECT_TRUE(last_.out == plain_.out) << "outputs differ";
  EXPECT_EQ(second["forks"], 0u);
  EXPECT_EQ(second["history_hints"], static_cast<uint64_t>(kFiles));
  EXPECT_EQ(second["history_cancelled"], 0u);
  EXPECT_EQ(second["history_files_changed"], 0u);
  uint64_t bytes = 0;
  for (const std::string& file : files_) bytes += fs::file_size(Path(file));
  EXPECT_EQ(second["history_hint_bytes"], bytes);
  EXPECT_EQ(Mount("hints.history.bytes"), bytes) << MountStats();
  // Each file is one block and one hinted access, and each access ends one way: consumed by the
  // program's read, skipped (passed over by a read that matched a later one: a read that came
  // before the hint call took effect), or cancelled when the replay stops at the program's exit
  // (the rule leaves nothing outstanding). Only history hinted here.
  const uint64_t consumed = Mount("hints.history.consumed");
  EXPECT_EQ(consumed + Mount("hints.skipped") + Mount("hints.cancelled"),
            static_cast<uint64_t>(kFiles))
      << MountStats();
  EXPECT_EQ(Mount("hints.evicted_unused"), 0u) << MountStats();
  EXPECT_GT(consumed, static_cast<uint64_t>(kFiles) / 2) << MountStats();
  EXPECT_EQ(second["mount_consumed_history"], consumed) << "libtipspec and the mount disagree";
  EXPECT_EQ(Recordings().size(), 1u) << "the new recording replaces the old one";
}

// Neither the recording nor the replay makes the program wait for the mount's attributes. The
// kernel marks a FUSE file's atime stale after each read it sends to the daemon, so a stat(2) of
// a file just read is a GETATTR round trip (on RADOS disks also a Stat for st_blocks); the
// recorder's stat of each file after its first read made one per file, in the program's thread,
// which the program without tipfs never makes. The mount counts the GETATTRs it answered: a run
// under `tipfs run` that records (first run) or replays (second) asks for no more of them than
// the program alone does.
TEST_F(SpecHistoryTest, RecordingAndReplayAskTheMountForNoAttributesTheProgramDoesNot) {
  Remount();
  ASSERT_EQ(scratch_.Run(parser_, false, mount_->mountpoint()).exit_status, 0);
  const uint64_t alone = Mount("fuse.getattr.ops");
  std::map<std::string, uint64_t> first = Run(parser_);
  EXPECT_TRUE(last_.out == plain_.out) << "outputs differ";
  EXPECT_EQ(first["history_recorded"], static_cast<uint64_t>(kFiles));
  EXPECT_LE(Mount("fuse.getattr.ops"), alone) << "recording; the program alone: " << alone << "\n"
                                              << MountStats();
  std::map<std::string, uint64_t> second = Run(parser_);
  EXPECT_TRUE(last_.out == plain_.out) << "outputs differ";
  EXPECT_EQ(second["history_hints"], static_cast<uint64_t>(kFiles));
  EXPECT_EQ(second["history_files_changed"], 0u);
  EXPECT_LE(Mount("fuse.getattr.ops"), alone) << "replaying; the program alone: " << alone << "\n"
                                              << MountStats();
}

// The replay checks each recorded file (a stat) before hinting it, and at the program's start no
// name is in the kernel's dentry cache: each check is a LOOKUP round trip before the program's
// first instruction. A refill checks at most kHistoryChecksPerRefill files, the rest at the
// program's next reads: a program that lists its tree first (grep -r) has the kernel learn every
// name from its READDIRPLUS replies, and the later checks cost no round trip. Counted by the mount:
// the replaying run makes at most that many LOOKUPs more than the recording run (64 before).
TEST_F(SpecHistoryTest, AReplayChecksFewFilesBeforeTheProgramListsItsTree) {
  if (!HaveProgram("grep")) GTEST_SKIP() << "grep not installed";
  constexpr int kTreeFiles = 64;
  fs::create_directories(Path("tree"));
  ASSERT_EQ(tipfs::testing::RunCommand(std::string(PARSE_RECORDS) + " --make " +
                                       std::to_string(kTreeFiles) + " " + Path("tree") + " 2>&1"),
            0);
  const std::vector<std::string> grep = {"grep", "-r", "-a", "-c", "", "tree"};
  Remount();
  plain_ = scratch_.Run(grep, false, mount_->mountpoint());
  ASSERT_EQ(plain_.exit_status, 0) << plain_.out.substr(0, 300);
  std::map<std::string, uint64_t> first = Run(grep);
  EXPECT_TRUE(last_.out == plain_.out) << "outputs differ";
  ASSERT_EQ(first["history_recorded"], static_cast<uint64_t>(kTreeFiles));
  const uint64_t recording_lookups = Mount("fuse.lookup.ops");
  std::map<std::string, uint64_t> second = Run(grep);
  EXPECT_TRUE(last_.out == plain_.out) << "outputs differ";
  EXPECT_EQ(second["history_hints"], static_cast<uint64_t>(kTreeFiles));
  EXPECT_EQ(second["history_files_changed"], 0u);
  EXPECT_GT(Mount("hints.history.consumed"), 0u) << MountStats();
  EXPECT_LE(Mount("fuse.lookup.ops"), recording_lookups + kHistoryChecksPerRefill)
      << "lookups of the recording run: " << recording_lookups << "\n"
      << MountStats();
}

// A file touched (new mtime) and one grown (new size) since the recording are not hinted; the
// others are, and the program's output is the same.
TEST_F(SpecHistoryTest, FilesChangedSinceTheRecordingAreNotHinted) {
  Run(parser_);
  struct timespec times[2] = {{1000000, 0}, {1000000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, Path(files_[3]).c_str(), times, 0), 0);
  {
    int fd = open(Path(files_[7]).c_str(), O_WRONLY | O_APPEND);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "trailing", 8), 8);  // past the records: the parser never reads it
    close(fd);
  }
  uint64_t unchanged_bytes = 0;
  for (int i = 0; i < kFiles; ++i) {
    if (i != 3 && i != 7) unchanged_bytes += fs::file_size(Path(files_[i]));
  }
  std::map<std::string, uint64_t> second = Run(parser_);
  EXPECT_TRUE(last_.out == plain_.out) << "outputs differ";
  EXPECT_EQ(second["history_files_changed"], 2u);
  EXPECT_EQ(second["history_hints"], static_cast<uint64_t>(kFiles - 2));
  EXPECT_EQ(second["history_hint_bytes"], unchanged_bytes);
  EXPECT_EQ(Mount("hints.history.bytes"), unchanged_bytes) << MountStats();
}

// The key is the whole command: other arguments (the same files in another order) are another
// command, with a recording of its own.
TEST_F(SpecHistoryTest, ADifferentArgumentListDoesNotReuseARecording) {
  Run(parser_);
  std::vector<std::string> reversed = {PARSE_RECORDS};
  reversed.insert(reversed.end(), files_.rbegin(), files_.rend());
  std::map<std::string, uint64_t> other = Run(reversed);
  EXPECT_EQ(other["history_hints"], 0u);
  EXPECT_EQ(Mount("hints.history.bytes"), 0u) << MountStats();
  EXPECT_EQ(Recordings().size(), 2u);
  std::map<std::string, uint64_t> again = Run(parser_);  // the first command's is still there
  EXPECT_EQ(again["history_hints"], static_cast<uint64_t>(kFiles));
}

// A driver passes its tool a temporary file made afresh each run (gcc gives collect2 and ld
// /tmp/ccXXXXXX.res and the like): the second run is still the same command and replays the
// first's reads. An argument that differs outside the temporary directory is another command.
TEST_F(SpecHistoryTest, AFreshTemporaryFileNameIsStillTheSameCommand) {
  const char* tmpdir = getenv("TMPDIR");
  const std::string temporary = tmpdir != nullptr && tmpdir[0] == '/' ? tmpdir : "/tmp";
  auto with = [&](const std::string& unlinked) {
    std::vector<std::string> argv = {PARSE_RECORDS, "--unlink-after", unlinked};
    argv.insert(argv.end(), files_.begin(), files_.end());
    return argv;
  };
  auto fresh = [&] {
    std::string name = temporary + "/ccXXXXXX.res";
    const int fd = mkstemps(name.data(), 4);
    EXPECT_GE(fd, 0) << name;
    close(fd);
    return name;
  };
  Run(with(fresh()));
  EXPECT_TRUE(last_.out == plain_.out) << "outputs differ";
  std::map<std::string, uint64_t> second = Run(with(fresh()));
  EXPECT_TRUE(last_.out == plain_.out) << "outputs differ";
  EXPECT_EQ(second["history_hints"], static_cast<uint64_t>(kFiles)) << "not the same command";
  EXPECT_EQ(second["history_cancelled"], 0u);
  EXPECT_GE(Mount("hints.history.consumed"), 1u) << MountStats();
  EXPECT_EQ(Recordings().size(), 1u);
  // The same names outside the temporary directory (on the mount) are real arguments.
  std::map<std::string, uint64_t> outside = Run(with(Path("ccAbC12d.res")));
  EXPECT_EQ(outside["history_hints"], 0u);
  std::map<std::string, uint64_t> other = Run(with(Path("cc9bCx1q.res")));
  EXPECT_EQ(other["history_hints"], 0u) << "another argument replayed the recording";
  EXPECT_EQ(Recordings().size(), 3u);
}

// --history off neither records nor replays; TIPSPEC_HISTORY=0 is the same.
TEST_F(SpecHistoryTest, HistoryOffRecordsAndReplaysNothing) {
  std::map<std::string, uint64_t> off = Run(parser_, {"--history", "off"});
  EXPECT_EQ(off["history_recorded"], 0u);
  EXPECT_TRUE(Recordings().empty());
  Run(parser_);  // recorded
  ASSERT_EQ(Recordings().size(), 1u);
  std::map<std::string, uint64_t> replay_off = Run(parser_, {"--history", "off"});
  EXPECT_TRUE(last_.out == plain_.out) << "outputs differ";
  EXPECT_EQ(replay_off["history_hints"], 0u);
  EXPECT_EQ(Mount("hints.history.bytes"), 0u) << MountStats();
  std::map<std::string, uint64_t> env_off = Run(parser_, {}, {kNoForks, {"TIPSPEC_HISTORY", "0"}});
  EXPECT_EQ(env_off["history_hints"], 0u);
  EXPECT_EQ(Mount("hints.history.bytes"), 0u) << MountStats();
}

TEST_F(SpecHistoryTest, RecordingsAreListedAndCleared) {
  Run(parser_);
  RunResult listed = Cli("--history-list");
  EXPECT_EQ(listed.exit_status, 0) << listed.out;
  EXPECT_NE(listed.out.find("24 reads of 24 files"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find(files_[5]), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("in " + mount_->mountpoint()), std::string::npos) << listed.out;
  RunResult cleared = Cli("--history-clear");
  EXPECT_EQ(cleared.exit_status, 0);
  EXPECT_EQ(cleared.out, "removed 1 recording\n");
  EXPECT_TRUE(Recordings().empty());
  EXPECT_EQ(Cli("--history-list").out, "");
  std::map<std::string, uint64_t> after = Run(parser_);
  EXPECT_EQ(after["history_hints"], 0u) << "a cleared recording was replayed";
  // Bad input: one line each, exit status 2.
  for (const std::string& bad :
       {std::string("--history-list -- cat x"), std::string("--history maybe -- true"),
        std::string("--history-list --history-clear")}) {
    RunResult refused = Cli(bad);
    EXPECT_EQ(refused.exit_status, 2) << bad;
    EXPECT_EQ(std::count(refused.out.begin(), refused.out.end(), '\n'), 1) << refused.out;
  }
}

// A program that reads two files in turns, a byte at a time, makes reads no coalescing can join:
// the recording keeps the first kMaxHistoryReads (16384) and stays under 1 MiB.
TEST_F(SpecHistoryTest, ARecordingStaysWithinItsBound) {
  if (!HaveProgram("python3")) GTEST_SKIP() << "python3 not installed";
  WriteFile(Path("a"), std::string(12000, 'a'));
  WriteFile(Path("b"), std::string(12000, 'b'));
  const std::string script = scratch_.root() + "/turns.py";
  WriteFile(script,
            "import os\n"
            "a = os.open('a', os.O_RDONLY); b = os.open('b', os.O_RDONLY)\n"
            "n = 0\n"
            "for i in range(12000):\n"
            "    n += len(os.pread(a, 1, i)) + len(os.pread(b, 1, i))\n"
            "print(n)\n");
  std::map<std::string, uint64_t> stats = Run({"python3", script});
  EXPECT_EQ(last_.out, "24000\n");
  EXPECT_EQ(stats["history_recorded"], 16384u);
  std::vector<std::string> recordings = Recordings();
  ASSERT_EQ(recordings.size(), 1u);
  EXPECT_LT(fs::file_size(recordings[0]), 1u << 20);
}

// A loader reading the files named in a list (kept off the mount, so the command stays the same)
// whose list changed after its first half: the program's reads match the recording for 12 files,
// and then none of its reads is among the next recorded ones; 16 such reads in a row cancel the
// 12 files' hints still outstanding, and the program's output is its own.
TEST_F(SpecHistoryTest, AMismatchThatPersistsCancelsTheRestOfTheHistory) {
  if (!HaveProgram("python3")) GTEST_SKIP() << "python3 not installed";
  fs::create_directories(Path("others"));
  ASSERT_EQ(tipfs::testing::RunCommand(std::string(PARSE_RECORDS) + " --make 24 " + Path("others") +
                                       " 2>&1"),
            0);
  const std::string list = scratch_.root() + "/list";
  const std::string script = scratch_.root() + "/load.py";
  WriteFile(script,
            "import hashlib\n"
            "for name in open('" +
                list +
                "').read().split():\n"
                "    with open(name, 'rb') as f:\n"
                "        print(name, hashlib.sha256(f.read()).hexdigest())\n");
  std::string first_list, second_list;
  for (const std::string& file : files_) first_list += file + "\n";
  for (int i = 0; i < 12; ++i) second_list += files_[i] + "\n";
  for (int i = 0; i < 24; ++i) {
    char name[32];
    snprintf(name, sizeof(name), "others/rec%03d.bin", i);
    second_list += std::string(name) + "\n";
  }
  WriteFile(list, first_list);
  std::map<std::string, uint64_t> first = Run({"python3", script});
  EXPECT_EQ(first["history_recorded"], static_cast<uint64_t>(kFiles));
  WriteFile(list, second_list);
  Remount();
  RunResult plain = scratch_.Run({"python3", script}, false, mount_->mountpoint());
  std::map<std::string, uint64_t> second = Run({"python3", script});
  EXPECT_EQ(last_.out, plain.out);
  EXPECT_EQ(second["history_hints"], static_cast<uint64_t>(kFiles));
  EXPECT_EQ(second["history_cancelled"], 12u);
  EXPECT_GE(Mount("hints.history.consumed"), 1u) << MountStats();
}

// A program killed before it exits keeps the last recording: the run after it still replays it.
TEST_F(SpecHistoryTest, AKilledProgramKeepsTheOldRecording) {
  if (!HaveProgram("python3")) GTEST_SKIP() << "python3 not installed";
  const std::string flag = scratch_.root() + "/die";
  const std::string script = scratch_.root() + "/reader.py";
  WriteFile(script,
            "import os, signal\n"
            "names = sorted(os.listdir('records'))\n"
            "if os.path.exists('" +
                flag +
                "'): names = names[:3]\n"
                "for name in names:\n"
                "    with open('records/' + name, 'rb') as f: f.read()\n"
                "if os.path.exists('" +
                flag +
                "'): os.kill(os.getpid(), signal.SIGKILL)\n"
                "print(len(names))\n");
  Run({"python3", script});
  ASSERT_EQ(Recordings().size(), 1u);
  const std::string saved = ReadFile(Recordings()[0]);
  WriteFile(flag, "");
  Remount();
  scratch_.Run(
      {TipfsBinary(), "run", "--mount", mount_->mountpoint(), "--", "python3", script}, false,
      mount_->mountpoint(),
      {{"TIPSPEC_LIBRARY", TIPSPEC_LIBRARY_PATH}, {"TIPSPEC_STATE_DIR", state_dir_}, kNoForks});
  EXPECT_TRUE(ReadFile(Recordings()[0]) == saved) << "a killed run replaced the recording";
  unlink(flag.c_str());
  std::map<std::string, uint64_t> after = Run({"python3", script});
  EXPECT_EQ(last_.out, std::to_string(kFiles) + "\n");
  EXPECT_EQ(after["history_hints"], static_cast<uint64_t>(kFiles));
}

// Speculation and history together (lockstep, a child forked at every read): the same output,
// and both sources' hints consumed.
TEST_F(SpecHistoryTest, HistoryAndSpeculationRunTogether) {
  const Environment speculate = {
      {"TIPSPEC_LOCKSTEP", "1"}, {"TIPSPEC_STALL_USEC", "0"}, {"TIPSPEC_WAIT", "0"}};
  Run(parser_, {}, speculate);
  EXPECT_TRUE(last_.out == plain_.out) << "outputs differ";
  std::map<std::string, uint64_t> second = Run(parser_, {}, speculate);
  EXPECT_TRUE(last_.out == plain_.out) << "outputs differ";
  EXPECT_GE(second["forks"], 1u);
  EXPECT_EQ(second["history_hints"], static_cast<uint64_t>(kFiles));
  EXPECT_GE(Mount("hints.history.consumed"), 1u) << MountStats();
}

// A recording names the files its user read. Replayed for another user (handed over, same
// command), it hints only what that user may read: the daemon resolves each path with the
// reader's credentials, so a file it may not read (0600) or whose directory it may not search is
// never prefetched. And a recording is only ever used by the user who owns it: one that another
// user owns (even a readable one), or one in a state directory of another user (root with
// someone else's TIPSPEC_STATE_DIR or HOME), is neither replayed nor replaced.
class SpecHistoryUsersTest : public SpecHistoryTest {
 protected:
  std::string MoreMountArgs() const override { return "--allow-other"; }
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to run the program as another user";
    if (!HaveProgram("setpriv")) GTEST_SKIP() << "setpriv (util-linux) not installed";
    SpecHistoryTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_EQ(chmod(mount_->root().c_str(), 0755), 0);  // mkdtemp made it 0700
    ASSERT_EQ(chmod(mount_->mountpoint().c_str(), 0755), 0);
    ASSERT_EQ(chmod(scratch_.root().c_str(), 0711), 0);
    fs::copy_file(Path(files_[0]), Path("secret"));
    ASSERT_EQ(chmod(Path("secret").c_str(), 0600), 0);
    fs::create_directories(Path("private"));
    fs::copy_file(Path(files_[1]), Path("private/inner"));
    ASSERT_EQ(chmod(Path("private").c_str(), 0700), 0);
    ASSERT_EQ(chmod(Path("private/inner").c_str(), 0644), 0);
    own_state_ = state_dir_;
    nobody_state_ = scratch_.root() + "/nobody-state";
    fs::create_directories(nobody_state_ + "/history");
    for (const std::string& dir : {nobody_state_, nobody_state_ + "/history"}) {
      ASSERT_EQ(chown(dir.c_str(), kNobody, kNobody), 0);
      ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
    }
    // Public files around the two the other user may not read.
    argv_ = {PARSE_RECORDS, "--skip-unreadable"};
    argv_.insert(argv_.end(), files_.begin(), files_.begin() + kFiles / 2);
    argv_.insert(argv_.end(), {"secret", "private/inner"});
    argv_.insert(argv_.end(), files_.begin() + kFiles / 2, files_.end());
  }
  void AsNobody() {
    run_as_ = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
    state_dir_ = nobody_state_;
  }
  // Puts `recording` into the other user's history directory, owned by `uid`, mode `mode`.
  void HandOver(const std::string& recording, uid_t uid, mode_t mode) {
    const std::string copy = nobody_state_ + "/history/" + fs::path(recording).filename().string();
    fs::copy_file(recording, copy, fs::copy_options::overwrite_existing);
    ASSERT_EQ(chown(copy.c_str(), uid, uid), 0);
    ASSERT_EQ(chmod(copy.c_str(), mode), 0);
  }

  static constexpr uid_t kNobody = 65534;
  std::string own_state_;
  std::string nobody_state_;
  std::vector<std::string> argv_;
};

TEST_F(SpecHistoryUsersTest, AnotherUsersRecordingHintsOnlyWhatTheReaderMayRead) {
  std::map<std::string, uint64_t> first = Run(argv_);  // root: reads all 26
  EXPECT_EQ(first["history_recorded"], static_cast<uint64_t>(kFiles + 2));
  std::vector<std::string> recordings = Recordings();
  ASSERT_EQ(recordings.size(), 1u);
  HandOver(recordings[0], kNobody, 0600);

  AsNobody();
  std::map<std::string, uint64_t> replayed = Run(argv_);
  EXPECT_NE(last_.out.find("secret unreadable"), std::string::npos) << last_.out;
  EXPECT_NE(last_.out.find("private/inner unreadable"), std::string::npos) << last_.out;
  uint64_t readable_bytes = 0;
  for (const std::string& file : files_) readable_bytes += fs::file_size(Path(file));
  EXPECT_EQ(replayed["history_hints"], static_cast<uint64_t>(kFiles));
  EXPECT_EQ(replayed["history_hint_bytes"], readable_bytes);
  EXPECT_EQ(Mount("hints.history.bytes"), readable_bytes)
      << "a file the reader may not read was hinted\n"
      << MountStats();
  ASSERT_EQ(Recordings().size(), 1u);
  struct stat st;
  ASSERT_EQ(stat(Recordings()[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kNobody) << "the other user's run saved its own recording";
}

TEST_F(SpecHistoryUsersTest, ARecordingOfAnotherUserIsNeitherReplayedNorReplaced) {
  Run(argv_);
  const std::string roots = Recordings()[0];
  // Root's recording, readable by all, in nobody's directory: not nobody's.
  HandOver(roots, 0, 0644);
  AsNobody();
  std::map<std::string, uint64_t> foreign = Run(argv_);
  EXPECT_EQ(foreign["history_hints"], 0u) << "a recording root owns was replayed for nobody";
  EXPECT_EQ(Mount("hints.history.bytes"), 0u) << MountStats();
  // nobody's own recording now; root with nobody's state directory neither uses nor replaces it.
  const std::string nobodys = ReadFile(Recordings()[0]);
  run_as_.clear();
  std::map<std::string, uint64_t> as_root = Run(argv_);
  EXPECT_EQ(as_root["history_hints"], 0u) << "root replayed nobody's recording";
  EXPECT_EQ(Mount("hints.history.bytes"), 0u) << MountStats();
  ASSERT_EQ(Recordings().size(), 1u);
  EXPECT_TRUE(ReadFile(Recordings()[0]) == nobodys) << "root replaced nobody's recording";
  // Group- or world-writable: someone else could have written it.
  state_dir_ = own_state_;
  ASSERT_EQ(chmod(roots.c_str(), 0622), 0);
  std::map<std::string, uint64_t> writable = Run(argv_);
  EXPECT_EQ(writable["history_hints"], 0u) << "a recording others may write was replayed";
}

}  // namespace
}  // namespace tipfs::spec::testing
