// Shared hint streams (issue 12): a loader process discloses its order on a stream it shares, and
// the reads of the processes fusefs vouches for (ReadContext::shared_owner) consume it in any
// order, without passing over what other readers have not read yet. Others' reads never do.
#include <gtest/gtest.h>

#include <string>

#include "cache/file_cache.h"
#include "cache/hint_stream.h"
#include "tests/cache/cache_rig.h"

namespace tipfs::cache {
namespace {

using testing::CacheRig;
using testing::RandomBytes;
using testing::TestOptions;

constexpr uint32_t kBlock = 4096;
constexpr uint32_t kLoader = 100;
constexpr uint64_t kStream = (uint64_t{kLoader} << 32) | 7;  // the loader's named stream 7

HintSegment Seg(uint64_t ino, uint64_t offset, uint64_t length) {
  return HintSegment{ino, offset, length, 1 << 30, 0, HintSource::kManual};
}

TEST(StreamSharingTest, AnyOrderMatchConsumesWithoutDroppingEarlierAccesses) {
  HintStream s(1, kLoader, kBlock, 0);
  for (uint64_t f = 1; f <= 40; ++f) s.Append(Seg(f, 0, 2 * kBlock));  // 80 accesses
  StreamRelease r;
  // Worker B reads file 30 (accesses 58 and 59) while worker A has not read file 1 yet.
  EXPECT_EQ(s.MatchAnyOrder(30, 0, 2 * kBlock, 10, &r), HintStream::MatchResult::kMatched);
  ASSERT_EQ(r.consumed.size(), 2u);
  EXPECT_EQ(r.consumed[0].ino, 30u);
  EXPECT_TRUE(r.dropped.empty());
  EXPECT_EQ(s.expanded(), 78u);
  EXPECT_EQ(s.at(0).ino, 1u);
  EXPECT_EQ(s.outstanding_bytes(), 39u * 2 * kBlock);
  // A half read keeps the block hinted; the rest of it consumes it.
  EXPECT_EQ(s.MatchAnyOrder(1, 0, kBlock + 100, 11, &r), HintStream::MatchResult::kMatched);
  EXPECT_EQ(r.consumed.size(), 3u);
  EXPECT_EQ(s.MatchAnyOrder(1, kBlock + 100, kBlock - 100, 12, &r),
            HintStream::MatchResult::kMatched);
  EXPECT_EQ(r.consumed.size(), 4u);
  EXPECT_EQ(s.at(0).ino, 2u);
  // A re-read of the block just consumed is neutral; a file never hinted is a mismatch.
  EXPECT_EQ(s.MatchAnyOrder(1, kBlock, 10, 13, &r), HintStream::MatchResult::kNeutral);
  EXPECT_EQ(s.MatchAnyOrder(99, 0, 10, 14, &r), HintStream::MatchResult::kMismatch);
  EXPECT_EQ(s.mismatches(), 1u);
  // Reading every remaining file in reverse consumes everything, nothing is dropped.
  for (uint64_t f = 40; f >= 2; --f) {
    if (f == 30) continue;
    EXPECT_EQ(s.MatchAnyOrder(f, 0, 2 * kBlock, 20, &r), HintStream::MatchResult::kMatched) << f;
  }
  EXPECT_TRUE(s.exhausted());
  EXPECT_EQ(s.outstanding_bytes(), 0u);
  EXPECT_EQ(s.segments_pending(), 0u);
  EXPECT_EQ(s.blocks_consumed, 80u);
  EXPECT_TRUE(r.dropped.empty());
}

TEST(StreamSharingTest, AnyOrderMatchLooksNoFurtherThanItsWindow) {
  HintStream s(1, kLoader, kBlock, 0);
  const uint64_t files = HintStream::kSharedMatchWindow + 10;
  for (uint64_t f = 1; f <= files; ++f) s.Append(Seg(f, 0, kBlock));
  StreamRelease r;
  EXPECT_EQ(s.MatchAnyOrder(files, 0, kBlock, 1, &r), HintStream::MatchResult::kMismatch);
  EXPECT_EQ(s.MatchAnyOrder(HintStream::kSharedMatchWindow, 0, kBlock, 2, &r),
            HintStream::MatchResult::kMatched);
}

class SharedCacheTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kFiles = 24;
  void SetUp() override {
    for (uint64_t f = 1; f <= kFiles; ++f) {
      data_[f] = RandomBytes(2 * kBlock, f);
      ASSERT_TRUE(rig_.io->Write(f, 0, data_[f].data(), data_[f].size()).ok());
    }
  }
  // The loader's order: every file, whole.
  Status HintAll(uint64_t stream = kStream) {
    HintBatch b;
    b.stream = stream;
    b.owner = kLoader;
    for (uint64_t f = 1; f <= kFiles; ++f)
      b.extents.push_back(HintExtent{f, 0, 2 * kBlock, 2 * kBlock});
    return rig_.cache->Hint(b);
  }
  std::string ReadFile(const ReadContext& who, uint64_t f) {
    return rig_.Read(who, f, 0, 2 * kBlock, 2 * kBlock);
  }
  static ReadContext Worker(uint32_t pid, uint32_t shared_owner) {
    ReadContext c{pid, pid};
    c.shared_owner = shared_owner;
    return c;
  }

