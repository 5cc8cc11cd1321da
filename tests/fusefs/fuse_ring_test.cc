// FUSE over io_uring (`tipfs mount --fuse-io-uring on`, fusefs/fuse_ring.h): requests reach the
// daemon over the ring, many reads in flight are each answered once with the right bytes (their
// replies come from the disks' completions, on other threads than the ring's), and the daemon
// stops cleanly on SIGTERM and leaves a usable volume when killed. The POSIX, concurrency, mmap
// and real-program tests also run over the ring (their "_ring" parameters).
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fusefs/fuse_ring_switch.h"
#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"
#include "tests/support/temp_dir.h"

namespace tipfs::testing {
namespace {

TEST(FuseRingSwitchTest, SaysHowToTurnTheRingOn) {
  TempDir dir;
  const std::string path = dir.path() + "/enable_uring";
  std::ofstream(path) << "N\n";
  Status st = fusefs::CheckKernelOffersFuseRing(path);
  EXPECT_EQ(st.error(), EOPNOTSUPP);
  EXPECT_NE(st.ToString().find("echo Y > " + path), std::string::npos) << st.ToString();
  std::ofstream(path) << "Y\n";
  EXPECT_TRUE(fusefs::CheckKernelOffersFuseRing(path).ok());
  st = fusefs::CheckKernelOffersFuseRing(dir.path() + "/missing");
  EXPECT_NE(st.ToString().find("Linux 6.14"), std::string::npos) << st.ToString();
}

class FuseRingTest : public MountedTest {
 protected:
  VolumeSpec Spec() const override {
    VolumeSpec spec;
    // Reads miss (small cache, no read-ahead) and wait for the emulated disks, so their replies
    // come from completions.
    spec.mount_args =
        DataCacheArgs("direct_ring") + " --disk-model nvme --readahead off --cache-size 4M";
    return spec;
  }
};

TEST_F(FuseRingTest, RequestsComeOverTheRing) {
  ASSERT_TRUE(WriteFileBytes(Path("a"), "over the ring"));
  ASSERT_EQ(mkdir(Path("dir").c_str(), 0755), 0);
  ASSERT_EQ(rename(Path("a").c_str(), Path("dir/b").c_str()), 0) << ErrnoName(errno);
  EXPECT_EQ(ReadFileOrDie(Path("dir/b")), "over the ring");
  ASSERT_EQ(unlink(Path("dir/b").c_str()), 0);
  // create, write, release, mkdir, rename, lookup, open, read, unlink and their getattrs
  EXPECT_GE(MountCounter(mount_->mountpoint(), "fuse.ring.requests"), 10u);
}

constexpr size_t kPiece = 4096;

// Counts of one reader's 4 KiB reads at random offsets of a file whose bytes are `data`.
struct ReadCounts {
  std::atomic<int> answered{0};
  std::atomic<int> wrong{0};   // answered with bytes other than the file's at that offset
  std::atomic<int> failed{0};  // the open, or a read, failed or came short
};

// Reads `reads` pieces of `path` (or, with reads < 0, until a read fails), counting into `counts`.
void ReadPiecesAtRandom(const std::string& path, const std::string& data, uint64_t seed, int reads,
                        ReadCounts* counts) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ++counts->failed;
    return;
  }
  std::mt19937_64 rng(seed);
  std::string buf(kPiece, '\0');
  for (int i = 0; reads < 0 || i < reads; ++i) {
    const size_t offset = (rng() % (data.size() / kPiece)) * kPiece;
    if (pread(fd, buf.data(), kPiece, static_cast<off_t>(offset)) != static_cast<ssize_t>(kPiece)) {
      ++counts->failed;
      if (reads < 0) break;
      continue;
    }
    ++counts->answered;
    if (buf.compare(0, kPiece, data, offset, kPiece) != 0) ++counts->wrong;
  }
  close(fd);
}

// 32 threads read 4 KiB pieces of a 24 MiB file at random (the cache holds a sixth of it), so up to
// 32 reads wait for the disks at once, and each reply is committed from a completion.
TEST_F(FuseRingTest, ManyReadsInFlightGetTheirOwnBytes) {
  constexpr int kThreads = 32;
  constexpr int kReadsPerThread = 200;
  const std::string data = PatternBytes(24u << 20, 5);
  ASSERT_TRUE(WriteFileBytes(Path("big"), data));
  const uint64_t ring_before = MountCounter(mount_->mountpoint(), "fuse.ring.requests");
  ReadCounts counts;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back(
        [&, t] { ReadPiecesAtRandom(Path("big"), data, t + 1, kReadsPerThread, &counts); });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counts.failed.load(), 0);
  EXPECT_EQ(counts.wrong.load(), 0) << "reads got another read's bytes";
  EXPECT_GE(MountCounter(mount_->mountpoint(), "fuse.ring.requests") - ring_before,
            static_cast<uint64_t>(kThreads) * kReadsPerThread);
}

