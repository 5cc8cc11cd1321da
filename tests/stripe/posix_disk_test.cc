// PosixDisk over a temporary directory: the Disk contract suite (tests/stripe/disk_contract.h) on
// a real file system through io_uring, then what is PosixDisk's own: where objects live, the
// descriptor cache, a full ring.
#include "stripe/posix_disk.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <thread>

#include "tests/stripe/disk_contract.h"
#include "tests/stripe/disk_requests.h"
#include "tests/stripe/file_snapshot.h"

namespace tipfs::stripe {
namespace {

using testing::Completions;
using testing::ReadWholeFile;
using testing::SubmitTo;
using testing::TempDir;

// The contract suite's factory: a PosixDisk, disk 3, over a fresh directory and ring.
class PosixDiskUnderTest : public testing::DiskUnderTest {
 public:
  Disk* disk() override { return disk_.get(); }
  static std::unique_ptr<testing::DiskUnderTest> Make(std::string* unavailable) {
    auto made = std::make_unique<PosixDiskUnderTest>();
    std::filesystem::create_directories(made->dir_.path() + "/objects");
    auto ring = IoRing::Create(256);
    if (!ring.ok()) {
      *unavailable = "io_uring unavailable: " + ring.status().ToString();
      return nullptr;
    }
    made->ring_ = std::move(*ring);
    auto disk = PosixDisk::Open(made->dir_.path(), 3, made->ring_.get());
    if (!disk.ok()) {
      *unavailable = disk.status().ToString();
      return nullptr;
    }
    made->disk_ = std::move(*disk);
    return made;
  }
  ~PosixDiskUnderTest() override {
    disk_.reset();  // before the ring its requests run on
    ring_.reset();
  }

 private:
  TempDir dir_;
  std::unique_ptr<IoRing> ring_;
  std::unique_ptr<PosixDisk> disk_;
};

using testing::DiskContractTest;

INSTANTIATE_TEST_SUITE_P(PosixDisk, DiskContractTest,
                         ::testing::Values(testing::DiskFactory{"posix",
                                                                &PosixDiskUnderTest::Make}),
                         testing::DiskFactoryName);

class PosixDiskTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(256, PosixDisk::kDefaultMaxOpenFiles); }

  void Start(uint32_t entries, size_t max_open, bool direct_io = false) {
    disk_.reset();
    ring_.reset();
    std::filesystem::create_directories(root_ + "/objects");
    auto ring = IoRing::Create(entries);
    if (!ring.ok()) GTEST_SKIP() << "io_uring unavailable: " << ring.status().ToString();
    ring_ = std::move(*ring);
    auto disk = PosixDisk::Open(root_, 3, ring_.get(), max_open, direct_io);
    ASSERT_TRUE(disk.ok()) << disk.status().ToString();
    disk_ = std::move(*disk);
  }

  void TearDown() override {
    disk_.reset();
    ring_.reset();
    if (root_ != dir_.path()) ::umount2(root_.c_str(), MNT_DETACH);
  }

  Result<uint64_t> Io(DiskRequest::Kind kind, ObjectId object, uint64_t offset, uint64_t length,
                      char* buffer) {
    return testing::SubmitAndWait(disk_.get(), kind, object, offset, length, buffer);
  }
  Result<uint64_t> Write(ObjectId o, uint64_t off, const std::string& data) {
    return Io(DiskRequest::Kind::kWrite, o, off, data.size(), const_cast<char*>(data.data()));
  }
  // Reads `len` bytes; the string holds what the disk returned (shorter on a short read).
  std::string Read(ObjectId o, uint64_t off, uint64_t len) {
    std::string buf(len, '\0');
    Result<uint64_t> r = Io(DiskRequest::Kind::kRead, o, off, len, buf.data());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    buf.resize(r.ok() ? *r : 0);
    return buf;
  }
  // A ramfs mounted below dir_ (TearDown unmounts it once root_ points there), or "" with errno.
  std::string MountRamfs() {
    const std::string ramfs = dir_.path() + "/ramfs";
    std::filesystem::create_directories(ramfs);
    if (::mount("ramfs", ramfs.c_str(), "ramfs", 0, nullptr) != 0) return "";
    return ramfs;
  }
  Status Sync(ObjectId o) { return Io(DiskRequest::Kind::kSync, o, 0, 0, nullptr).status(); }

  TempDir dir_;
  std::string root_ = dir_.path();  // the disk's directory; a ramfs mount below dir_ in one test
  std::unique_ptr<IoRing> ring_;
  std::unique_ptr<PosixDisk> disk_;
};