  CacheRig rig_{2, kBlock, TestOptions(256)};
  std::string data_[kFiles + 1];
};

TEST_F(SharedCacheTest, WorkersVouchedForConsumeTheSharedStreamInAnyOrder) {
  ASSERT_TRUE(rig_.cache->ShareStream(kStream, kLoader, true).ok());
  ASSERT_TRUE(HintAll().ok());
  // Two workers take alternate halves of the order and read them at once (interleaved).
  for (uint64_t i = 0; i < kFiles / 2; ++i) {
    EXPECT_EQ(ReadFile(Worker(201, kLoader), kFiles / 2 + 1 + i), data_[kFiles / 2 + 1 + i]);
    EXPECT_EQ(ReadFile(Worker(202, kLoader), 1 + i), data_[1 + i]);
  }
  StreamInfo info = rig_.cache->QueryStream(kStream);
  EXPECT_EQ(info.hinted_bytes, 0u);
  EXPECT_EQ(info.blocks_consumed, 2 * kFiles);
  CacheStats stats = rig_.cache->Stats();
  EXPECT_EQ(stats.shared_consumed, 2 * kFiles);
  EXPECT_EQ(stats.hinted_skipped, 0u);
  EXPECT_EQ(stats.hinted_cancelled, 0u);
}

TEST_F(SharedCacheTest, OnlySharedStreamsAndOnlyVouchedReadersConsume) {
  ASSERT_TRUE(HintAll().ok());  // not shared yet
  EXPECT_EQ(ReadFile(Worker(201, kLoader), 1), data_[1]);
  EXPECT_EQ(rig_.cache->QueryStream(kStream).blocks_consumed, 0u);
  ASSERT_TRUE(rig_.cache->ShareStream(kStream, kLoader, true).ok());
  // A process fusefs did not vouch for (another user, or not a descendant) reads everything.
  for (uint64_t f = 1; f <= kFiles; ++f) EXPECT_EQ(ReadFile(Worker(300, 0), f), data_[f]);
  EXPECT_EQ(rig_.cache->QueryStream(kStream).blocks_consumed, 0u);
  EXPECT_EQ(rig_.cache->QueryStream(kStream).hinted_bytes, kFiles * 2 * kBlock);
  // Its cancel-everything covers its own streams only.
  rig_.cache->CancelProcess(300);
  EXPECT_EQ(rig_.cache->QueryStream(kStream).hinted_bytes, kFiles * 2 * kBlock);
  // The owner reads in any order too.
  EXPECT_EQ(ReadFile(ReadContext{kLoader, kLoader}, 5), data_[5]);
  EXPECT_EQ(rig_.cache->QueryStream(kStream).blocks_consumed, 2u);
  EXPECT_EQ(rig_.cache->QueryStream(kStream).hinted_bytes, (kFiles - 1) * 2 * kBlock);
  EXPECT_EQ(rig_.cache->Stats().hinted_skipped, 0u);
  // Unshared, workers no longer consume.
  ASSERT_TRUE(rig_.cache->ShareStream(kStream, kLoader, false).ok());
  EXPECT_EQ(ReadFile(Worker(201, kLoader), 6), data_[6]);
  EXPECT_EQ(rig_.cache->QueryStream(kStream).blocks_consumed, 2u);
}

TEST_F(SharedCacheTest, TheMarkOutlivesTheStreamUntilTheSharerIsForgotten) {
  ASSERT_TRUE(rig_.cache->ShareStream(kStream, kLoader, true).ok());
  ASSERT_TRUE(HintAll().ok());
  ASSERT_TRUE(rig_.cache->Cancel(kStream).ok());
  ASSERT_TRUE(HintAll().ok());  // the next epoch's order, on the same stream
  EXPECT_EQ(ReadFile(Worker(201, kLoader), 3), data_[3]);
  EXPECT_EQ(rig_.cache->QueryStream(kStream).blocks_consumed, 2u);
  rig_.cache->ForgetSharer(kLoader);  // the loader exited: its hints go
  EXPECT_EQ(rig_.cache->QueryStream(kStream).hinted_bytes, 0u);
  ASSERT_TRUE(HintAll().ok());
  EXPECT_EQ(ReadFile(Worker(201, kLoader), 4), data_[4]);
  EXPECT_EQ(rig_.cache->QueryStream(kStream).blocks_consumed, 0u);
}

TEST_F(SharedCacheTest, AReReadForAnEarlierStreamDoesNotHideTheStreamThatHintsIt) {
  const uint64_t last_epoch = (uint64_t{kLoader} << 32) | 1;
  ASSERT_TRUE(rig_.cache->ShareStream(last_epoch, kLoader, true).ok());
  ASSERT_TRUE(rig_.cache->ShareStream(kStream, kLoader, true).ok());
  ASSERT_TRUE(HintAll(last_epoch).ok());
  for (uint64_t f = 1; f <= kFiles; ++f) EXPECT_EQ(ReadFile(Worker(201, kLoader), f), data_[f]);
  EXPECT_EQ(rig_.cache->QueryStream(last_epoch).hinted_bytes, 0u);
  // The next sampler hints the file the last one ended with; reading it consumes the new hint.
  ASSERT_TRUE(HintAll().ok());
  EXPECT_EQ(ReadFile(Worker(201, kLoader), kFiles), data_[kFiles]);
  EXPECT_EQ(rig_.cache->QueryStream(kStream).blocks_consumed, 2u);
}

TEST_F(SharedCacheTest, AProcessSharesAtMostAsManyStreamsAsItMayHave) {
  for (uint64_t k = 1; k <= 64; ++k) {
    ASSERT_TRUE(rig_.cache->ShareStream((uint64_t{kLoader} << 32) | k, kLoader, true).ok());
  }
  EXPECT_EQ(rig_.cache->ShareStream((uint64_t{kLoader} << 32) | 65, kLoader, true).error(), EDQUOT);
  EXPECT_TRUE(rig_.cache->ShareStream((uint64_t{kLoader} << 32) | 64, kLoader, true).ok());
  EXPECT_TRUE(rig_.cache->ShareStream((uint64_t{kLoader + 1} << 32) | 1, kLoader + 1, true).ok());
}

}  // namespace
}  // namespace tipfs::cache
