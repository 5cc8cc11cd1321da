// libtipspec on a real tipfs mount (label integration; skipped without /dev/fuse): programs run
// with and without `tipfs run` print the same bytes, the hostile program leaves the file system
// and the world as it alone would, a reader in pieces with read() and lseek() gets its data,
// and in kernel data-cache mode a speculative run over cold files leaves only real data in the
// page cache and in the daemon's cache (hazard 3). Each speculated run starts cold (remount)
// and speculates at every read in lockstep (the program waits for its child's next logged read),
// so the child runs ahead of the program on data nobody has read yet.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "tests/speculate/hostile_run.h"
#include "tests/speculate/spec_mount_fixture.h"
#include "tests/support/fs_inspect.h"

namespace tipfs::spec::testing {
namespace {

namespace fs = std::filesystem;
using tipfs::testing::RunCommand;
using tipfs::testing::VolumeSpec;

// Hazard 3. The child runs ahead over files nobody has read (cold: remounted, and no page cache)
// without waiting for data: the mount answers its reads of uncached data with EAGAIN after
// hinting them. Nothing it did not really read may be left anywhere: the program's own output,
// the page cache (a plain cat right after), and the daemon's cache (a plain cat after the page
// cache is dropped) all hold the real bytes.
TEST_F(SpecMountSlowDisksTest, KernelCacheModeHoldsOnlyRealDataAfterASpeculativeRunOverColdFiles) {
  std::map<std::string, std::string> expected;
  fs::create_directories(Path("cold"));
  std::vector<std::string> argv = {"cat"};
  for (int i = 0; i < 48; ++i) {
    std::string path = Path("cold/f" + std::to_string(100 + i));
    expected[path] = MakeText(500 + i, 20000 + 7919 * (i % 37));
    WriteFile(path, expected[path]);
    argv.push_back(path);
  }
  std::string all;
  for (const auto& [path, content] : expected) all += content;
  Remount();
  RunResult speculated = RunSpeculated(argv);
  ASSERT_EQ(speculated.exit_status, 0);
  EXPECT_TRUE(speculated.out == all) << "cat under speculation printed other bytes";
  auto stats = scratch_.Stats();
  uint64_t eagain = MountCounter(mount_->mountpoint(), "speculation.eagain");
  EXPECT_GT(stats["reads_without_data"] + eagain, 0u)
      << "the child never read uncached data: the EAGAIN path was not taken\n"
      << ReadFile(scratch_.stats_file());
  EXPECT_GE(stats["hints_consumed"], 10u);

  for (const auto& [path, content] : expected) {  // the page cache
    RunResult cat = scratch_.Run({"cat", path}, false);
    EXPECT_TRUE(cat.out == content) << path << " read back wrong from the page cache";
  }
  std::ofstream drop("/proc/sys/vm/drop_caches");
  if (!drop) GTEST_SKIP() << "cannot drop the page cache (not root): the daemon's cache unchecked";
  sync();
  drop << "3\n";
  drop.close();
  for (const auto& [path, content] : expected) {  // the daemon's cache, and the disks
    RunResult cat = scratch_.Run({"cat", path}, false);
    EXPECT_TRUE(cat.out == content) << path << " read back wrong after dropping the page cache";
  }
}

TEST_F(SpecMountTest, GrepRecursiveIsByteIdentical) {
  MakeTree("tree", 6, 20);
  ExpectSameOutput({"grep", "-r", "-n", "kilo lima", "tree"});
}

// Without --mount, `tipfs run` watches every tipfs mount. One that cannot be opened (here its
// daemon is gone, so its root answers ENOTCONN or ECONNABORTED; another user's would answer EACCES)
// is read without speculation, and speculation on the others goes on as before.
TEST_F(SpecMountTest, AMountThatCannotBeOpenedDoesNotStopSpeculationOnAnother) {
  tipfs::testing::TipfsMount dead;
  ASSERT_EQ(dead.Create(), "");
  ASSERT_EQ(dead.Mount(), "");
  const pid_t daemon = tipfs::testing::ReadDaemonPid(dead.disks()[0]);
  ASSERT_GT(daemon, 0);
  ASSERT_EQ(kill(daemon, SIGKILL), 0);
  ASSERT_TRUE(tipfs::testing::WaitForProcessExit(daemon, 10));
  EXPECT_EQ(open(dead.mountpoint().c_str(), O_RDONLY | O_DIRECTORY), -1);
  const int error = errno;  // 6.x kernels answer ECONNABORTED for a connection that was aborted
  EXPECT_TRUE(error == ENOTCONN || error == ECONNABORTED) << strerror(error);
  MakeTree("tree", 3, 10);
  watch_every_mount_ = true;
  ExpectSameOutput({"grep", "-r", "-n", "kilo lima", "tree"});
}

// Direct reads: each of the program's reads is one read of the mount, counted.
class SpecMountDirectTest : public SpecMountTest {
 protected:
  std::string DataCache() const override { return "direct"; }
};

// In direct mode, where each of the program's reads reaches the daemon: in kernel mode the
// kernel's read-ahead brings the rest of a file after a stream's first small read, and the
// child's hints of it are never read at the mount.
TEST_F(SpecMountDirectTest, StdioReaderIsByteIdentical) {
  ExpectSameOutput(ProgramOverTextFiles(HAZARD_STDIO, "text", 8, 10, 20000, 15000));
}

// libtipspec turns a program's read-only FILE streams into streams whose refills it sees. They
// read 32 KiB after a seek where glibc's read 8 KiB (BUFSIZ), so at most 4 times the bytes here;
// buffers of the mount's st_blksize (128 KiB), refilled after every seek, read 14 times as much
// (GNU ld, seeking about each object, read 343 MB under `tipfs run` where it read 37 MB without).
// No child is forked (no read stalls that long), so the mount's counters are the program's.
TEST_F(SpecMountDirectTest, StdioStreamsReadAboutWhatPlainStreamsRead) {
  const std::vector<std::string> argv =
      ProgramOverTextFiles(STDIO_SEEKER, "object", 4, 20, 150000, 40000);
  Remount();
  RunResult plain = scratch_.Run(argv, false, mount_->mountpoint());
  ASSERT_EQ(plain.exit_status, 0) << plain.out.substr(0, 500);
  const uint64_t plain_bytes = MountCounter(mount_->mountpoint(), "fuse.read.bytes");
  Remount();
  RunResult speculated = RunSpeculated(argv, {{"TIPSPEC_STALL_USEC", "1000000000"}});
  EXPECT_EQ(speculated.exit_status, 0);
  EXPECT_TRUE(speculated.out == plain.out) << "outputs differ";
  EXPECT_EQ(scratch_.Stats()["forks"], 0u);
  EXPECT_GT(plain_bytes, 0u);
  EXPECT_LE(MountCounter(mount_->mountpoint(), "fuse.read.bytes"), 5 * plain_bytes)
      << "the program read far more of the mount under tipfs run";
}

TEST_F(SpecMountTest, Sha256sumOverManyFilesIsByteIdentical) {
  MakeTree("tree", 5, 20);
  std::vector<std::string> argv = {"sha256sum"};
  for (const std::string& file : FilesUnder("tree")) argv.push_back(file);
  ExpectSameOutput(argv);
}

TEST_F(SpecMountTest, TarOfATreeIsByteIdentical) {
  MakeTree("tree", 4, 20);
  ExpectSameOutput(
      {"tar", "cf", "-", "--sort=name", "--mtime=@0", "--owner=0", "--group=0", "tree"});
}

TEST_F(SpecMountTest, GnuLdLinkingManyObjectsIsByteIdentical) {
  if (!HaveProgram("cc") || !HaveProgram("ld")) GTEST_SKIP() << "cc or ld not installed";
  std::string sources = scratch_.root() + "/sources";
  fs::create_directories(sources);
  fs::create_directories(Path("objects"));
  std::string compile = "cd " + sources + " && cc -c -O1";
  std::string linked = scratch_.root() + "/linked.o";
  std::vector<std::string> argv = {"ld", "-r", "-o", linked};
  for (int i = 0; i < 40; ++i) {
    std::string name = "unit" + std::to_string(i);
    std::string body = "int " + name + "_value = " + std::to_string(i) + ";\n";
    for (int k = 0; k < 20; ++k) {
      body += "int " + name + "_f" + std::to_string(k) + "(int x) { return x * " +
              std::to_string(k + i) + " + " + name + "_value; }\n";
    }
    WriteFile(sources + "/" + name + ".c", body);
    compile += " " + name + ".c";
    argv.push_back("objects/" + name + ".o");
  }
  ASSERT_EQ(system((compile + " && cp *.o " + Path("objects")).c_str()), 0);
  ExpectSameOutput(argv, linked);
}

TEST_F(SpecMountTest, BenchWorkloadsAreByteIdentical) {
  std::string pattern_line;
  ASSERT_EQ(RunCommand(std::string(TIPFS_BENCH_GEN) + " agrep --dir " + mount_->mountpoint() +
                           " --files 80 --total 1M 2>/dev/null",
                       &pattern_line),
            0);
  std::string pattern = pattern_line.substr(pattern_line.find("pattern=") + 8);
  pattern.erase(pattern.find_last_not_of("\n") + 1);
  ASSERT_EQ(RunCommand(std::string(TIPFS_BENCH_GEN) + " gnuld --dir " + mount_->mountpoint() +
                       " --objects 24 --total 2M >/dev/null 2>&1"),
            0);
  ASSERT_EQ(RunCommand(std::string(TIPFS_BENCH_GEN) + " xdataslice --dir " + mount_->mountpoint() +
                       " --dim 64 >/dev/null 2>&1"),
            0);
  {
    SCOPED_TRACE("agrep");
    ExpectSameOutput({TIPFS_BENCH_AGREP, "-p", pattern, "text"});
  }
  {
    SCOPED_TRACE("gnuld");
    std::vector<std::string> argv = {TIPFS_BENCH_GNULD, "-o", scratch_.root() + "/image"};
    for (const std::string& file : FilesUnder("objects")) argv.push_back(file);
    ExpectSameOutput(argv);
  }
  {
    SCOPED_TRACE("xdataslice");
    ExpectSameOutput({TIPFS_BENCH_XDATASLICE, "--slices", "4", "volume.tvol"});
  }
}

// Hazard 2 on the mount: the hostile program's work directory is on the mount, so what its
// run-ahead tries (writes, truncation, unlink, rename, shared mappings, ...) would reach the
// file system; afterwards the tree, the signals and the socket traffic are the program's alone.
TEST_F(SpecMountTest, HostileProgramLeavesTheFileSystemAndTheWorldAsItAloneWould) {
  WriteFile(Path("input.txt"), MakeText(2, 5000));
  Remount();
  ExpectNoSideEffects(scratch_, Path("input.txt"), mount_->mountpoint(),
                      {{"TIPSPEC_MOUNT", mount_->mountpoint()}, {"TIPSPEC_HINT_LOG", ""}});
}

// Hazard 1 on the mount: reads in pieces with read/readv/pread and lseek (and a directory walk)
// while the run-ahead moves every shared description; the program's data and positions are
// its own.
TEST_F(SpecMountTest, ReaderInPiecesWithReadAndLseekGetsIdenticalData) {
  WriteFile(Path("data.txt"), MakeText(1, 200000));
  fs::create_directories(Path("many"));
  for (int i = 0; i < 600; ++i) WriteFile(Path("many/entry-" + std::to_string(i)), "");
  WriteFile(scratch_.root() + "/lock", MakeText(3, 50000));
  // Whether a hinted block is used here is a race, not the point: the child that disturbs the
  // descriptions also reads the whole file, so its hints may bring in every block before the
  // program reads one (CI saw hints_consumed 0 under load).
  require_hints_consumed_ = false;
  std::string out =
      ExpectSameOutput({HAZARD_OFFSETS, Path("data.txt"), Path("many"), scratch_.root() + "/lock"});
  EXPECT_NE(out.find("lock still held by us: yes"), std::string::npos);
}

// `tipfs run --stats-file` counts the whole process tree: a program whose reads happen in the
// children it forks (without exec) gets one block of counters per process, and the children's
// blocks hold their reads (each read of the mount is checked against a child in lockstep), also
// for children that end in _exit(2), as fork servers and Python's multiprocessing do.
TEST_F(SpecMountTest, StatsFileCountsTheReadsOfForkedChildren) {
  constexpr int kChildren = 4;
  std::vector<std::string> argv = {FORK_READERS, std::to_string(kChildren)};
  uint64_t reads = 0;  // 4 KiB reads to the end, and the read that finds it
  for (int i = 0; i < 9; ++i) {
    const std::string name = "files/f" + std::to_string(i);
    fs::create_directories(Path("files"));
    const size_t bytes = 5000 + 7000 * static_cast<size_t>(i);
    WriteFile(Path(name), MakeText(i, bytes));
    reads += fs::file_size(Path(name)) / 4096 + 1 + (fs::file_size(Path(name)) % 4096 != 0);
    argv.push_back(name);
  }
  for (const bool underscore_exit : {false, true}) {
    std::vector<std::string> command = argv;
    if (underscore_exit) command.insert(command.begin() + 1, "--underscore-exit");
    ExpectSameOutput(command);
    // One block per process of the tree (the parent and its children), each with its pid.
    std::string text = ReadFile(scratch_.stats_file());
    size_t blocks = 0;
    for (size_t at = text.find("tipspec.pid "); at != std::string::npos;
         at = text.find("tipspec.pid ", at + 1)) {
      ++blocks;
    }
    EXPECT_EQ(blocks, 1u + kChildren) << (underscore_exit ? "_exit" : "exit") << "\n" << text;
    EXPECT_EQ(scratch_.Stats()["reads_checked"], reads) << (underscore_exit ? "_exit" : "exit");
  }
}

}  // namespace
}  // namespace tipfs::spec::testing
