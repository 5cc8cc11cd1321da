// Partially filled blocks: a demand miss fetches the granules its read covers (rounded to
// CacheOptions::min_read), not the whole stripe unit; read-ahead fetches whole blocks and hinted
// prefetches the bytes their hints name (and what a partly cached block lacks of them); writes,
// truncation and holes stay correct over blocks of which only some granules are valid.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/file_cache.h"
#include "stripe/disk_wrapper.h"
#include "tests/cache/cache_rig.h"

namespace tipfs::cache {
namespace {

using testing::CacheRig;
using testing::RandomBytes;
using testing::TestOptions;
using testing::Wrap;

constexpr uint32_t kUnit = 64 * 1024;
constexpr uint32_t kPage = 4096;
const ReadContext kReader{100, 100};

// Counts the reads and the bytes the cache asks the disks for.
class CountingDisk : public stripe::DiskWrapper {
 public:
  CountingDisk(std::unique_ptr<stripe::Disk> inner, std::atomic<uint64_t>* bytes,
               std::atomic<uint64_t>* reads)
      : DiskWrapper(std::move(inner)), bytes_(bytes), reads_(reads) {}
  void Submit(stripe::DiskRequest request) override {
    if (request.kind == stripe::DiskRequest::Kind::kRead) {
      bytes_->fetch_add(request.length);
      reads_->fetch_add(1);
    }
    inner_->Submit(std::move(request));
  }

 private:
  std::atomic<uint64_t>* const bytes_;
  std::atomic<uint64_t>* const reads_;
};

// A rig of 4 disks whose reads are counted; `file` bytes of inode 2 already on the disks.
struct Rig {
  explicit Rig(CacheOptions options, uint32_t unit = kUnit, Wrap wrap = Wrap::kNone,
               size_t file_bytes = 16 * kUnit)
      : rig(4, unit, options, wrap,
            [this](std::unique_ptr<stripe::Disk> inner, Clock*) -> std::unique_ptr<stripe::Disk> {
              return std::make_unique<CountingDisk>(std::move(inner), &read_bytes, &reads);
            }),
        file(RandomBytes(file_bytes, 7)) {
    rig.WriteUnderneath(kIno, file);
  }
  // Bytes read from the disks by `fn`.
  template <typename Fn>
  uint64_t Fetched(Fn fn) {
    const uint64_t before = read_bytes.load();
    fn();
    return read_bytes.load() - before;
  }
  std::string Read(uint64_t offset, size_t length) {
    return rig.Read(kReader, kIno, offset, length, file.size());
  }
  std::string Expect(uint64_t offset, size_t length) const { return file.substr(offset, length); }

  // A hint of `extents` (offset, length) of the file, in order.
  void Hint(const std::vector<std::pair<uint64_t, uint64_t>>& extents) {
    HintBatch batch;
    batch.stream = 100;
    batch.owner = 100;
    for (const auto& [offset, length] : extents) {
      batch.extents.push_back(HintExtent{kIno, offset, length, file.size()});
    }
    ASSERT_TRUE(rig.cache->Hint(batch).ok());
  }

  static constexpr uint64_t kIno = 2;
  std::atomic<uint64_t> read_bytes{0};
  std::atomic<uint64_t> reads{0};
  CacheRig rig;
  std::string file;
};

CacheOptions UnitBlocks(uint64_t blocks = 64, uint32_t unit = kUnit) {
  return TestOptions(blocks, unit);
}

TEST(PartialBlockTest, MissFetchesOnlyTheGranulesTheReadCovers) {
  Rig r(UnitBlocks());
  EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(10'000, 100) == r.Expect(10'000, 100)); }), kPage);
  // 5,000 bytes across two pages of another block: two granules.
  EXPECT_EQ(
      r.Fetched([&] { EXPECT_TRUE(r.Read(kUnit + 5000, 5000) == r.Expect(kUnit + 5000, 5000)); }),
      2 * kPage);
  // Read again: hits, nothing fetched.
  EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(8192, 4096) == r.Expect(8192, 4096)); }), 0u);
  const CacheStats stats = r.rig.cache->Stats();
  EXPECT_EQ(stats.demand_misses, 2u);
  EXPECT_EQ(stats.demand_hits, 1u);
}