// One reader: each read that misses leaves one reply owed while it waits for the disk, so the
// queue's thread spins for the reply before it sleeps, and `tipfs stats` counts the spins. How many
// the reply ended is the machine's business (a loaded CPU answers late), not the test's.
TEST_F(FuseRingTest, ReplySpinsShowInStats) {
  const std::string data = PatternBytes(16u << 20, 9);
  ASSERT_TRUE(WriteFileBytes(Path("alone"), data));
  // A fresh daemon: the write's waits, which no spin covers, would have stopped the spinning
  // (fusefs/reply_poll.h) until a trial spin found its reply.
  ASSERT_EQ(mount_->Unmount(), "");
  ASSERT_EQ(mount_->Mount(), "");
  // Replies later than any spin: on nvme alone the clock's timer thread, woken on the reader's
  // CPU, often answered before the queue's thread got back to its wait, leaving no reply owed and
  // nothing to spin for. Now every wait has one owed; the spins run out, and after two the
  // server only tries every 32nd wait, which still counts.
  ASSERT_TRUE(WriteFileBytes(Path(".tipfs/disk-model"), "L=200us\n"));
  const uint64_t spins_before = MountCounter(mount_->mountpoint(), "fuse.ring.reply_spins");
  ReadCounts counts;
  ReadPiecesAtRandom(Path("alone"), data, 3, 500, &counts);
  EXPECT_EQ(counts.failed.load(), 0);
  EXPECT_EQ(counts.wrong.load(), 0);
  // Found first: a spin counts itself before whether it found its work, so a spin between the
  // two readings cannot make found exceed spins.
  const uint64_t found = MountCounter(mount_->mountpoint(), "fuse.ring.reply_spins_found");
  const uint64_t spins = MountCounter(mount_->mountpoint(), "fuse.ring.reply_spins");
  const uint64_t nanos = MountCounter(mount_->mountpoint(), "fuse.ring.reply_spin.nanos");
  EXPECT_GT(spins, spins_before) << "reads at queue depth 1 that waited for the disks";
  EXPECT_LE(found, spins);
  if (found < spins) {
    EXPECT_GT(nanos, 0u) << "a spin that ran out took time";
  }
  const std::string text = ReadFileOrDie(Path(".tipfs/stats"));
  const size_t line = text.find("  reply spins: ");
  ASSERT_NE(line, std::string::npos) << text;
  EXPECT_NE(text.find(" ms spinning\n", line), std::string::npos) << text;
  EXPECT_NE(text.compare(line, 17, "  reply spins: 0 "), 0) << text;
}

// SIGTERM while 16 readers keep reads waiting for the disks: the daemon stops taking requests,
// the reads it had started still answer, and it unmounts and exits without touching what it freed
// (the test also runs under ASan); what was written is there at the next mount. Each read returns
// its own bytes or fails once the mount is gone; none hangs.
TEST_F(FuseRingTest, TerminatedUnderLoadAnswersWhatItStartedAndKeepsTheData) {
  const std::string data = PatternBytes(16u << 20, 17);
  ASSERT_TRUE(WriteFileBytes(Path("busy"), data));
  const pid_t daemon = ReadDaemonPid(mount_->disks()[0]);
  ASSERT_TRUE(ProcessAlive(daemon));
  ReadCounts counts;
  std::vector<std::thread> readers;
  for (int t = 0; t < 16; ++t) {
    readers.emplace_back([&, t] { ReadPiecesAtRandom(Path("busy"), data, t + 100, -1, &counts); });
  }
  // Under way: 2,000 reads answered (about 0.1 s here), or a minute gone.
  for (int waited_ms = 0; counts.answered.load() < 2000 && waited_ms < 60'000; waited_ms += 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(counts.answered.load(), 2000) << "the readers did not get going";
  ExpectTerminatedDaemonUnmounts(daemon, mount_->mountpoint());
  if (ProcessAlive(daemon)) kill(daemon, SIGKILL);  // failed above; the readers end with it
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(counts.wrong.load(), 0) << "reads got another read's bytes";
  ASSERT_EQ(mount_->Mount(), "");
  EXPECT_EQ(ReadFileOrDie(Path("busy")), data);
}

// Runs the calling thread on `cpu` alone: the kernel puts a request into the ring queue of the
// CPU its program runs on, so pinning decides which queue a request waits in.
bool PinToCpu(int cpu) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(cpu, &cpus);
  return sched_setaffinity(0, sizeof cpus, &cpus) == 0;
}