TEST_F(PosixDiskTest, WriteReadSyncAtTheDocumentedPath) {
  const std::string data = "hello, striped world";
  ASSERT_EQ(*Write(0x12ab, 10, data), data.size());
  EXPECT_TRUE(Sync(0x12ab).ok());
  EXPECT_EQ(PosixDisk::ObjectRelativePath(0x12ab), "objects/ab/00000000000012ab");
  const std::string on_disk = ReadWholeFile(dir_.path() + "/objects/ab/00000000000012ab");
  EXPECT_EQ(on_disk, std::string(10, '\0') + data);
  EXPECT_EQ(Read(0x12ab, 10, data.size()), data);
  EXPECT_EQ(disk_->name(), "disk 3 (" + dir_.path() + ")");
}

// With direct I/O, aligned reads bypass the backing page cache and still see every buffered
// write (the kernel writes dirty pages back before a direct read of their range); unaligned reads
// and the short read at the object's end are right too.
TEST_F(PosixDiskTest, DirectReadsSeeBufferedWritesAndEndShortAtTheObjectEnd) {
  Start(64, PosixDisk::kDefaultMaxOpenFiles, /*direct_io=*/true);
  const BackingIoInfo before = disk_->BackingIo();
  if (before.mode.rfind("direct", 0) != 0) GTEST_SKIP() << "no O_DIRECT here: " << before.mode;
  std::string data(100'000, '\0');
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<char>('a' + (i * 7 + i / 512) % 26);
  ASSERT_EQ(*Write(7, 0, data), data.size());
  auto aligned =
      std::shared_ptr<char[]>(static_cast<char*>(std::aligned_alloc(4096, 65536)), std::free);
  ASSERT_EQ(*Io(DiskRequest::Kind::kRead, 7, 0, 65536, aligned.get()), 65536u);
  EXPECT_EQ(std::string(aligned.get(), 65536), data.substr(0, 65536));
  // Past the end: 100,000 - 98,304 bytes, then the object ends (no resubmit at an odd offset).
  ASSERT_EQ(*Io(DiskRequest::Kind::kRead, 7, 98304, 8192, aligned.get()), 1696u);
  EXPECT_EQ(std::string(aligned.get(), 1696), data.substr(98304));
  // An overwrite, then a direct read of it at once.
  ASSERT_EQ(*Write(7, 4096, std::string(4096, 'Z')), 4096u);
  ASSERT_EQ(*Io(DiskRequest::Kind::kRead, 7, 4096, 4096, aligned.get()), 4096u);
  EXPECT_EQ(std::string(aligned.get(), 4096), std::string(4096, 'Z'));
  EXPECT_EQ(Read(7, 10, 90), data.substr(10, 90));  // unaligned: buffered
  const BackingIoInfo after = disk_->BackingIo();
  EXPECT_EQ(after.direct_reads - before.direct_reads, 3u);
  EXPECT_EQ(after.buffered_reads - before.buffered_reads, 1u);
}

// ramfs refuses O_DIRECT: the disk reads buffered, every read still right, and says why.
TEST_F(PosixDiskTest, DirectIoRefusedByTheFileSystemFallsBackToBufferedAndSaysWhy) {
  const std::string ramfs = MountRamfs();
  if (ramfs.empty()) GTEST_SKIP() << "cannot mount ramfs here: " << std::strerror(errno);
  root_ = ramfs;
  Start(64, PosixDisk::kDefaultMaxOpenFiles, /*direct_io=*/true);
  EXPECT_EQ(disk_->BackingIo().mode, "buffered (O_DIRECT refused: Invalid argument)");
  ASSERT_EQ(*Write(9, 0, std::string(8192, 'r')), 8192u);
  auto aligned =
      std::shared_ptr<char[]>(static_cast<char*>(std::aligned_alloc(4096, 8192)), std::free);
  ASSERT_EQ(*Io(DiskRequest::Kind::kRead, 9, 0, 8192, aligned.get()), 8192u);
  EXPECT_EQ(std::string(aligned.get(), 8192), std::string(8192, 'r'));
  EXPECT_EQ(disk_->BackingIo().direct_reads, 0u);
  EXPECT_EQ(disk_->BackingIo().buffered_reads, 1u);
  // The probe left nothing behind in objects/.
  EXPECT_FALSE(std::filesystem::exists(ramfs + "/objects/tipfs-direct-io-probe"));
}

// On a memory file system a small read's bytes are already in memory: it completes on the
// submitting thread before Submit returns (no ring thread, no io-wq worker in between), with the
// same results the ring gives: the bytes, a short count at the object's end, 0 for a missing
// object. A read bigger than kMaxInlineReadBytes still goes through the ring.
TEST_F(PosixDiskTest, SmallReadsOfAMemoryFileSystemCompleteBeforeSubmitReturns) {
  const std::string ramfs = MountRamfs();
  if (ramfs.empty()) GTEST_SKIP() << "cannot mount ramfs here: " << std::strerror(errno);
  root_ = ramfs;
  Start(64, PosixDisk::kDefaultMaxOpenFiles);
  std::string data(300'000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + (i * 13) % 26);
  ASSERT_EQ(*Write(5, 0, data), data.size());

  // Returns the result if `done` ran before Submit returned, else nothing (and waits for it).
  auto submit_read = [&](ObjectId object, uint64_t offset, uint64_t length, char* buffer) {
    std::optional<Result<uint64_t>> inline_result;
    std::atomic<bool> finished{false};
    std::thread::id ran_on;
    std::atomic<bool> returned{false};  // a completion on the ring thread may read it at once
    DiskRequest r;
    r.kind = DiskRequest::Kind::kRead;
    r.object = object;
    r.offset = offset;
    r.length = length;
    r.buffer = buffer;
    r.done = [&](Result<uint64_t> result) {
      ran_on = std::this_thread::get_id();
      if (!returned) inline_result = std::move(result);
      finished.store(true);
      finished.notify_one();
    };
    disk_->Submit(std::move(r));
    returned.store(true);
    while (!finished.load()) finished.wait(false);
    if (inline_result.has_value()) {
      EXPECT_EQ(ran_on, std::this_thread::get_id());
    }
    return inline_result;
  };
  std::string buffer(PosixDisk::kMaxInlineReadBytes + 4096, '\0');
  std::optional<Result<uint64_t>> r = submit_read(5, 4096, 4096, buffer.data());
  ASSERT_TRUE(r.has_value()) << "a 4 KiB read of ramfs went through the ring";
  ASSERT_EQ(**r, 4096u);
  EXPECT_EQ(buffer.substr(0, 4096), data.substr(4096, 4096));
  // Across the object's end: short, as the ring reports it.
  r = submit_read(5, data.size() - 100, 4096, buffer.data());
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(**r, 100u);
  EXPECT_EQ(buffer.substr(0, 100), data.substr(data.size() - 100));
  EXPECT_EQ(disk_->inline_reads(), 2u);
  // A missing object is a hole (as before: inline, 0 bytes, no read counted).
  r = submit_read(6, 0, 4096, buffer.data());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(**r, 0u);
  // Too big to copy on the submitter: the ring reads it.
  const uint64_t ops_before = ring_->counters().ops;
  EXPECT_EQ(Read(5, 0, buffer.size()), data.substr(0, buffer.size()));
  EXPECT_EQ(disk_->inline_reads(), 2u);
  EXPECT_EQ(ring_->counters().ops, ops_before + 1);
  EXPECT_EQ(disk_->BackingIo().buffered_reads, 3u);
}

// A request's callback already finds its op in the ring's finished count, as it finds it out of
// in_flight(): a caller woken by `done` may read counters() at once and sees its own request.
TEST_F(PosixDiskTest, TheRingCountsAnOpFinishedBeforeItsCallbackRuns) {
  const std::string data(8192, 'x');
  ASSERT_EQ(*Write(7, 0, data), data.size());  // writes always go through the ring
  const uint64_t ops_before = ring_->counters().ops;
  std::atomic<bool> finished{false};
  uint64_t ops_seen = 0;
  uint32_t in_flight_seen = 1;
  DiskRequest r;
  r.kind = DiskRequest::Kind::kWrite;
  r.object = 7;
  r.offset = 0;
  r.length = data.size();
  r.buffer = const_cast<char*>(data.data());
  r.done = [&](Result<uint64_t> result) {
    EXPECT_TRUE(result.ok());
    ops_seen = ring_->counters().ops;
    in_flight_seen = ring_->in_flight();
    finished.store(true);
    finished.notify_one();
  };
  disk_->Submit(std::move(r));
  while (!finished.load()) finished.wait(false);
  EXPECT_EQ(ops_seen, ops_before + 1);
  EXPECT_EQ(in_flight_seen, 0u);
}

// Wherever a read is served (inline from the page cache with RWF_NOWAIT, or by the ring when some
// of it is not cached), its bytes and its count are the same, the object's end included.
TEST_F(PosixDiskTest, ReadsServedInlineOrByTheRingReturnTheSameBytes) {
  std::string data(200'000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('A' + (i * 7) % 26);
  ASSERT_EQ(*Write(4, 0, data), data.size());
  for (uint64_t offset : {0ull, 4096ull, 65536ull, 199'000ull, 199'999ull}) {
    for (uint64_t length : {1ull, 4096ull, 65536ull, 131072ull, 131073ull}) {
      const uint64_t expect = std::min<uint64_t>(length, data.size() - offset);
      EXPECT_EQ(Read(4, offset, length), data.substr(offset, expect))
          << "offset " << offset << " length " << length;
    }
  }
  EXPECT_EQ(Read(4, data.size(), 4096), "");
}

TEST_F(PosixDiskTest, WithoutDirectIoEveryReadIsBuffered) {
  ASSERT_TRUE(Write(8, 0, std::string(8192, 'b')).ok());
  auto aligned =
      std::shared_ptr<char[]>(static_cast<char*>(std::aligned_alloc(4096, 8192)), std::free);
  ASSERT_EQ(*Io(DiskRequest::Kind::kRead, 8, 0, 8192, aligned.get()), 8192u);
  EXPECT_EQ(disk_->BackingIo().mode, "buffered");
  EXPECT_EQ(disk_->BackingIo().direct_reads, 0u);
  EXPECT_EQ(disk_->BackingIo().buffered_reads, 1u);
}

TEST_F(PosixDiskTest, ReadsAndSyncsOfMissingObjectsCreateNoFiles) {
  EXPECT_EQ(Read(777, 0, 4096).size(), 0u);
  EXPECT_TRUE(Sync(777).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/objects/09"));
}

TEST_F(PosixDiskTest, FilesThatAreNotObjectsAreNotListed) {
  ASSERT_TRUE(Write(5, 0, "x").ok());
  testing::WriteWholeFile(dir_.path() + "/objects/05/not-an-object", "x");
  std::vector<ObjectId> objects;
  ASSERT_TRUE(disk_->ListObjects(&objects).ok());
  EXPECT_EQ(objects, (std::vector<ObjectId>{5}));
}

TEST_F(PosixDiskTest, FailuresNameTheDisk) {
  // A directory where the object should be: open fails with EISDIR.
  std::filesystem::create_directories(dir_.path() + "/objects/2a/000000000000002a");
  std::string buf(10, '\0');
  Result<uint64_t> r = Io(DiskRequest::Kind::kRead, 0x2a, 0, 10, buf.data());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), EISDIR);
  EXPECT_NE(r.status().message().find("disk 3 (" + dir_.path() + ")"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(Write(0x2a, 0, "x").error(), EISDIR);
}

TEST_F(PosixDiskTest, FdCacheIsBounded) {
  Start(64, 8);
  for (ObjectId o = 0; o < 50; ++o) ASSERT_TRUE(Write(o, 0, std::to_string(o)).ok());
  EXPECT_LE(disk_->cached_fds(), 8u);
  EXPECT_LE(disk_->open_fds(), 8u);
  for (ObjectId o = 0; o < 50; ++o) EXPECT_EQ(Read(o, 0, 10), std::to_string(o));
  EXPECT_LE(disk_->open_fds(), 8u);
}

// Out of descriptors (EMFILE): idle cached descriptors are shed and the open is retried, so a disk
// with a cache larger than the process limit keeps working.
TEST_F(PosixDiskTest, RunningOutOfDescriptorsShedsIdleCachedOnes) {
  Start(16, 1000);
  size_t open_now = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd");
       it != std::filesystem::directory_iterator(); ++it) {
    ++open_now;
  }
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old_limit), 0);
  struct rlimit low = old_limit;
  low.rlim_cur = open_now + 24;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  int failures = 0;
  for (ObjectId o = 0; o < 200; ++o) {
    if (!Write(o, 0, std::to_string(o)).ok()) ++failures;
  }
  for (ObjectId o = 0; o < 200; ++o) {
    if (Read(o, 0, 10) != std::to_string(o)) ++failures;
  }
  const size_t cached = disk_->cached_fds();
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old_limit), 0);
  EXPECT_EQ(failures, 0);
  EXPECT_LT(cached, 30u);
}

// Many threads, many requests, a ring far smaller than the load: every request completes once,
// with the right bytes, and some had to wait for a free slot.
TEST_F(PosixDiskTest, ConcurrentRequestsOverAFullRing) {
  Start(4, 16);
  // 24 objects, more than the descriptors cached.
  EXPECT_EQ(testing::ConcurrentWritesThenReads(disk_.get(), 8, 200), 0);
  EXPECT_GT(ring_->counters().queued, 0u)
      << "the ring never filled; the test did not test queueing";
  EXPECT_EQ(ring_->in_flight(), 0u);
  EXPECT_LE(disk_->open_fds(), 16u);
}

}  // namespace
}  // namespace tipfs::stripe
