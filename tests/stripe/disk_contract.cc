// The cases of the Disk contract suite; see disk_contract.h.
#include "tests/stripe/disk_contract.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "util/mutex.h"

namespace tipfs::testing {

using stripe::DiskRequest;
using stripe::ObjectId;

// A factory may be instantiated in a binary that links this file for other reasons.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DiskContractTest);

void DiskContractTest::SetUp() {
  std::string unavailable;
  under_test_ = GetParam().make(&unavailable);
  if (under_test_ == nullptr) {
    if (GetParam().unavailable_fails) FAIL() << unavailable;
    GTEST_SKIP() << unavailable;
  }
}

std::string DiskContractTest::Read(ObjectId o, uint64_t off, uint64_t len) {
  std::string buf(len, '\0');
  Result<uint64_t> r = Io(DiskRequest::Kind::kRead, o, off, len, buf.data());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  buf.resize(r.ok() ? *r : 0);
  return buf;
}

namespace {

std::string RandomBytes(size_t n, uint64_t seed) {
  std::string data(n, '\0');
  std::mt19937_64 rng(seed);
  for (char& ch : data) ch = static_cast<char>(rng());
  return data;
}

}  // namespace

TEST_P(DiskContractTest, WriteReadSyncRoundTrip) {
  const std::string data = "hello, striped world";
  ASSERT_EQ(*Write(0x12ab, 10, data), data.size());
  EXPECT_TRUE(Sync(0x12ab).ok());
  EXPECT_EQ(Read(0x12ab, 10, data.size()), data);
  EXPECT_EQ(Read(0x12ab, 0, 10 + data.size()), std::string(10, '\0') + data);  // a hole before
  EXPECT_EQ(disk()->name().rfind("disk 3 (", 0), 0u) << disk()->name();
  EXPECT_EQ(disk()->Stat(0x12ab)->size, 10 + data.size());
}

TEST_P(DiskContractTest, ShortReadsAtObjectEndAndMissingObjects) {
  ASSERT_TRUE(Write(1, 0, std::string(100, 'x')).ok());
  EXPECT_EQ(Read(1, 0, 4096), std::string(100, 'x'));  // short: 100 of 4096
  EXPECT_EQ(Read(1, 60, 4096).size(), 40u);
  EXPECT_EQ(Read(1, 100, 10).size(), 0u);        // exactly at the end
  EXPECT_EQ(Read(1, 5000, 10).size(), 0u);       // past the end
  EXPECT_EQ(Read(777, 0, 4096).size(), 0u);      // missing object: all hole
  EXPECT_TRUE(Sync(777).ok());                   // nothing to sync
  EXPECT_EQ(disk()->Stat(777).error(), ENOENT);  // reads create nothing
  std::string zero_length;
  EXPECT_EQ(*Io(DiskRequest::Kind::kRead, 1, 0, 0, zero_length.data()), 0u);
}

TEST_P(DiskContractTest, TruncateStatRemoveList) {
  ASSERT_TRUE(Write(5, 0, std::string(10000, 'a')).ok());
  ASSERT_TRUE(disk()->Truncate(5, 300).ok());
  EXPECT_EQ(disk()->Stat(5)->size, 300u);
  EXPECT_EQ(Read(5, 0, 10000), std::string(300, 'a'));
  ASSERT_TRUE(disk()->Truncate(5, 5000).ok());  // growth reads as zeros
  EXPECT_EQ(Read(5, 0, 10000), std::string(300, 'a') + std::string(4700, '\0'));
  ASSERT_TRUE(disk()->Truncate(6, 0).ok());  // size 0 of a missing object: nothing created
  EXPECT_EQ(disk()->Stat(6).error(), ENOENT);
  ASSERT_TRUE(disk()->Truncate(0x100, 4096).ok());  // creates, sparse
  EXPECT_EQ(disk()->Stat(0x100)->size, 4096u);
  EXPECT_EQ(Read(0x100, 0, 8192), std::string(4096, '\0'));
  ASSERT_TRUE(disk()->Truncate(0x100, 0).ok());  // an existing object cut to nothing stays
  EXPECT_EQ(disk()->Stat(0x100)->size, 0u);
  std::vector<ObjectId> objects;
  ASSERT_TRUE(disk()->ListObjects(&objects).ok());
  std::sort(objects.begin(), objects.end());
  EXPECT_EQ(objects, (std::vector<ObjectId>{5, 0x100}));
  ASSERT_TRUE(disk()->Remove(5).ok());
  ASSERT_TRUE(disk()->Remove(5).ok());  // already gone: still OK
  EXPECT_EQ(disk()->Stat(5).error(), ENOENT);
  EXPECT_EQ(Read(5, 0, 100).size(), 0u);
  objects.clear();
  ASSERT_TRUE(disk()->ListObjects(&objects).ok());
  EXPECT_EQ(objects, (std::vector<ObjectId>{0x100}));
  auto usage = disk()->Usage();
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  EXPECT_LE(usage->free_bytes, usage->total_bytes);
  EXPECT_GT(usage->free_files, 0u);
  EXPECT_TRUE(disk()->SyncAll().ok());
}

// Far-apart writes leave holes between them that read as zeros, in one request that spans them
// and in pieces; the size is where the last byte was written.
TEST_P(DiskContractTest, SparseObjectReadsHolesAsZeros) {
  const std::string a = RandomBytes(70000, 1);
  const std::string b = RandomBytes(5000, 2);
  const uint64_t far = (9ull << 20) + 12345;  // past a few MiB
  ASSERT_TRUE(Write(7, 100, a).ok());
  ASSERT_TRUE(Write(7, far, b).ok());
  EXPECT_EQ(disk()->Stat(7)->size, far + b.size());
  const std::string whole = Read(7, 0, far + b.size() + 1000);
  ASSERT_EQ(whole.size(), far + b.size());
  EXPECT_EQ(whole.substr(0, 100), std::string(100, '\0'));
  EXPECT_EQ(whole.substr(100, a.size()), a);
  EXPECT_EQ(whole.substr(100 + a.size(), far - 100 - a.size()),
            std::string(far - 100 - a.size(), '\0'));
  EXPECT_EQ(whole.substr(far), b);
  // A read that lies wholly in the hole returns zeros (or stops short: the rest is a hole).
  const std::string middle = Read(7, 4 << 20, 65536);
  EXPECT_EQ(middle, std::string(middle.size(), '\0'));
  // Shrink into the first write, then grow again past where b was: b is gone.
  ASSERT_TRUE(disk()->Truncate(7, 50000).ok());
  EXPECT_EQ(disk()->Stat(7)->size, 50000u);
  ASSERT_TRUE(disk()->Truncate(7, far + b.size()).ok());
  const std::string again = Read(7, 0, far + b.size());
  ASSERT_EQ(again.size(), far + b.size());
  EXPECT_EQ(again.substr(100, 50000 - 100), a.substr(0, 50000 - 100));
  EXPECT_EQ(again.substr(50000), std::string(far + b.size() - 50000, '\0'));
}

// Truncation to every kind of boundary: inside, at and just past multiples of 64 KiB (where
// objects that are cut into parts are cut), then growth back: only the kept bytes remain.
TEST_P(DiskContractTest, TruncateAroundBoundaries) {
  const std::string data = RandomBytes(600000, 3);
  ASSERT_TRUE(Write(8, 0, data).ok());
  for (uint64_t size : {uint64_t{589824}, uint64_t{524289}, uint64_t{524288}, uint64_t{262143},
                        uint64_t{65536}, uint64_t{1}}) {
    ASSERT_TRUE(disk()->Truncate(8, size).ok()) << size;
    EXPECT_EQ(disk()->Stat(8)->size, size);
    EXPECT_EQ(Read(8, 0, 700000), data.substr(0, size)) << "after truncate to " << size;
  }
  ASSERT_TRUE(disk()->Truncate(8, 300000).ok());
  EXPECT_EQ(Read(8, 0, 700000), data.substr(0, 1) + std::string(299999, '\0'));
  ASSERT_TRUE(Write(8, 299990, "0123456789abcdefghij").ok());  // across the old end
  EXPECT_EQ(disk()->Stat(8)->size, 300010u);
  EXPECT_EQ(Read(8, 299990, 100), "0123456789abcdefghij");
}

TEST_P(DiskContractTest, RequestToARemovedObject) {
  ASSERT_TRUE(Write(9, 0, std::string(8192, 'o')).ok());
  EXPECT_EQ(Read(9, 0, 8192).size(), 8192u);
  ASSERT_TRUE(disk()->Remove(9).ok());
  EXPECT_EQ(Read(9, 0, 8192).size(), 0u);  // a hole, not the old bytes
  ASSERT_TRUE(Write(9, 4096, "new").ok());
  EXPECT_EQ(Read(9, 0, 8192), std::string(4096, '\0') + "new");
  EXPECT_EQ(disk()->Stat(9)->size, 4099u);
}

int ConcurrentWritesThenReads(stripe::Disk* disk, int threads, int requests) {
  constexpr uint64_t kBlock = 4096;
  std::atomic<int> errors{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<std::string> blocks(requests);
      std::vector<Result<uint64_t>> results(requests, Status::IOError("pending"));
      Completions c;
      for (int i = 0; i < requests; ++i) {
        blocks[i] = std::string(kBlock, static_cast<char>('A' + (t * 7 + i) % 26));
        SubmitTo(disk, DiskRequest::Kind::kWrite, i % 24, (uint64_t(t) * requests + i) * kBlock,
                 kBlock, blocks[i].data(), &c, &results[i]);
      }
      c.Wait();
      for (auto& r : results) {
        if (!r.ok() || *r != kBlock) ++errors;
      }
      std::vector<std::string> back(requests, std::string(kBlock, '\0'));
      Completions c2;
      for (int i = 0; i < requests; ++i) {
        SubmitTo(disk, DiskRequest::Kind::kRead, i % 24, (uint64_t(t) * requests + i) * kBlock,
                 kBlock, back[i].data(), &c2, &results[i]);
      }
      c2.Wait();
      for (int i = 0; i < requests; ++i) {
        if (!results[i].ok() || *results[i] != kBlock || back[i] != blocks[i]) ++errors;
      }
    });
  }
  for (auto& w : workers) w.join();
  return errors.load();
}

