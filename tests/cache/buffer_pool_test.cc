// BufferPool (cache/buffer_pool.h): block buffers' memory is reused, by size, within a bound,
// and handed to one holder at a time when threads take and give at once (run under TSan too).
#include "cache/buffer_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "cache/block_buffer.h"

namespace tipfs::cache {
namespace {

constexpr size_t kBlock = 64 * 1024;

TEST(BufferPoolTest, AGivenBufferIsTheNextOneTakenOfItsSize) {
  BufferPool pool;
  char* a = pool.Take(kBlock);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % BufferPool::kPage, 0u);
  pool.Give(a, kBlock);
  EXPECT_EQ(pool.Take(kBlock), a);
  EXPECT_EQ(pool.GetStats().reused, 1u);
  EXPECT_EQ(pool.GetStats().allocated, 1u);
  pool.Give(a, kBlock);
}

TEST(BufferPoolTest, SizesAreKeptApart) {
  BufferPool pool;
  char* small = pool.Take(kBlock);
  pool.Give(small, kBlock);
  char* large = pool.Take(2 * kBlock);
  EXPECT_NE(large, small);
  EXPECT_EQ(pool.GetStats().reused, 0u);
  pool.Give(large, 2 * kBlock);
  EXPECT_EQ(pool.GetStats().pooled, 2u);
}

TEST(BufferPoolTest, KeepsNoMoreThanItsBoundFree) {
  BufferPool pool;
  const size_t bound = BufferPool::kMaxPooledBytes / kBlock;
  std::vector<char*> taken;
  for (size_t i = 0; i < bound + 8; ++i) taken.push_back(pool.Take(kBlock));
  for (char* p : taken) pool.Give(p, kBlock);
  EXPECT_EQ(pool.GetStats().pooled, bound);
  // Above the largest pooled size nothing is kept.
  const size_t huge = 2 * BufferPool::kMaxPooledSize;
  pool.Give(pool.Take(huge), huge);
  EXPECT_EQ(pool.GetStats().pooled, bound);
}

TEST(BufferPoolTest, ABlockBufferReusesTheMemoryOfOneThatWasFreed) {
  const char* first;
  {
    auto buffer = std::make_shared<BlockBuffer>(kBlock);
    first = buffer->bytes();
  }
  auto again = std::make_shared<BlockBuffer>(kBlock);
  EXPECT_EQ(again->bytes(), first);
}

TEST(BufferPoolTest, ThreadsTakingAndGivingAtOnceNeverShareABuffer) {
  BufferPool pool;
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < kRounds; ++i) {
        char* p = pool.Take(kBlock);
        // A buffer handed to two holders at once would show the other's bytes (and TSan a race).
        std::memset(p, t, 256);
        for (int b = 0; b < 256; ++b) ASSERT_EQ(p[b], static_cast<char>(t));
        pool.Give(p, kBlock);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const BufferPool::Stats stats = pool.GetStats();
  EXPECT_EQ(stats.reused + stats.allocated, uint64_t{kThreads} * kRounds);
  EXPECT_LE(stats.allocated, uint64_t{kThreads});
}

}  // namespace
}  // namespace tipfs::cache
