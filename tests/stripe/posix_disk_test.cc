// PosixDisk over a temporary directory: the Disk contract on a real file system through io_uring.
#include "stripe/posix_disk.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include "tests/stripe/disk_requests.h"
#include "tests/stripe/file_snapshot.h"

namespace tipfs::stripe {
namespace {

using testing::Completions;
using testing::ReadWholeFile;
using testing::SubmitTo;
using testing::TempDir;

class PosixDiskTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(256, PosixDisk::kDefaultMaxOpenFiles); }

  void Start(uint32_t entries, size_t max_open) {
    disk_.reset();
    ring_.reset();
    std::filesystem::create_directories(dir_.path() + "/objects");
    auto ring = IoRing::Create(entries);
    if (!ring.ok()) GTEST_SKIP() << "io_uring unavailable: " << ring.status().ToString();
    ring_ = std::move(*ring);
    auto disk = PosixDisk::Open(dir_.path(), 3, ring_.get(), max_open);
    ASSERT_TRUE(disk.ok()) << disk.status().ToString();
    disk_ = std::move(*disk);
  }

  void TearDown() override {
    disk_.reset();
    ring_.reset();
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
  Status Sync(ObjectId o) { return Io(DiskRequest::Kind::kSync, o, 0, 0, nullptr).status(); }

  TempDir dir_;
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

TEST_F(PosixDiskTest, ShortReadsAtObjectEndAndMissingObjects) {
  ASSERT_TRUE(Write(1, 0, std::string(100, 'x')).ok());
  EXPECT_EQ(Read(1, 0, 4096), std::string(100, 'x'));  // short: 100 of 4096
  EXPECT_EQ(Read(1, 60, 4096).size(), 40u);
  EXPECT_EQ(Read(1, 100, 10).size(), 0u);                              // exactly at the end
  EXPECT_EQ(Read(1, 5000, 10).size(), 0u);                             // past the end
  EXPECT_EQ(Read(777, 0, 4096).size(), 0u);                            // missing object: all hole
  EXPECT_TRUE(Sync(777).ok());                                         // nothing to sync
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/objects/09"));  // reads create nothing
  EXPECT_EQ(disk_->Stat(777).error(), ENOENT);
}

TEST_F(PosixDiskTest, TruncateStatRemoveList) {
  ASSERT_TRUE(Write(5, 0, std::string(10000, 'a')).ok());
  ASSERT_TRUE(disk_->Truncate(5, 300).ok());
  EXPECT_EQ(disk_->Stat(5)->size, 300u);
  EXPECT_EQ(Read(5, 0, 10000), std::string(300, 'a'));
  ASSERT_TRUE(disk_->Truncate(5, 5000).ok());  // growth reads as zeros
  EXPECT_EQ(Read(5, 0, 10000), std::string(300, 'a') + std::string(4700, '\0'));
  ASSERT_TRUE(disk_->Truncate(6, 0).ok());  // size 0 of a missing object: nothing created
  EXPECT_EQ(disk_->Stat(6).error(), ENOENT);
  ASSERT_TRUE(disk_->Truncate(0x100, 4096).ok());  // creates, sparse
  EXPECT_EQ(disk_->Stat(0x100)->size, 4096u);
  std::vector<ObjectId> objects;
  // Files that are not objects are ignored.
  testing::WriteWholeFile(dir_.path() + "/objects/05/not-an-object", "x");
  ASSERT_TRUE(disk_->ListObjects(&objects).ok());
  std::sort(objects.begin(), objects.end());
  EXPECT_EQ(objects, (std::vector<ObjectId>{5, 0x100}));
  ASSERT_TRUE(disk_->Remove(5).ok());
  ASSERT_TRUE(disk_->Remove(5).ok());  // already gone: still OK
  EXPECT_EQ(disk_->Stat(5).error(), ENOENT);
  objects.clear();
  ASSERT_TRUE(disk_->ListObjects(&objects).ok());
  EXPECT_EQ(objects, (std::vector<ObjectId>{0x100}));
  auto usage = disk_->Usage();
  ASSERT_TRUE(usage.ok());
  EXPECT_GT(usage->total_bytes, 0u);
  EXPECT_LE(usage->free_bytes, usage->total_bytes);
  EXPECT_TRUE(disk_->SyncAll().ok());
}

TEST_F(PosixDiskTest, RequestToARemovedObject) {
  ASSERT_TRUE(Write(9, 0, std::string(8192, 'o')).ok());
  EXPECT_EQ(Read(9, 0, 8192).size(), 8192u);  // the fd is now cached
  ASSERT_TRUE(disk_->Remove(9).ok());
  EXPECT_EQ(Read(9, 0, 8192).size(), 0u);  // a hole, not the old bytes through a stale fd
  ASSERT_TRUE(Write(9, 4096, "new").ok());
  EXPECT_EQ(Read(9, 0, 8192), std::string(4096, '\0') + "new");
  EXPECT_EQ(disk_->Stat(9)->size, 4099u);
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
  constexpr int kThreads = 8;
  constexpr int kRequests = 200;
  constexpr uint64_t kBlock = 4096;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread writes its own blocks of 24 objects (more objects than cached fds), async.
      std::vector<std::string> blocks(kRequests);
      std::vector<Result<uint64_t>> results(kRequests, Status::IOError("pending"));
      Completions c;
      for (int i = 0; i < kRequests; ++i) {
        blocks[i] = std::string(kBlock, static_cast<char>('A' + (t * 7 + i) % 26));
        SubmitTo(disk_.get(), DiskRequest::Kind::kWrite, i % 24,
                 (uint64_t(t) * kRequests + i) * kBlock, kBlock, blocks[i].data(), &c, &results[i]);
      }
      c.Wait();
      for (auto& r : results) {
        if (!r.ok() || *r != kBlock) ++errors;
      }
      std::vector<std::string> back(kRequests, std::string(kBlock, '\0'));
      Completions c2;
      for (int i = 0; i < kRequests; ++i) {
        SubmitTo(disk_.get(), DiskRequest::Kind::kRead, i % 24,
                 (uint64_t(t) * kRequests + i) * kBlock, kBlock, back[i].data(), &c2, &results[i]);
      }
      c2.Wait();
      for (int i = 0; i < kRequests; ++i) {
        if (!results[i].ok() || *results[i] != kBlock || back[i] != blocks[i]) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_GT(ring_->counters().queued, 0u)
      << "the ring never filled; the test did not test queueing";
  EXPECT_EQ(ring_->in_flight(), 0u);
  EXPECT_LE(disk_->open_fds(), 16u);
}

// Remove racing in-flight writes and reads: nothing crashes, every request completes once, and
// afterwards the object is either gone or holds only bytes that were written.
TEST_F(PosixDiskTest, RemoveRacingInFlightRequests) {
  Start(8, 4);
  const std::string block(4096, 'r');
  for (int round = 0; round < 20; ++round) {
    Completions c;
    std::vector<Result<uint64_t>> results(64, Status::IOError("pending"));
    std::vector<std::string> reads(64, std::string(4096, '\0'));
    for (int i = 0; i < 64; ++i) {
      SubmitTo(disk_.get(), i % 2 ? DiskRequest::Kind::kRead : DiskRequest::Kind::kWrite, 42,
               uint64_t(i) * 4096, 4096, i % 2 ? reads[i].data() : const_cast<char*>(block.data()),
               &c, &results[i]);
      if (i % 16 == 0) {
        ASSERT_TRUE(disk_->Remove(42).ok());
      }
    }
    c.Wait();
    for (int i = 0; i < 64; ++i) {
      ASSERT_TRUE(results[i].ok()) << results[i].status().ToString();
      if (i % 2) {
        for (uint64_t b = 0; b < *results[i]; ++b) {
          ASSERT_TRUE(reads[i][b] == 'r' || reads[i][b] == 0);
        }
      }
    }
  }
  EXPECT_LE(disk_->open_fds(), 4u);
}

TEST_F(PosixDiskTest, LargeRequestWithOddOffset) {
  // A 16 MiB write and read in one request each, with an odd offset.
  std::string data(16 << 20, '\0');
  std::mt19937_64 rng(1);
  for (char& ch : data) ch = static_cast<char>(rng());
  ASSERT_EQ(*Write(3, 12345, data), data.size());
  EXPECT_EQ(Read(3, 12345, data.size()), data);
}

}  // namespace
}  // namespace tipfs::stripe
