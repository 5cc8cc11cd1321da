// Writes into cached blocks (cache/file_cache_write.cc, cache/block_buffer.h): a write patches
// a block no reader holds in place, copying only its own bytes; a block whose buffer a reader
// holds (a copy in progress, a FUSE reply from references) is patched in a copy, and the reader
// keeps the old bytes. Then many readers and writers at once on one file, where every page a read
// returns must be one write's whole page, never older than the last write to it that had
// returned before the read began (run under the sanitizers: label sanitize).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/file_cache.h"
#include "tests/cache/cache_rig.h"
#include "util/mutex.h"

namespace tipfs::cache {
namespace {

using testing::CacheRig;
using testing::RandomBytes;
using testing::TestOptions;
using testing::Wrap;

constexpr uint32_t kBlock = 64 * 1024;  // the default stripe unit, the block a write patches
constexpr size_t kPage = 4096;
const ReadContext kReader{100, 100};

// A read by reference (what the FUSE reply uses): the slices keep the buffers pinned for as long
// as the returned ReadData lives. `done` may run on another thread (one whose DrainIssues
// submitted this read's fetch, which the in-memory disks complete inline): wait for it.
std::optional<ReadData> ReadHeld(CacheRig* rig, const ReadContext& ctx, uint64_t ino,
                                 uint64_t offset, size_t length, uint64_t file_size) {
  struct Reply {
    Mutex mu;
    CondVar cv;
    bool done GUARDED_BY(mu) = false;
    std::optional<ReadData> data GUARDED_BY(mu);
  };
  auto reply = std::make_shared<Reply>();
  rig->cache->ReadShared(ctx, ino, offset, length, file_size, [reply](Result<ReadData> data) {
    EXPECT_TRUE(data.ok()) << data.status().ToString();
    MutexLock lock(&reply->mu);
    if (data.ok()) reply->data = std::move(*data);
    reply->done = true;
    reply->cv.Signal();
  });
  MutexLock lock(&reply->mu);
  while (!reply->done) reply->cv.Wait(&reply->mu);
  return std::move(reply->data);
}

std::string Bytes(const ReadData& data) {
  std::string out(data.bytes, '\0');
  data.CopyTo(out.data());
  return out;
}

TEST(WritePatchTest, AFourKiBWriteIntoAnUnheldCachedBlockPatchesItInPlace) {
  CacheRig rig(2, kBlock, TestOptions(16, kBlock));
  constexpr uint64_t kIno = 7;
  std::string model = RandomBytes(2 * kBlock, 1);
  ASSERT_TRUE(rig.cache->Write(kIno, 0, model.data(), model.size()).ok());
  ASSERT_EQ(rig.Read(kReader, kIno, 0, model.size(), model.size()), model);  // cached now
  const CacheStats before = rig.cache->Stats();

  const std::string patch = RandomBytes(kPage, 2);
  const uint64_t at = kBlock + 2 * kPage;
  ASSERT_TRUE(rig.cache->Write(kIno, at, patch.data(), patch.size()).ok());
  model.replace(at, patch.size(), patch);

  const CacheStats after = rig.cache->Stats();
  EXPECT_EQ(after.write_blocks_updated, before.write_blocks_updated + 1);
  EXPECT_EQ(after.write_blocks_patched_in_place, before.write_blocks_patched_in_place + 1);
  EXPECT_EQ(after.write_copied_bytes, before.write_copied_bytes);  // no block copied
  const uint64_t requests = rig.DiskRequests();
  // The new bytes and the old ones around them, from the patched block.
  EXPECT_TRUE(rig.Read(kReader, kIno, kBlock, kBlock, model.size()) == model.substr(kBlock));
  EXPECT_TRUE(rig.Read(kReader, kIno, 0, model.size(), model.size()) == model);
  EXPECT_EQ(rig.DiskRequests(), requests);
}

TEST(WritePatchTest, AReaderHoldingTheBufferKeepsTheOldBytesAndTheWriteCopies) {
  CacheRig rig(2, kBlock, TestOptions(16, kBlock));
  constexpr uint64_t kIno = 8;
  std::string model = RandomBytes(kBlock, 3);
  ASSERT_TRUE(rig.cache->Write(kIno, 0, model.data(), model.size()).ok());
  ASSERT_EQ(rig.Read(kReader, kIno, 0, kBlock, kBlock), model);
  const std::string old_bytes = model;

  // A reply in progress: references into the block's buffer (a hit).
  std::optional<ReadData> held = ReadHeld(&rig, kReader, kIno, 0, kBlock, kBlock);
  ASSERT_TRUE(held.has_value());
  const CacheStats before = rig.cache->Stats();
  const std::string patch = RandomBytes(kPage, 4);
  ASSERT_TRUE(rig.cache->Write(kIno, 5 * kPage, patch.data(), patch.size()).ok());
  model.replace(5 * kPage, patch.size(), patch);

  CacheStats after = rig.cache->Stats();
  EXPECT_EQ(after.write_blocks_patched_in_place, before.write_blocks_patched_in_place);
  EXPECT_EQ(after.write_copied_bytes, before.write_copied_bytes + kBlock);
  EXPECT_TRUE(Bytes(*held) == old_bytes);  // the reply still sends the bytes it was given
  EXPECT_TRUE(rig.Read(kReader, kIno, 0, kBlock, kBlock) == model);

  // Once the reply is done, the next write patches the (new) buffer in place.
  held.reset();
  const std::string patch2 = RandomBytes(kPage, 5);
  ASSERT_TRUE(rig.cache->Write(kIno, 9 * kPage, patch2.data(), patch2.size()).ok());
  model.replace(9 * kPage, patch2.size(), patch2);
  const CacheStats last = rig.cache->Stats();
  EXPECT_EQ(last.write_blocks_patched_in_place, after.write_blocks_patched_in_place + 1);
  EXPECT_EQ(last.write_copied_bytes, after.write_copied_bytes);
  EXPECT_TRUE(rig.Read(kReader, kIno, 0, kBlock, kBlock) == model);
}

TEST(WritePatchTest, AReaderThatWaitedForAFetchHoldsTheBufferTheFetchGaveTheBlock) {
  // The waiting reader's bytes come from the fetch's buffer, which became the block's: a write
  // after the completion must not change them under the reply.
  CacheRig rig(2, kBlock, TestOptions(16, kBlock), Wrap::kHeld);
  constexpr uint64_t kIno = 9;
  std::string model = RandomBytes(kBlock, 6);
  rig.WriteUnderneath(kIno, model);
  rig.HoldAll(true);
  std::optional<ReadData> held;
  rig.cache->ReadShared(kReader, kIno, 0, kBlock, kBlock, [&](Result<ReadData> data) {
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    held = std::move(*data);
  });
  ASSERT_FALSE(held.has_value());
  ASSERT_GT(rig.HeldCount(), 0u);
  rig.HoldAll(false);
  rig.ReleaseAll();
  ASSERT_TRUE(held.has_value());
  ASSERT_TRUE(rig.cache->Contains(kIno, 0));

  const CacheStats before = rig.cache->Stats();
  const std::string old_bytes = model;
  const std::string patch = RandomBytes(kPage, 7);
  ASSERT_TRUE(rig.cache->Write(kIno, 3 * kPage, patch.data(), patch.size()).ok());
  model.replace(3 * kPage, patch.size(), patch);
  const CacheStats after = rig.cache->Stats();
  EXPECT_EQ(after.write_blocks_updated, before.write_blocks_updated + 1);
  EXPECT_EQ(after.write_copied_bytes, before.write_copied_bytes + kBlock);
  EXPECT_TRUE(Bytes(*held) == old_bytes);
  EXPECT_TRUE(rig.Read(kReader, kIno, 0, kBlock, kBlock) == model);
}

// Every 8 bytes of a page written by writer `writer` (1-based; 0 = the initial contents) as its
// `seq`-th write say so, with the page's number.
uint64_t Word(uint64_t page, uint64_t writer, uint64_t seq) {
  return page << 40 | writer << 32 | seq;
}

std::string PageOf(uint64_t page, uint64_t writer, uint64_t seq) {
  std::string bytes(kPage, '\0');
  const uint64_t w = Word(page, writer, seq);
  for (size_t i = 0; i < kPage; i += sizeof w) std::memcpy(bytes.data() + i, &w, sizeof w);
  return bytes;
}

TEST(WritePatchTest, ConcurrentReadersAndWritersSeeWholePagesNeverOlderThanLastWritten) {
  // Writers write whole pages (each page belongs to one writer, so its writes are ordered);
  // readers read runs of pages, by copy and by reference, and check every page in the bytes
  // they got: one write's whole page (what the cache promises of a read overlapping writes: the
  // bytes before or after a write, never a mix within it), of that page, and at least as new as
  // the last write to it that had returned before the read started. A reference read checks the
  // bytes in the cache's buffer itself, twice, while it holds it: a write that patched a buffer
  // a reader holds would show here (and to TSan, as a race).
  constexpr uint64_t kIno = 11;
  constexpr uint64_t kPages = 8 * kBlock / kPage;  // 8 blocks
  constexpr uint64_t kFileSize = kPages * kPage;
  constexpr int kWriters = 2;
  constexpr int kReaders = 3;
  constexpr int kReadsEach = 2000;  // writers write until every reader has read this often
  CacheRig rig(2, kBlock, TestOptions(16, kBlock));
  {
    std::string initial;
    for (uint64_t p = 0; p < kPages; ++p) initial += PageOf(p, 0, 0);
    ASSERT_TRUE(rig.cache->Write(kIno, 0, initial.data(), initial.size()).ok());
  }
  std::vector<std::atomic<uint64_t>> completed(kPages);  // last returned write's seq, per page
  std::atomic<int> readers_left{kReaders};
  std::atomic<int> failures{0};
  std::atomic<uint64_t> pages_checked{0};

  auto check_page = [&](uint64_t page, const char* bytes, uint64_t floor) {
    uint64_t first;
    std::memcpy(&first, bytes, sizeof first);
    for (size_t i = sizeof first; i < kPage; i += sizeof first) {
      uint64_t w;
      std::memcpy(&w, bytes + i, sizeof w);
      if (w != first) return false;  // a mix of two writes
    }
    const uint64_t writer = first >> 32 & 0xff;
    const uint64_t seq = first & 0xffffffff;
    const bool owner = writer == 0 ? seq == 0 : (writer - 1) == page % kWriters;
    return (first >> 40) == page && owner && seq >= floor;
  };

  std::vector<std::thread> threads;
  for (int w = 1; w <= kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(w);
      for (uint64_t seq = 1; readers_left.load() > 0; ++seq) {
        const uint64_t page = (rng() % (kPages / kWriters)) * kWriters + (w - 1);
        const std::string bytes = PageOf(page, w, seq);
        if (!rig.cache->Write(kIno, page * kPage, bytes.data(), kPage).ok()) ++failures;
        completed[page].store(seq, std::memory_order_release);
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(100 + r);
      const ReadContext ctx{uint64_t(200 + r), 200u + static_cast<uint32_t>(r)};
      for (int i = 0; i < kReadsEach; ++i) {
        const uint64_t first = rng() % kPages;
        const uint64_t count = 1 + rng() % std::min<uint64_t>(20, kPages - first);
        std::vector<uint64_t> floors(count);
        for (uint64_t i = 0; i < count; ++i) {
          floors[i] = completed[first + i].load(std::memory_order_acquire);
        }
        if (rng() % 2 == 0) {
          std::string out(count * kPage, '\0');
          Result<size_t> n =
              rig.cache->Read(ctx, kIno, first * kPage, out.size(), kFileSize, out.data());
          if (!n.ok() || *n != out.size()) {
            ++failures;
            continue;
          }
          for (uint64_t i = 0; i < count; ++i) {
            if (!check_page(first + i, out.data() + i * kPage, floors[i])) ++failures;
          }
        } else {
          std::optional<ReadData> held =
              ReadHeld(&rig, ctx, kIno, first * kPage, count * kPage, kFileSize);
          if (!held.has_value() || held->bytes != count * kPage) {
            ++failures;
            continue;
          }
          // Slices split at block boundaries, which are page boundaries: walk them by page.
          for (int pass = 0; pass < 2; ++pass) {
            uint64_t page = first;
            for (const ReadSlice& slice : held->slices) {
              for (size_t at = 0; at < slice.length; at += kPage, ++page) {
                if (!check_page(page, slice.data + at, floors[page - first])) ++failures;
              }
            }
            std::this_thread::yield();  // let writers in while the buffers are held
          }
        }
        pages_checked.fetch_add(count);
      }
      readers_left.fetch_sub(1);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(pages_checked.load(), 0u);
  // Every page ends as its last write left it.
  std::string out = rig.Read(kReader, kIno, 0, kFileSize, kFileSize);
  ASSERT_EQ(out.size(), kFileSize);
  for (uint64_t p = 0; p < kPages; ++p) {
    const uint64_t seq = completed[p].load();
    EXPECT_TRUE(out.substr(p * kPage, kPage) == PageOf(p, seq == 0 ? 0 : p % kWriters + 1, seq))
        << "page " << p;
  }
  const CacheStats stats = rig.cache->Stats();
  std::printf("patched in place %llu, copied %llu bytes, dropped %llu\n",
              static_cast<unsigned long long>(stats.write_blocks_patched_in_place),
              static_cast<unsigned long long>(stats.write_copied_bytes),
              static_cast<unsigned long long>(stats.write_blocks_dropped));
}

}  // namespace
}  // namespace tipfs::cache