// Many threads, many requests at once: every request completes once, with the right bytes.
TEST_P(DiskContractTest, ConcurrentRequestsCompleteOnceWithTheirBytes) {
  EXPECT_EQ(ConcurrentWritesThenReads(disk(), 8, 100), 0);
}

// Remove racing in-flight writes and reads: nothing crashes, every request completes once, and
// afterwards the object is either gone or holds only bytes that were written.
TEST_P(DiskContractTest, RemoveRacingInFlightRequests) {
  const std::string block(4096, 'r');
  for (int round = 0; round < 10; ++round) {
    Completions c;
    std::vector<Result<uint64_t>> results(64, Status::IOError("pending"));
    std::vector<std::string> reads(64, std::string(4096, '\0'));
    for (int i = 0; i < 64; ++i) {
      SubmitTo(disk(), i % 2 ? DiskRequest::Kind::kRead : DiskRequest::Kind::kWrite, 42,
               uint64_t(i) * 4096, 4096, i % 2 ? reads[i].data() : const_cast<char*>(block.data()),
               &c, &results[i]);
      if (i % 16 == 0) {
        ASSERT_TRUE(disk()->Remove(42).ok());
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
}

TEST_P(DiskContractTest, LargeRequestWithOddOffset) {
  // A 16 MiB write and read in one request each, with an odd offset.
  const std::string data = RandomBytes(16 << 20, 1);
  ASSERT_EQ(*Write(3, 12345, data), data.size());
  EXPECT_EQ(Read(3, 12345, data.size()), data);
  EXPECT_EQ(disk()->Stat(3)->size, 12345 + data.size());
}

// StatAsync, asked about several objects at once, answers each exactly once with what Stat
// answers: sizes, allocated bytes of sparse objects of several parts, ENOENT for a missing one.
TEST_P(DiskContractTest, StatAsyncAnswersAsStatForManyObjectsAtOnce) {
  const uint64_t far = (9ull << 20) + 100;  // past a few 4 MiB parts
  ASSERT_TRUE(Write(21, 0, RandomBytes(5000, 3)).ok());
  ASSERT_TRUE(Write(22, 100, RandomBytes(70000, 4)).ok());
  ASSERT_TRUE(Write(22, far, RandomBytes(3000, 5)).ok());
  ASSERT_TRUE(disk()->Truncate(23, 6u << 20).ok());  // all hole
  const std::vector<ObjectId> objects = {21, 22, 23, 24 /* missing */, 22, 21};
  Mutex mu;
  CondVar answered;
  std::vector<Result<stripe::ObjectInfo>> answers(objects.size(), Status::IOError("pending"));
  std::vector<int> times_answered(objects.size(), 0);
  size_t left = objects.size();
  for (size_t i = 0; i < objects.size(); ++i) {
    disk()->StatAsync(objects[i], [&, i](Result<stripe::ObjectInfo> info) {
      MutexLock lock(&mu);
      answers[i] = std::move(info);
      ++times_answered[i];
      if (--left == 0) answered.SignalAll();
    });
  }
  {
    MutexLock lock(&mu);
    while (left > 0) answered.Wait(&mu);
  }
  for (size_t i = 0; i < objects.size(); ++i) {
    SCOPED_TRACE("object " + std::to_string(objects[i]));
    EXPECT_EQ(times_answered[i], 1);
    Result<stripe::ObjectInfo> expected = disk()->Stat(objects[i]);
    ASSERT_EQ(answers[i].error(), expected.error()) << answers[i].status().ToString();
    if (!expected.ok()) continue;
    EXPECT_EQ(answers[i]->size, expected->size);
    EXPECT_EQ(answers[i]->allocated_bytes, expected->allocated_bytes);
  }
  EXPECT_EQ(answers[3].error(), ENOENT);
  EXPECT_EQ(answers[1]->size, far + 3000);
  EXPECT_EQ(answers[2]->size, 6u << 20);
  // Holes do not count: the far write and the first one hold far less than the size.
  EXPECT_LT(answers[1]->allocated_bytes, far / 2);
}

}  // namespace tipfs::testing