// The names in `dir`, or "" and a failure when it cannot be listed.
std::vector<std::string> ListDirectory(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    ADD_FAILURE() << "opendir " << dir << ": " << ErrnoName(errno);
    return names;
  }
  while (dirent* entry = readdir(d)) {
    if (entry->d_name[0] != '.') names.emplace_back(entry->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// A write waits for a held disk (the emulator's hold=on: no completion until hold=off). Another
// program on the writer's CPU, whose requests go to the same ring queue, still gets a lookup, a
// directory listing and a read of cached data answered meanwhile: the queue's thread, about to
// wait for the disk inside the write, passed the ring to a spare thread. The test drives the hold
// from the other CPU, so that a queue held up by the write (the failure) still lets it end the
// hold and finish.
TEST_F(FuseRingTest, AWriteWaitingForAHeldDiskDoesNotHoldUpTheRequestsOfItsCpu) {
  cpu_set_t original;
  ASSERT_EQ(sched_getaffinity(0, sizeof original, &original), 0);
  if (CPU_COUNT(&original) < 2 || !CPU_ISSET(0, &original) || !CPU_ISSET(1, &original)) {
    GTEST_SKIP() << "needs CPUs 0 and 1: one for the held write and its neighbour, one to drive";
  }
  ASSERT_TRUE(PinToCpu(1));
  struct RestoreAffinity {
    cpu_set_t cpus;
    ~RestoreAffinity() { (void)sched_setaffinity(0, sizeof cpus, &cpus); }
  } restore{original};

  const std::string cached = PatternBytes(4096, 3);
  ASSERT_TRUE(WriteFileBytes(Path("cached"), cached));
  ASSERT_EQ(ReadFileOrDie(Path("cached")), cached);  // in the daemon's cache from here on
  const int fd = open(Path("held").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  struct CloseFile {
    int fd;
    ~CloseFile() { close(fd); }
  } close_file{fd};

  ASSERT_TRUE(WriteFileBytes(Path(".tipfs/disk-model"), "hold=on\n"));
  const uint64_t passed_on = MountCounter(mount_->mountpoint(), "fuse.ring.server_changes");
  const std::string written = PatternBytes(4096, 4);
  std::atomic<bool> write_done{false};
  std::atomic<ssize_t> write_result{-2};
  std::atomic<bool> neighbour_done{false};
  std::thread writer;
  std::thread neighbour;
  // Ends the hold on every way out, so the write finishes and the mount can unmount.
  struct EndHold {
    std::function<void()> run;
    ~EndHold() { run(); }
  } end_hold{[&] {
    (void)WriteFileBytes(Path(".tipfs/disk-model"), "hold=off\n");
    if (writer.joinable()) writer.join();
    if (neighbour.joinable()) neighbour.join();
  }};
  writer = std::thread([&] {
    if (PinToCpu(0)) write_result = pwrite(fd, written.data(), written.size(), 0);
    write_done = true;
  });
  // Until the writer's queue thread has passed its ring to a spare, or 2 s (time for a write
  // that holds its queue, which the count would not show, to reach the held disk).
  for (int waited_ms = 0;
       waited_ms < 2'000 && !write_done &&
       MountCounter(mount_->mountpoint(), "fuse.ring.server_changes") == passed_on;
       waited_ms += 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_FALSE(write_done.load()) << "the write did not wait for the held disk";

  struct stat st;
  int lookup_error = 0;
  std::vector<std::string> listed;
  std::string read_back;
  neighbour = std::thread([&] {
    if (PinToCpu(0)) {
      lookup_error = stat(Path("absent").c_str(), &st) == 0 ? 0 : errno;
      listed = ListDirectory(mount_->mountpoint());
      read_back = ReadFileOrDie(Path("cached"));
    }
    neighbour_done = true;
  });
  // A bound on a hang, not a measure: answered within microseconds when the queue is free.
  for (int waited_ms = 0; waited_ms < 20'000 && !neighbour_done; waited_ms += 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(neighbour_done.load()) << "the neighbour's requests waited behind the held write";
  EXPECT_FALSE(write_done.load()) << "the hold ended before the neighbour was answered";

  ASSERT_TRUE(WriteFileBytes(Path(".tipfs/disk-model"), "hold=off\n"));
  neighbour.join();  // answered by now, or freed by the hold's end
  writer.join();
  EXPECT_EQ(lookup_error, ENOENT);
  EXPECT_EQ(listed, (std::vector<std::string>{"cached", "held"}));
  EXPECT_EQ(read_back, cached);
  EXPECT_EQ(write_result.load(), static_cast<ssize_t>(written.size()));
  EXPECT_EQ(ReadFileOrDie(Path("held")), written);
  EXPECT_GT(MountCounter(mount_->mountpoint(), "fuse.ring.server_changes"), passed_on);
}

// A daemon killed outright while its ring holds entries: the kernel takes them back, `tipfs
// umount` clears the dead mount, and the next mount serves what was fsync'ed.
TEST_F(FuseRingTest, KilledDaemonLeavesAVolumeThatMountsAgain) {
  const std::string data = PatternBytes(1 << 20, 13);
  {
    int fd = open(Path("synced").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    ASSERT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    ASSERT_EQ(fsync(fd), 0) << ErrnoName(errno);
    ASSERT_EQ(close(fd), 0);
  }
  const pid_t daemon = ReadDaemonPid(mount_->disks()[0]);
  ASSERT_EQ(kill(daemon, SIGKILL), 0);
  EXPECT_TRUE(WaitForProcessExit(daemon, 60)) << "the killed daemon did not go away";
  std::string output;
  EXPECT_EQ(RunCommand(TipfsBinary() + " umount " + mount_->mountpoint(), &output), 0) << output;
  if (IsMountPoint(mount_->mountpoint())) LazyUnmount(mount_->mountpoint());
  ASSERT_EQ(mount_->Mount(), "");
  EXPECT_EQ(ReadFileOrDie(Path("synced")), data);
}

}  // namespace
}  // namespace tipfs::testing