TEST(PartialBlockTest, ALaterReadOfOtherGranulesFetchesOnlyThose) {
  Rig r(UnitBlocks());
  ASSERT_TRUE(r.Read(2 * kPage, kPage) == r.Expect(2 * kPage, kPage));
  // Granules 2..5: 2 is there, 3..5 are fetched.
  EXPECT_EQ(r.Fetched([&] {
    EXPECT_TRUE(r.Read(2 * kPage, 4 * kPage) == r.Expect(2 * kPage, 4 * kPage));
  }),
            3 * kPage);
  // Granules 0..5: 0 and 1 are fetched.
  EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(0, 6 * kPage) == r.Expect(0, 6 * kPage)); }),
            2 * kPage);
  // The whole block: the rest, 6..15, in one fetch.
  EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(0, kUnit) == r.Expect(0, kUnit)); }), 10 * kPage);
  EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(0, kUnit) == r.Expect(0, kUnit)); }), 0u);
  EXPECT_EQ(r.rig.cache->Stats().demand_private_fetches, 0u);
}

TEST(PartialBlockTest, WritesIntoAPartialBlockReadBackWhatTheDisksHold) {
  Rig r(UnitBlocks());
  ASSERT_TRUE(r.Read(2 * kPage, kPage) == r.Expect(2 * kPage, kPage));
  auto write = [&](uint64_t offset, const std::string& bytes) {
    ASSERT_TRUE(r.rig.cache->Write(Rig::kIno, offset, bytes.data(), bytes.size()).ok());
    r.file.replace(offset, bytes.size(), bytes);
  };
  // Into the valid granule 2, part of the missing granule 5, all of the missing granule 7.
  write(2 * kPage + 100, RandomBytes(200, 11));
  write(5 * kPage + 1000, RandomBytes(300, 12));
  write(7 * kPage, RandomBytes(kPage, 13));
  // Granules 2 and 7 are in memory; 5 is fetched (with the bytes written to it).
  EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(2 * kPage, kPage) == r.Expect(2 * kPage, kPage)); }),
            0u);
  EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(7 * kPage, kPage) == r.Expect(7 * kPage, kPage)); }),
            0u);
  EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(5 * kPage, kPage) == r.Expect(5 * kPage, kPage)); }),
            kPage);
  // The whole block: the missing granules (0-1, 3-4, 6, 8-15) are read as one span, 0 to 15.
  EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(0, kUnit) == r.Expect(0, kUnit)); }), kUnit);
  EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(0, kUnit) == r.Expect(0, kUnit)); }), 0u);
  EXPECT_EQ(r.rig.cache->Stats().demand_span_fetches, 1u);
}

TEST(PartialBlockTest, TruncateAndHolesReadAsZeros) {
  Rig r(UnitBlocks());
  FileCache& cache = *r.rig.cache;
  const uint64_t size = r.file.size();
  ASSERT_TRUE(r.Read(kUnit + 3 * kPage, kPage) == r.Expect(kUnit + 3 * kPage, kPage));
  // Shrink into the partial block, then grow again: the bytes past the cut are zeros.
  ASSERT_TRUE(cache.Truncate(Rig::kIno, size, kUnit + 3 * kPage + 10).ok());
  ASSERT_TRUE(cache.Truncate(Rig::kIno, kUnit + 3 * kPage + 10, size).ok());
  r.file.replace(kUnit + 3 * kPage + 10, std::string::npos,
                 std::string(size - (kUnit + 3 * kPage + 10), '\0'));
  std::string got;
  EXPECT_EQ(r.Fetched([&] { got = r.rig.Read(kReader, Rig::kIno, kUnit, 8 * kPage, size); }),
            8u * kPage);
  EXPECT_TRUE(got == r.Expect(kUnit, 3 * kPage + 10) + std::string(5 * kPage - 10, '\0'));
  // A file longer than its data: a partial block past the data reads zeros, a page at a time.
  const uint64_t long_size = size + 3 * kUnit;
  EXPECT_EQ(r.Fetched([&] {
    EXPECT_EQ(r.rig.Read(kReader, Rig::kIno, size + kUnit + 100, 50, long_size),
              std::string(50, '\0'));
  }),
            kPage);
}

