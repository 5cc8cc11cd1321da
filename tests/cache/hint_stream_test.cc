// HintStream: expansion into block accesses, in-order consumption, skips, neutral re-reads,
// mismatches and retirement, cancellation by epoch and by file, byte and segment accounting.
#include "cache/hint_stream.h"

#include <gtest/gtest.h>

#include <random>

namespace tipfs::cache {
namespace {

constexpr uint32_t kBlock = 4096;

HintSegment Seg(uint64_t ino, uint64_t offset, uint64_t length, uint32_t epoch = 0) {
  return HintSegment{ino, offset, length, 1 << 30, epoch, HintSource::kManual};
}

TEST(HintStreamTest, SegmentsExpandIntoBlockAccessesLazily) {
  HintStream s(1, 100, kBlock, 0);
  s.Append(Seg(7, 1000, 10'000));  // blocks 0..2 of file 7
  s.Append(Seg(8, 0, 100));
  EXPECT_EQ(s.outstanding_bytes(), 10'100u);
  EXPECT_EQ(s.segments_pending(), 2u);
  s.Expand(2);
  ASSERT_EQ(s.expanded(), 2u);
  EXPECT_EQ(s.at(0).block, 0u);
  EXPECT_EQ(s.at(0).begin, 1000u);
  EXPECT_EQ(s.at(0).end, 4096u);
  EXPECT_EQ(s.at(1).block, 1u);
  s.Expand(100);
  ASSERT_EQ(s.expanded(), 4u);
  EXPECT_EQ(s.at(2).end, 11'000u);
  EXPECT_TRUE(s.at(2).last_of_segment);
  EXPECT_EQ(s.at(3).ino, 8u);
  EXPECT_EQ(s.segments_pending(), 2u);  // expansion does not consume
}

TEST(HintStreamTest, ReadsConsumeInOrderAndPartialReadsKeepTheBlock) {
  HintStream s(1, 100, kBlock, 0);
  s.Append(Seg(7, 0, 3 * kBlock));
  StreamRelease r;
  // 1 KiB reads through the first block: it is consumed when its last byte is read.
  EXPECT_EQ(s.Match(7, 0, 1024, 10, &r), HintStream::MatchResult::kMatched);
  EXPECT_TRUE(r.consumed.empty());
  EXPECT_EQ(s.outstanding_bytes(), 3u * kBlock - 1024);
  EXPECT_EQ(s.Match(7, 1024, 3072, 20, &r), HintStream::MatchResult::kMatched);
  ASSERT_EQ(r.consumed.size(), 1u);
  EXPECT_EQ(r.consumed[0].block, 0u);
  // A read of both remaining blocks consumes both and the segment.
  EXPECT_EQ(s.Match(7, kBlock, 2 * kBlock, 30, &r), HintStream::MatchResult::kMatched);
  EXPECT_EQ(r.consumed.size(), 3u);
  EXPECT_EQ(s.outstanding_bytes(), 0u);
  EXPECT_EQ(s.segments_pending(), 0u);
  EXPECT_EQ(s.blocks_consumed, 3u);
  EXPECT_TRUE(s.exhausted());
  EXPECT_EQ(s.last_activity_ns(), 30);
}

TEST(HintStreamTest, ReadAheadInTheStreamSkipsAndDropsTheAccessesBefore) {
  HintStream s(1, 100, kBlock, 0);
  for (uint64_t f = 1; f <= 5; ++f) s.Append(Seg(f, 0, kBlock));
  StreamRelease r;
  EXPECT_EQ(s.Match(3, 0, kBlock, 1, &r), HintStream::MatchResult::kMatched);
  ASSERT_EQ(r.dropped.size(), 2u);  // files 1 and 2 were passed over
  EXPECT_EQ(r.dropped[0].ino, 1u);
  ASSERT_EQ(r.consumed.size(), 1u);
  EXPECT_EQ(r.consumed[0].ino, 3u);
  EXPECT_EQ(s.segments_pending(), 2u);
  EXPECT_EQ(s.outstanding_bytes(), 2u * kBlock);
}

TEST(HintStreamTest, RereadOfTheLastBlockIsNeutralAndMismatchesRetire) {
  HintStream s(1, 100, kBlock, 0);
  s.Append(Seg(7, 0, kBlock));
  s.Append(Seg(8, 0, kBlock));
  StreamRelease r;
  ASSERT_EQ(s.Match(7, 0, kBlock, 1, &r), HintStream::MatchResult::kMatched);
  EXPECT_EQ(s.Match(7, 100, 10, 2, &r), HintStream::MatchResult::kNeutral);
  EXPECT_EQ(s.mismatches(), 0u);
  for (uint32_t i = 1; i < HintStream::kRetireAfterMismatches; ++i) {
    EXPECT_EQ(s.Match(99, 0, 10, 3, &r), HintStream::MatchResult::kMismatch);
  }
  EXPECT_FALSE(s.retire_due());
  // One match resets the count; then a full run of mismatches makes it due.
  ASSERT_EQ(s.Match(8, 0, 10, 4, &r), HintStream::MatchResult::kMatched);
  EXPECT_EQ(s.mismatches(), 0u);
  for (uint32_t i = 0; i < HintStream::kRetireAfterMismatches; ++i) s.Match(99, 0, 10, 5, &r);
  EXPECT_TRUE(s.retire_due());
}

TEST(HintStreamTest, CancelEpochDropsOnlyThatEpoch) {
  HintStream s(1, 100, kBlock, 0);
  s.Append(Seg(1, 0, 2 * kBlock, /*epoch=*/1));
  s.Append(Seg(2, 0, kBlock, /*epoch=*/2));
  s.Append(Seg(3, 0, 3 * kBlock, /*epoch=*/1));
  s.Expand(2);  // one expanded, one pending epoch-1 segment
  StreamRelease r;
  s.CancelEpoch(1, /*tainted_only=*/false, &r);
  EXPECT_EQ(r.dropped.size(), 2u);
  EXPECT_EQ(r.unexpanded_dropped[0], 3u);
  EXPECT_EQ(r.dropped_accesses(), 5u);
  EXPECT_EQ(s.outstanding_bytes(), uint64_t{kBlock});
  EXPECT_EQ(s.segments_pending(), 1u);
  s.Expand(10);
  ASSERT_EQ(s.expanded(), 1u);
  EXPECT_EQ(s.at(0).ino, 2u);
}

TEST(HintStreamTest, CancellingTaintedHintsKeepsTheEpochsCleanOnes) {
  HintStream s(1, 100, kBlock, 0);
  HintSegment clean = Seg(1, 0, 2 * kBlock, /*epoch=*/4);
  clean.source = HintSource::kSpeculative;
  HintSegment tainted = Seg(2, 0, 3 * kBlock, /*epoch=*/4);
  tainted.source = HintSource::kSpeculativeTainted;
  HintSegment other_epoch = Seg(3, 0, kBlock, /*epoch=*/5);
  other_epoch.source = HintSource::kSpeculativeTainted;
  s.Append(clean);
  s.Append(tainted);
  s.Append(other_epoch);
  EXPECT_EQ(s.outstanding_bytes(HintSource::kSpeculativeTainted), 4u * kBlock);
  s.Expand(3);  // the clean segment and one block of the tainted one expanded
  StreamRelease r;
  s.CancelEpoch(4, /*tainted_only=*/true, &r);
  EXPECT_EQ(r.dropped_accesses(), 3u);
  EXPECT_EQ(s.outstanding_bytes(HintSource::kSpeculative), 2u * kBlock);
  EXPECT_EQ(s.outstanding_bytes(HintSource::kSpeculativeTainted), uint64_t{kBlock});
  EXPECT_EQ(s.outstanding_bytes(), 3u * kBlock);
  // Consuming the clean hints leaves only the other epoch's tainted block.
  EXPECT_EQ(s.Match(1, 0, 2 * kBlock, 1, &r), HintStream::MatchResult::kMatched);
  EXPECT_EQ(s.outstanding_bytes(HintSource::kSpeculative), 0u);
  EXPECT_EQ(s.outstanding_bytes(), uint64_t{kBlock});
}

TEST(HintStreamTest, RemoveInodeAndCursor) {
  HintStream s(1, 100, kBlock, 0);
  s.Append(Seg(1, 0, 2 * kBlock));
  s.Append(Seg(2, 0, 2 * kBlock));
  s.Expand(4);
  s.at(0).state = HintedAccess::State::kHeld;
  s.at(1).state = HintedAccess::State::kDone;
  s.AdvanceCursor();
  EXPECT_EQ(s.cursor(), 2u);
  StreamRelease r;
  s.RemoveInode(1, &r);
  EXPECT_EQ(r.dropped.size(), 2u);
  EXPECT_EQ(s.cursor(), 0u);  // the accesses left are all pending
  EXPECT_EQ(s.outstanding_bytes(), 2u * kBlock);
  s.CancelAll(&r);
  EXPECT_TRUE(s.exhausted());
  EXPECT_EQ(s.outstanding_bytes(), 0u);
  EXPECT_EQ(s.segments_pending(), 0u);
}

// HoldsBlock answers from indexes kept beside the accesses and segments; after every change of
// a stream it must say what a scan of everything outstanding says. The scan runs on a copy of
// the stream expanded in full, so pending segments are counted block by block.
bool HeldByScan(const HintStream& s, uint64_t ino, uint64_t block) {
  HintStream all = s;
  all.Expand(1 << 20);
  for (size_t i = 0; i < all.expanded(); ++i) {
    if (all.at(i).ino == ino && all.at(i).block == block) return true;
  }
  return false;
}

TEST(HintStreamTest, HoldsBlockAgreesWithAScanThroughEveryKindOfChange) {
  std::mt19937_64 rng(16);
  HintStream s(1, 100, kBlock, 0);
  StreamRelease r;
  int64_t now = 0;
  for (int step = 0; step < 3000; ++step) {
    const uint64_t ino = 1 + rng() % 3;
    const uint64_t offset = rng() % (64 * kBlock);
    switch (rng() % 10) {
      case 0:
      case 1:
      case 2:  // segments from a byte to several blocks, overlapping one another
        s.Append(Seg(ino, offset, 1 + rng() % (6 * kBlock), static_cast<uint32_t>(rng() % 3)));
        break;
      case 3:
        s.Expand(s.expanded() + rng() % 8);
        break;
      case 4:
      case 5:  // reads: consumed, partly consumed, skipped past, or mismatched
        s.Match(ino, offset, 1 + rng() % (2 * kBlock), ++now, &r);
        break;
      case 6:
        s.MatchAnyOrder(ino, offset, 1 + rng() % kBlock, ++now, &r);
        break;
      case 7:
        if (rng() % 8 == 0) s.CancelEpoch(static_cast<uint32_t>(rng() % 3), false, &r);
        break;
      case 8:
        if (rng() % 8 == 0) s.RemoveInode(ino, &r);
        break;
      case 9:
        if (rng() % 50 == 0) s.CancelAll(&r);
        break;
    }
    r.Clear();
    for (int probe = 0; probe < 4; ++probe) {
      const uint64_t pi = 1 + rng() % 3;
      const uint64_t pb = rng() % 72;
      ASSERT_EQ(s.HoldsBlock(pi, pb), HeldByScan(s, pi, pb))
          << "step " << step << ", file " << pi << " block " << pb;
    }
  }
}

}  // namespace
}  // namespace tipfs::cache
