// FileCache data path over in-memory disks: bytes, end of file, hits and misses, write coherence,
// one fetch per block for concurrent readers, errors, truncate and remove, capacity.
#include "cache/file_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <string>
#include <thread>

#include "tests/cache/cache_rig.h"

namespace tipfs::cache {
namespace {

using testing::CacheRig;
using testing::RandomBytes;
using testing::TestOptions;
using testing::Wrap;

constexpr uint32_t kUnit = 8192;
const ReadContext kReader{100, 100};

TEST(FileCacheTest, ReadsClipAtEndOfFile) {
  CacheRig rig(4, kUnit, TestOptions(64));
  const std::string data = RandomBytes(50'000, 1);
  ASSERT_TRUE(rig.cache->Write(7, 0, data.data(), data.size()).ok());
  EXPECT_EQ(rig.Read(kReader, 7, 0, data.size(), data.size()), data);
  EXPECT_EQ(rig.Read(kReader, 7, 49'990, 100, data.size()), data.substr(49'990));
  EXPECT_EQ(rig.Read(kReader, 7, 50'000, 100, data.size()), "");
  EXPECT_EQ(rig.Read(kReader, 7, 90'000, 100, data.size()), "");
  EXPECT_EQ(rig.Read(kReader, 7, 123, 0, data.size()), "");
  // A file whose size says more than was written reads zeros (holes and short objects).
  EXPECT_EQ(rig.Read(kReader, 7, 49'000, 2'000, 51'000),
            data.substr(49'000) + std::string(1'000, '\0'));
}

TEST(FileCacheTest, SecondReadIsAHitWithoutDiskRequests) {
  CacheRig rig(2, kUnit, TestOptions(64));
  const std::string data = RandomBytes(40'000, 2);
  ASSERT_TRUE(rig.io->Write(3, 0, data.data(), data.size()).ok());
  EXPECT_EQ(rig.Read(kReader, 3, 1000, 20'000, data.size()), data.substr(1000, 20'000));
  const uint64_t requests = rig.DiskRequests();
  CacheStats before = rig.cache->Stats();
  EXPECT_EQ(before.demand_hits, 0u);
  EXPECT_EQ(before.demand_misses, 6u);  // blocks 0..5 of 4 KiB
  EXPECT_EQ(rig.Read(kReader, 3, 4096, 8192, data.size()), data.substr(4096, 8192));
  EXPECT_EQ(rig.DiskRequests(), requests);
  CacheStats after = rig.cache->Stats();
  EXPECT_EQ(after.demand_hits, 2u);
  EXPECT_EQ(after.demand_misses, 6u);
}

// The LRU's tail window prices its coldest buffers (TipManager::LruCostRate). While the queue is
// shorter than the window every block is in it, but a hit on the warmest block, a reader reading
// again what it read last, is one an LRU of a single buffer has: not a tail hit. Counted, a
// linker re-reading each object's block while its hints held the rest of the cache priced the
// coldest LRU buffer above its prefetches (bench/spec/README.md, "What bounds ld's second run").
TEST(FileCacheTest, RereadingTheWarmestBlockIsNoTailHit) {
  CacheRig rig(2, kUnit, TestOptions(64));  // a tail window of 8 buffers
  const std::string data = RandomBytes(3 * 4096, 4);
  ASSERT_TRUE(rig.io->Write(3, 0, data.data(), data.size()).ok());
  for (uint64_t b = 0; b < 3; ++b) {
    ASSERT_EQ(rig.Read(kReader, 3, b * 4096, 4096, data.size()), data.substr(b * 4096, 4096));
  }
  CacheStats stats = rig.cache->Stats();
  ASSERT_EQ(stats.lru_buffers, 3u);  // all three in the tail window
  EXPECT_EQ(stats.lru_tail_hits, 0u);
  for (int i = 0; i < 10; ++i) {  // block 2, the warmest, again and again
    ASSERT_EQ(rig.Read(kReader, 3, 2 * 4096 + 100, 1000, data.size()),
              data.substr(2 * 4096 + 100, 1000));
  }
  EXPECT_EQ(rig.cache->Stats().lru_tail_hits, 0u);
  // Block 0, the coldest: a tail hit (an LRU one buffer smaller would have missed it).
  ASSERT_EQ(rig.Read(kReader, 3, 0, 4096, data.size()), data.substr(0, 4096));
  EXPECT_EQ(rig.cache->Stats().lru_tail_hits, 1u);
  ASSERT_EQ(rig.Read(kReader, 3, 0, 4096, data.size()), data.substr(0, 4096));  // warmest now
  ASSERT_EQ(rig.Read(kReader, 3, 4096, 4096, data.size()), data.substr(4096, 4096));
  stats = rig.cache->Stats();
  EXPECT_EQ(stats.lru_tail_hits, 2u);
  EXPECT_EQ(stats.demand_misses, 3u);
}

TEST(FileCacheTest, RandomReadsWritesTruncatesMatchModel) {
  // A cache of 8 blocks over files of up to 200 KiB evicts all the time.
  CacheRig rig(3, kUnit, TestOptions(8));
  std::mt19937_64 rng(42);
  std::map<uint64_t, std::string> model;
  for (uint64_t ino = 1; ino <= 4; ++ino) model[ino] = "";
  for (int step = 0; step < 3000; ++step) {
    const uint64_t ino = 1 + rng() % 4;
    std::string& file = model[ino];
    const int op = static_cast<int>(rng() % 10);
    if (op < 3) {
      const uint64_t offset = rng() % 200'000;
      const size_t length = 1 + rng() % 20'000;
      const std::string bytes = RandomBytes(length, rng());
      ASSERT_TRUE(rig.cache->Write(ino, offset, bytes.data(), length).ok());
      if (file.size() < offset + length) file.resize(offset + length, '\0');
      file.replace(offset, length, bytes);
    } else if (op == 3) {
      const uint64_t size = rng() % 220'000;
      ASSERT_TRUE(rig.cache->Truncate(ino, file.size(), size).ok());
      file.resize(size, '\0');
    } else {
      const uint64_t offset = rng() % 220'000;
      const size_t length = rng() % 30'000;
      const std::string got = rig.Read(kReader, ino, offset, length, file.size());
      const std::string want = offset >= file.size() ? "" : file.substr(offset, length);
      ASSERT_EQ(got, want) << "step " << step << " ino " << ino << " offset " << offset;
    }
  }
  CacheStats stats = rig.cache->Stats();
  EXPECT_LE(stats.lru_buffers + stats.evict_first_buffers + stats.hinted_buffers, 8u);
  EXPECT_GT(stats.evictions, 0u);
  EXPECT_GT(stats.write_blocks_updated, 0u);
}

TEST(FileCacheTest, WritePatchesCachedBlocks) {
  CacheRig rig(2, kUnit, TestOptions(64));
  std::string data = RandomBytes(16'384, 3);
  ASSERT_TRUE(rig.cache->Write(5, 0, data.data(), data.size()).ok());
  ASSERT_EQ(rig.Read(kReader, 5, 0, data.size(), data.size()), data);
  const std::string patch = RandomBytes(5000, 4);
  ASSERT_TRUE(rig.cache->Write(5, 3000, patch.data(), patch.size()).ok());
  data.replace(3000, patch.size(), patch);
  const uint64_t requests = rig.DiskRequests();
  EXPECT_EQ(rig.Read(kReader, 5, 0, data.size(), data.size()), data);
  EXPECT_EQ(rig.DiskRequests(), requests);  // served from the patched blocks
  EXPECT_EQ(rig.cache->Stats().write_blocks_updated, 2u);
}

TEST(FileCacheTest, ConcurrentReadersOfOneBlockShareOneFetch) {
  CacheRig rig(1, kUnit, TestOptions(64), Wrap::kHeld);
  const std::string data = RandomBytes(8192, 5);
  ASSERT_TRUE(rig.io->Write(9, 0, data.data(), data.size()).ok());
  rig.HoldAll(true);
  const uint64_t requests = rig.DiskRequests();
  std::string out1(100, '\0'), out2(200, '\0');
  std::atomic<int> done{0};
  Result<size_t> r1 = size_t{0}, r2 = size_t{0};
  rig.cache->ReadAsync(kReader, 9, 0, 100, data.size(), out1.data(), [&](Result<size_t> r) {
    r1 = r;
    ++done;
  });
  rig.cache->ReadAsync(ReadContext{200, 200}, 9, 50, 200, data.size(), out2.data(),
                       [&](Result<size_t> r) {
                         r2 = r;
                         ++done;
                       });
  EXPECT_EQ(done.load(), 0);
  EXPECT_EQ(rig.DiskRequests() - requests, 1u);
  EXPECT_EQ(rig.HeldCount(), 1u);
  rig.ReleaseAll();
  ASSERT_EQ(done.load(), 2);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(*r1, 100u);
  EXPECT_EQ(*r2, 200u);
  EXPECT_EQ(out1, data.substr(0, 100));
  EXPECT_EQ(out2, data.substr(50, 200));
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.demand_misses, 2u);
  EXPECT_EQ(stats.inflight_waits, 1u);
}

TEST(FileCacheTest, FetchRacingAWriteNeverLeavesStaleBytes) {
  CacheRig rig(1, kUnit, TestOptions(64), Wrap::kHeld);
  const std::string old_data(4096, 'o');
  const std::string new_data(4096, 'n');
  ASSERT_TRUE(rig.io->Write(11, 0, old_data.data(), old_data.size()).ok());
  rig.HoldAll(true);
  std::string out(4096, '\0');
  Result<size_t> r = size_t{0};
  bool done = false;
  // The fetch reads the old bytes now; its completion is held until after the write.
  rig.cache->ReadAsync(kReader, 11, 0, 4096, 4096, out.data(), [&](Result<size_t> res) {
    r = res;
    done = true;
  });
  ASSERT_FALSE(done);
  ASSERT_TRUE(rig.cache->Write(11, 0, new_data.data(), new_data.size()).ok());
  rig.ReleaseAll();
  ASSERT_TRUE(done);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(out, old_data);  // that reader overlapped the write: either version is right
  rig.HoldAll(false);
  EXPECT_EQ(rig.Read(kReader, 11, 0, 4096, 4096), new_data);  // but nobody after it
  EXPECT_EQ(rig.Read(kReader, 11, 0, 4096, 4096), new_data);
}

TEST(FileCacheTest, ReaderArrivingDuringAWriteDoesNotJoinAnOlderFetch) {
  CacheRig rig(1, kUnit, TestOptions(64), Wrap::kHeld);
  const std::string old_data(4096, 'o');
  const std::string new_data(4096, 'n');
  ASSERT_TRUE(rig.io->Write(12, 0, old_data.data(), old_data.size()).ok());
  rig.HoldAll(true);
  std::string out1(4096, '\0'), out2(4096, '\0');
  int done = 0;
  rig.cache->ReadAsync(kReader, 12, 0, 4096, 4096, out1.data(), [&](Result<size_t>) { ++done; });
  ASSERT_TRUE(rig.cache->Write(12, 0, new_data.data(), new_data.size()).ok());
  // This read starts after the write returned: it must see the new bytes.
  rig.cache->ReadAsync(kReader, 12, 0, 4096, 4096, out2.data(), [&](Result<size_t>) { ++done; });
  rig.ReleaseAll();
  ASSERT_EQ(done, 2);
  EXPECT_EQ(out2, new_data);
}

TEST(FileCacheTest, ConcurrentWritesAndReadsNeverGoBackInTime) {
  CacheRig rig(2, kUnit, TestOptions(16));
  constexpr uint64_t kIno = 21;
  constexpr size_t kSize = 3 * 4096;
  std::string version(kSize, static_cast<char>(0));
  ASSERT_TRUE(rig.cache->Write(kIno, 0, version.data(), kSize).ok());
  std::atomic<int> completed{0};
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread writer([&] {
    for (int v = 1; v <= 200; ++v) {
      std::string bytes(kSize, static_cast<char>(v));
      if (!rig.cache->Write(kIno, 0, bytes.data(), kSize).ok()) ++failures;
      completed.store(v);
    }
    stop.store(true);
  });
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&, t] {
      while (!stop.load()) {
        const int floor = completed.load();
        std::string out(4096, '\0');
        const uint64_t offset = 4096 * (t % 3);
        Result<size_t> n = rig.cache->Read(ReadContext{uint64_t(300 + t), 300u + t}, kIno, offset,
                                           4096, kSize, out.data());
        if (!n.ok() || *n != 4096) {
          ++failures;
          continue;
        }
        // A block is written whole by one write; it must be at least the version completed
        // before this read started.
        for (char c : out) {
          if (static_cast<unsigned char>(c) < floor) {
            ++failures;
            break;
          }
        }
      }
    });
  }
  writer.join();
  for (auto& r : readers) r.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(rig.Read(kReader, kIno, 0, kSize, kSize), std::string(kSize, static_cast<char>(200)));
}

TEST(FileCacheTest, ManyThreadsReadHintAndWriteConcurrently) {
  // Small cache, read-ahead on, hints in flight: eviction, fetch joins, the manager and writes
  // all interleave. Every read must return the bytes of the model.
  CacheOptions o = TestOptions(16);
  o.readahead = true;
  o.manager_thread = true;
  CacheRig rig(3, kUnit, o);
  constexpr int kFiles = 6;
  constexpr size_t kSize = 40 * 4096;
  std::vector<std::string> files;
  for (int f = 0; f < kFiles; ++f) {
    files.push_back(RandomBytes(kSize, 100 + f));
    ASSERT_TRUE(rig.io->Write(f + 1, 0, files[f].data(), kSize).ok());
  }
  // File 0 is rewritten with the same bytes while others read it: coherence under writes.
  std::atomic<int> failures{0};
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::mt19937_64 rng(1);
    while (!stop.load()) {
      const uint64_t offset = rng() % (kSize - 10'000);
      if (!rig.cache->Write(1, offset, files[0].data() + offset, 10'000).ok()) ++failures;
    }
  });
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      const uint32_t pid = 500 + t;
      for (int i = 0; i < 1500; ++i) {
        const int f = static_cast<int>(rng() % kFiles);
        const uint64_t offset = rng() % kSize;
        const size_t length = 1 + rng() % 20'000;
        if (i % 50 == 0) {
          HintBatch batch;
          batch.stream = pid;
          batch.owner = pid;
          for (int k = 0; k < 8; ++k) {
            batch.extents.push_back(
                HintExtent{uint64_t(f + 1), (offset + k * 4096) % kSize, 4096, kSize});
          }
          if (!rig.cache->Hint(batch).ok()) ++failures;
        }
        std::string out(length, '\0');
        Result<size_t> n =
            rig.cache->Read(ReadContext{pid, pid}, f + 1, offset, length, kSize, out.data());
        const size_t want = std::min<size_t>(length, kSize - offset);
        if (!n.ok() || *n != want || out.compare(0, want, files[f], offset, want) != 0) {
          ++failures;
        }
      }
    });
  }
  for (auto& r : readers) r.join();
  stop.store(true);
  writer.join();
  EXPECT_EQ(failures.load(), 0);
  CacheStats stats = rig.cache->Stats();
  EXPECT_LE(
      stats.lru_buffers + stats.evict_first_buffers + stats.hinted_buffers + stats.fetching_buffers,
      16u);
}

TEST(FileCacheTest, ShortLastBlockIsRefetchedWhenTheFileGrows) {
  // 16 KiB blocks; a 10,000-byte file is read only up to 12 KiB.
  CacheRig rig(1, 16384, TestOptions(8, 16384));
  const std::string start = RandomBytes(10'000, 20);
  ASSERT_TRUE(rig.io->Write(30, 0, start.data(), start.size()).ok());
  // A write the reader's idea of the size does not know about yet (it raced with the read).
  const std::string more = RandomBytes(8'000, 21);
  ASSERT_TRUE(rig.cache->Write(30, 12'000, more.data(), more.size()).ok());
  std::string file = start + std::string(2'000, '\0') + more;
  ASSERT_EQ(rig.Read(kReader, 30, 0, 10'000, 10'000), start);
  EXPECT_TRUE(rig.cache->Contains(30, 0));
  const uint64_t requests = rig.DiskRequests();
  EXPECT_EQ(rig.Read(kReader, 30, 0, 12'288, 20'000), file.substr(0, 12'288));
  EXPECT_EQ(rig.DiskRequests(), requests);                    // within what was read: a hit
  EXPECT_EQ(rig.Read(kReader, 30, 0, 20'000, 20'000), file);  // beyond it: read again
  EXPECT_EQ(rig.DiskRequests(), requests + 2);                // the block, then the next one
  // A write that continues the valid part extends it; one after a gap does not.
  const std::string tail = RandomBytes(4'000, 22);
  ASSERT_TRUE(rig.cache->Write(30, 20'000, tail.data(), tail.size()).ok());
  file += tail;
  const uint64_t before = rig.DiskRequests();
  EXPECT_EQ(rig.Read(kReader, 30, 0, file.size(), file.size()), file);
  EXPECT_EQ(rig.DiskRequests(), before);
}

TEST(FileCacheTest, DiskErrorIsEioAndNotCached) {
  CacheRig rig(2, kUnit, TestOptions(64), Wrap::kFaulty);
  const std::string data = RandomBytes(32'768, 6);
  ASSERT_TRUE(rig.io->Write(13, 0, data.data(), data.size()).ok());
  for (auto* f : rig.faulty) f->FailObject(13, stripe::FaultyDisk::kReads, EIO);
  int error = 0;
  rig.Read(kReader, 13, 0, 10'000, data.size(), &error);
  EXPECT_EQ(error, EIO);
  EXPECT_GT(rig.cache->Stats().fetch_errors, 0u);
  for (auto* f : rig.faulty) f->Heal();
  EXPECT_EQ(rig.Read(kReader, 13, 0, 10'000, data.size(), &error), data.substr(0, 10'000));
  EXPECT_EQ(error, 0);
}

TEST(FileCacheTest, TruncateDropsBytesPastTheEnd) {
  CacheRig rig(2, kUnit, TestOptions(64));
  const std::string data = RandomBytes(20'000, 7);
  ASSERT_TRUE(rig.cache->Write(14, 0, data.data(), data.size()).ok());
  ASSERT_EQ(rig.Read(kReader, 14, 0, data.size(), data.size()), data);
  ASSERT_TRUE(rig.cache->Truncate(14, data.size(), 5000).ok());
  ASSERT_TRUE(rig.cache->Truncate(14, 5000, 20'000).ok());
  EXPECT_EQ(rig.Read(kReader, 14, 0, 20'000, 20'000),
            data.substr(0, 5000) + std::string(15'000, '\0'));
}

TEST(FileCacheTest, RemoveDropsBlocksAndObjects) {
  CacheRig rig(2, kUnit, TestOptions(64));
  const std::string data = RandomBytes(20'000, 8);
  ASSERT_TRUE(rig.cache->Write(15, 0, data.data(), data.size()).ok());
  ASSERT_EQ(rig.Read(kReader, 15, 0, data.size(), data.size()), data);
  EXPECT_TRUE(rig.cache->Contains(15, 0));
  ASSERT_TRUE(rig.cache->Remove(15).ok());
  EXPECT_FALSE(rig.cache->Contains(15, 0));
  for (auto* m : rig.mems) EXPECT_EQ(m->Contents(15), "");
  EXPECT_EQ(rig.Read(kReader, 15, 0, 100, 100), std::string(100, '\0'));
}

TEST(FileCacheTest, CapacityHoldsAndIsChangeable) {
  CacheRig rig(4, kUnit, TestOptions(16));
  const std::string data = RandomBytes(400'000, 9);
  ASSERT_TRUE(rig.io->Write(16, 0, data.data(), data.size()).ok());
  for (uint64_t off = 0; off < data.size(); off += 10'000) {
    ASSERT_EQ(rig.Read(kReader, 16, off, 10'000, data.size()), data.substr(off, 10'000));
  }
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.capacity_blocks, 16u);
  EXPECT_LE(stats.lru_buffers, 16u);
  CacheOptions smaller = rig.cache->options();
  smaller.capacity_bytes = 8 * 4096;
  ASSERT_TRUE(rig.cache->SetOptions(smaller).ok());
  stats = rig.cache->Stats();
  EXPECT_EQ(stats.capacity_blocks, 8u);
  EXPECT_LE(stats.lru_buffers, 8u);
  CacheOptions bad = smaller;
  bad.block_size = 8192;
  EXPECT_EQ(rig.cache->SetOptions(bad).error(), EINVAL);
  bad = smaller;
  bad.capacity_bytes = 4096;
  EXPECT_EQ(rig.cache->SetOptions(bad).error(), EINVAL);
}

TEST(FileCacheTest, ValidateOptionsNamesTheProblem) {
  CacheOptions o;
  EXPECT_TRUE(FileCache::ValidateOptions(o, 65536).ok());
  o.block_size = 3000;
  EXPECT_EQ(FileCache::ValidateOptions(o, 65536).error(), EINVAL);
  o.block_size = 16384;
  EXPECT_TRUE(FileCache::ValidateOptions(o, 65536).ok());
  o.capacity_bytes = 65536;
  EXPECT_EQ(FileCache::ValidateOptions(o, 65536).error(), EINVAL);
}

TEST(FileCacheTest, DefaultBlockIsTheStripeUnit) {
  CacheOptions o;
  o.capacity_bytes = 1 << 20;
  CacheRig rig(2, 65536, o);
  EXPECT_EQ(rig.cache->block_size(), 65536u);
  EXPECT_EQ(rig.cache->Stats().capacity_blocks, 16u);
}

}  // namespace
}  // namespace tipfs::cache