TEST(PartialBlockTest, PrefetchAndWholeBlockHintsFillWholeBlocks) {
  Rig r(UnitBlocks());
  HintBatch batch;
  batch.stream = 100;
  batch.owner = 100;
  batch.extents.push_back(HintExtent{Rig::kIno, 4 * kUnit, 2 * kUnit, r.file.size()});
  // A reader that never read has a horizon as deep as the cache: both blocks are fetched now.
  EXPECT_EQ(r.Fetched([&] { ASSERT_TRUE(r.rig.cache->Hint(batch).ok()); }), 2u * kUnit);
  EXPECT_TRUE(r.rig.cache->Contains(Rig::kIno, 4));
  EXPECT_TRUE(r.rig.cache->Contains(Rig::kIno, 5));
  // Their reads are hits, consumed in order.
  EXPECT_EQ(r.Fetched([&] {
    EXPECT_TRUE(r.Read(4 * kUnit, kUnit) == r.Expect(4 * kUnit, kUnit));
    EXPECT_TRUE(r.Read(5 * kUnit, kUnit) == r.Expect(5 * kUnit, kUnit));
  }),
            0u);
  EXPECT_EQ(r.rig.cache->QueryStream(100).blocks_consumed, 2u);
  EXPECT_EQ(r.rig.cache->Stats().hinted_used, 2u);

  // Sequential read-ahead fetches whole blocks too, the demand read itself only its pages.
  CacheOptions o = r.rig.cache->options();
  o.readahead = true;
  ASSERT_TRUE(r.rig.cache->SetOptions(o).ok());
  const CacheStats before = r.rig.cache->Stats();
  uint64_t fetched = r.Fetched([&] {
    for (uint64_t off = 8 * kUnit; off < 11 * kUnit; off += kPage) {
      EXPECT_TRUE(r.Read(off, kPage) == r.Expect(off, kPage));
    }
  });
  const CacheStats stats = r.rig.cache->Stats();
  ASSERT_GT(stats.readahead_issued, 0u);
  EXPECT_EQ(fetched,
            (stats.demand_misses - before.demand_misses) * kPage + stats.readahead_issued * kUnit);
}

TEST(PartialBlockTest, AHintedPrefetchReadsTheBytesTheHintNames) {
  Rig r(UnitBlocks());
  // Bytes 8K to 16K + 100 of block 4: granules 2, 3 and 4.
  const uint64_t at = 4 * kUnit + 2 * kPage;
  EXPECT_EQ(r.Fetched([&] { r.Hint({{at, 2 * kPage + 100}}); }), 3 * kPage);
  EXPECT_EQ(
      r.Fetched([&] { EXPECT_TRUE(r.Read(at, 2 * kPage + 100) == r.Expect(at, 2 * kPage + 100)); }),
      0u);
  EXPECT_EQ(r.rig.cache->Stats().hinted_used, 1u);
  EXPECT_EQ(r.rig.cache->Stats().demand_misses, 0u);
}

TEST(PartialBlockTest, HintsOfOneBlockInARowAreOnePrefetch) {
  Rig r(UnitBlocks());
  // A reader hinting each of its reads: 4 KiB at every other page of block 3.
  std::vector<std::pair<uint64_t, uint64_t>> extents;
  for (uint64_t page = 0; page < 16; page += 2)
    extents.emplace_back(3 * kUnit + page * kPage, kPage);
  const uint64_t fetched = r.Fetched([&] {
    r.Hint(extents);
    for (const auto& [offset, length] : extents) {
      EXPECT_TRUE(r.Read(offset, length) == r.Expect(offset, length));
    }
  });
  // Pages 0 to 14, the ones between included: one read.
  EXPECT_EQ(fetched, 15 * kPage);
  EXPECT_EQ(r.reads.load(), 1u);
  EXPECT_EQ(r.rig.cache->Stats().demand_misses, 0u);
}

TEST(PartialBlockTest, AHintFillsWhatAPartlyCachedBlockLacks) {
  Rig r(UnitBlocks());
  const uint64_t at = 5 * kUnit;
  ASSERT_TRUE(r.Read(at, kPage) == r.Expect(at, kPage));
  // The hint names pages 0 to 7; page 0 is cached, 1 to 7 are prefetched into the block.
  EXPECT_EQ(r.Fetched([&] { r.Hint({{at, 8 * kPage}}); }), 7 * kPage);
  EXPECT_EQ(r.rig.cache->Stats().hinted_fills, 1u);
  EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(at, 8 * kPage) == r.Expect(at, 8 * kPage)); }), 0u);
  EXPECT_EQ(r.rig.cache->Stats().demand_misses, 1u);
  // Nothing is missing for a second hint of the same bytes.
  EXPECT_EQ(r.Fetched([&] { r.Hint({{at, 8 * kPage}}); }), 0u);
  EXPECT_EQ(r.rig.cache->Stats().hinted_fills, 1u);
}

TEST(PartialBlockTest, MinReadRoundsTheFetch) {
  CacheOptions o = UnitBlocks();
  o.min_read = 16 * 1024;
  Rig r(o);
  // 100 bytes at 20,000 lie in [16 KiB, 32 KiB).
  EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(20'000, 100) == r.Expect(20'000, 100)); }),
            16u * 1024);
  EXPECT_EQ(r.Fetched([&] {
    EXPECT_TRUE(r.Read(16 * 1024, 16 * 1024) == r.Expect(16 * 1024, 16 * 1024));
  }),
            0u);
  // A read across two rounding units fetches both.
  EXPECT_EQ(r.Fetched([&] {
    EXPECT_TRUE(r.Read(kUnit + 15'000, 3000) == r.Expect(kUnit + 15'000, 3000));
  }),
            32u * 1024);
  // A block or more: whole blocks, as before partial blocks.
  o.min_read = 1u << 20;
  ASSERT_TRUE(r.rig.cache->SetOptions(o).ok());
  EXPECT_EQ(
      r.Fetched([&] { EXPECT_TRUE(r.Read(3 * kUnit + 5, 10) == r.Expect(3 * kUnit + 5, 10)); }),
      kUnit);
  // Not a power of two, or under a page: refused, naming the field.
  for (uint32_t bad : {0u, 2048u, 12'288u}) {
    o.min_read = bad;
    const Status st = FileCache::ValidateOptions(o, kUnit);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("minimum read"), std::string::npos) << st.message();
  }
}

TEST(PartialBlockTest, BlocksBeyondTheMaskUseLargerGranules) {
  // 256 KiB: 64 granules of 4 KiB, the mask's every bit, the last one included.
  {
    Rig r(UnitBlocks(16, 256 * 1024), 256 * 1024, Wrap::kNone, 4 * 256 * 1024);
    EXPECT_EQ(r.rig.cache->granule_bytes(), kPage);
    const uint64_t last = 256 * 1024 - kPage;
    EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(last, kPage) == r.Expect(last, kPage)); }), kPage);
    EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(0, kPage) == r.Expect(0, kPage)); }), kPage);
    EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(0, 256 * 1024) == r.Expect(0, 256 * 1024)); }),
              62u * kPage);
  }
  // 1 MiB: 64 granules of 16 KiB; a page read fetches its granule.
  {
    Rig r(UnitBlocks(8, 1u << 20), 1u << 20, Wrap::kNone, 4u << 20);
    EXPECT_EQ(r.rig.cache->granule_bytes(), 16u * 1024);
    EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(500'000, 100) == r.Expect(500'000, 100)); }),
              16u * 1024);
    EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(0, 480 * 1024) == r.Expect(0, 480 * 1024)); }),
              480u * 1024);
  }
}

TEST(PartialBlockTest, ReadsOfOneBlockInFlightJoinOrFetchTheirOwn) {
  Rig r(UnitBlocks(), kUnit, Wrap::kHeld);
  r.rig.HoldAll(true);
  std::string a(kPage, 'x'), b(kPage, 'x'), c(kPage, 'x');
  int done = 0;
  auto check = [&](Result<size_t> n) {
    EXPECT_TRUE(n.ok());
    ++done;
  };
  const uint64_t size = r.file.size();
  const uint64_t fetched = r.Fetched([&] {
    r.rig.cache->ReadAsync(kReader, Rig::kIno, 0, kPage, size, a.data(), check);
    // The same granule joins the fetch in flight; another one cannot wait for it.
    r.rig.cache->ReadAsync(kReader, Rig::kIno, 0, kPage, size, b.data(), check);
    r.rig.cache->ReadAsync(kReader, Rig::kIno, 5 * kPage, kPage, size, c.data(), check);
  });
  EXPECT_EQ(fetched, 2u * kPage);
  EXPECT_EQ(r.rig.HeldCount(), 2u);
  r.rig.HoldAll(false);
  r.rig.ReleaseAll();
  EXPECT_EQ(done, 3);
  EXPECT_EQ(a, r.Expect(0, kPage));
  EXPECT_EQ(b, r.Expect(0, kPage));
  EXPECT_EQ(c, r.Expect(5 * kPage, kPage));
  const CacheStats stats = r.rig.cache->Stats();
  EXPECT_EQ(stats.inflight_waits, 1u);
  EXPECT_EQ(stats.demand_private_fetches, 1u);
  // Granule 0 is cached; 5 came in a buffer of its own and is fetched again.
  EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(0, kPage) == r.Expect(0, kPage)); }), 0u);
  EXPECT_EQ(r.Fetched([&] { EXPECT_TRUE(r.Read(5 * kPage, kPage) == r.Expect(5 * kPage, kPage)); }),
            kPage);
}

TEST(PartialBlockTest, ConcurrentReadersAndAWriterSeeTheDisksBytes) {
  // Four readers of random ranges of a few blocks, and a writer rewriting pages with bytes that
  // say where they are: every page read is the original or a version the writer wrote there.
  Rig r(UnitBlocks(8), kUnit, Wrap::kNone, 4 * kUnit);
  const uint64_t size = r.file.size();
  auto version_of = [](uint64_t page, uint32_t v) {
    return std::string(kPage, static_cast<char>('a' + (page * 7 + v) % 26));
  };
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0};
  std::thread writer([&] {
    std::mt19937_64 rng(3);
    for (uint32_t v = 1; v <= 300; ++v) {
      const uint64_t page = rng() % (size / kPage);
      const std::string bytes = version_of(page, v);
      ASSERT_TRUE(r.rig.cache->Write(Rig::kIno, page * kPage, bytes.data(), kPage).ok());
    }
    stop = true;
  });
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      ReadContext ctx{static_cast<uint64_t>(200 + t), static_cast<uint32_t>(200 + t)};
      while (!stop) {
        const uint64_t first = rng() % (size / kPage);
        const uint64_t pages = 1 + rng() % std::min<uint64_t>(6, size / kPage - first);
        std::string out(pages * kPage, '\0');
        Result<size_t> n =
            r.rig.cache->Read(ctx, Rig::kIno, first * kPage, out.size(), size, out.data());
        if (!n.ok() || *n != out.size()) {
          ++bad;
          continue;
        }
        for (uint64_t p = 0; p < pages; ++p) {
          const std::string got = out.substr(p * kPage, kPage);
          const uint64_t page = first + p;
          if (got == r.Expect(page * kPage, kPage)) continue;
          // A written page is one letter throughout.
          if (got != std::string(kPage, got[0])) ++bad;
        }
      }
    });
  }
  writer.join();
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0u);
  // Afterwards the cache and the disks agree on every byte.
  std::string disks(size, '\0');
  ASSERT_TRUE(r.rig.io->Read(Rig::kIno, 0, size, disks.data()).ok());
  EXPECT_EQ(r.rig.Read(kReader, Rig::kIno, 0, size, size), disks);
}

}  // namespace
}  // namespace tipfs::cache
