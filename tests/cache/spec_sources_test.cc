// The cache's side of speculation for programs that parse what they read (docs/DESIGN.md "Hint
// sources, classes and accuracy"): a child's hints made after it read data it did not get are
// tainted, capped per owner and over all owners (trimmed, never refused), cancelled apart from
// its clean ones, and measured with an accuracy of their own.
#include <gtest/gtest.h>

#include <string>

#include "cache/file_cache.h"
#include "tests/cache/cache_rig.h"

namespace tipfs::cache {
namespace {

using testing::CacheRig;
using testing::TestOptions;
using testing::Wrap;

constexpr uint32_t kBlock = 4096;  // also the stripe unit

// A file of `blocks` blocks of random bytes written straight to the disks.
std::string NewFile(CacheRig& rig, uint64_t ino, uint64_t blocks) {
  std::string data = testing::RandomBytes(blocks * kBlock, ino);
  EXPECT_TRUE(rig.io->Write(ino, 0, data.data(), data.size()).ok());
  return data;
}

ReadContext Child(uint64_t parent, uint32_t epoch, HintSource source) {
  ReadContext c{900, 900};
  c.speculative = true;
  c.spec_stream = parent;
  c.spec_epoch = epoch;
  c.spec_source = source;
  return c;
}

TEST(SpecSourcesTest, TaintedHintsAreTrimmedToTheOwnersBudgetAndNeverRefused) {
  CacheOptions o = TestOptions(256);
  o.tainted_hint_budget_bytes = 10 * kBlock;
  CacheRig rig(2, kBlock, o, Wrap::kHeld);
  const std::string data = NewFile(rig, 1, 64);
  rig.HoldAll(true);
  int error = 0;
  // Garbage-fed reads of huge ranges: each is hinted only as far as the budget goes.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(rig.Read(Child(100, 1, HintSource::kSpeculativeTainted), 1, i * 16 * kBlock,
                       16 * kBlock, data.size(), &error),
              "");
    EXPECT_EQ(error, EAGAIN);
  }
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.outstanding_tainted_bytes, 10u * kBlock);
  EXPECT_EQ(stats.tainted_outstanding_max_bytes, 10u * kBlock);
  EXPECT_EQ(stats.tainted_trimmed_bytes, 54u * kBlock);
  EXPECT_EQ(stats.hints_refused, 0u);
  // Clean hints are not charged to the tainted budget (blocks 10..29: nothing of them is cached
  // or coming; the tainted reads' first 10 blocks are).
  EXPECT_EQ(rig.Read(Child(100, 1, HintSource::kSpeculative), 1, 10 * kBlock, 20 * kBlock,
                     data.size(), &error),
            "");
  EXPECT_EQ(rig.cache->QueryStream(100).hinted_bytes, 30u * kBlock);
  rig.HoldAll(false);
  rig.ReleaseAll();
}

TEST(SpecSourcesTest, TheGlobalTaintedBudgetBoundsAllOwnersTogether) {
  CacheOptions o = TestOptions(256);
  o.tainted_hint_budget_bytes = 8 * kBlock;
  o.global_tainted_hint_budget_bytes = 12 * kBlock;
  CacheRig rig(2, kBlock, o, Wrap::kHeld);
  const std::string data = NewFile(rig, 1, 64);
  rig.HoldAll(true);
  for (uint64_t parent : {100, 101, 102}) {  // each reads its own part of the file
    rig.Read(Child(parent, 1, HintSource::kSpeculativeTainted), 1, (parent - 100) * 8 * kBlock,
             8 * kBlock, data.size());
  }
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.outstanding_tainted_bytes, 12u * kBlock);
  EXPECT_EQ(rig.cache->QueryStream(100).hinted_bytes, 8u * kBlock);
  EXPECT_EQ(rig.cache->QueryStream(101).hinted_bytes, 4u * kBlock);
  EXPECT_FALSE(rig.cache->QueryStream(102).exists);
  // Cancelling one owner's tainted hints gives the room back.
  ASSERT_TRUE(rig.cache->Cancel(100, 1u, /*tainted_only=*/true).ok());
  EXPECT_EQ(rig.cache->Stats().outstanding_tainted_bytes, 4u * kBlock);
  rig.Read(Child(102, 1, HintSource::kSpeculativeTainted), 1, 40 * kBlock, 8 * kBlock, data.size());
  EXPECT_EQ(rig.cache->QueryStream(102).hinted_bytes, 8u * kBlock);
  rig.HoldAll(false);
  rig.ReleaseAll();
}

// A child ended: its tainted hints go, its clean ones stay and the program's reads consume them;
// each class keeps its own accuracy.
TEST(SpecSourcesTest, EndingAChildCancelsOnlyItsTaintedHints) {
  CacheRig rig(2, kBlock, TestOptions(256), Wrap::kHeld);
  const std::string data = NewFile(rig, 1, 32);
  rig.HoldAll(true);
  rig.Read(Child(100, 7, HintSource::kSpeculative), 1, 0, 2 * kBlock, data.size());
  rig.Read(Child(100, 7, HintSource::kSpeculativeTainted), 1, 10 * kBlock, 6 * kBlock, data.size());
  ASSERT_TRUE(rig.cache->Cancel(100, 7u, /*tainted_only=*/true).ok());
  StreamInfo info = rig.cache->QueryStream(100);
  ASSERT_TRUE(info.exists);
  EXPECT_EQ(info.hinted_bytes, 2u * kBlock);
  rig.HoldAll(false);
  rig.ReleaseAll();
  const uint64_t requests = rig.DiskRequests();
  EXPECT_EQ(rig.Read(ReadContext{100, 100}, 1, 0, 2 * kBlock, data.size()),
            data.substr(0, 2 * kBlock));
  EXPECT_EQ(rig.DiskRequests(), requests);  // prefetched for the clean hint
  CacheStats stats = rig.cache->Stats();
  const size_t clean = static_cast<size_t>(HintSource::kSpeculative);
  const size_t tainted = static_cast<size_t>(HintSource::kSpeculativeTainted);
  EXPECT_EQ(stats.blocks_consumed[clean], 2u);
  EXPECT_EQ(stats.blocks_consumed[tainted], 0u);
  EXPECT_EQ(stats.bytes_hinted[tainted], 6u * kBlock);
  EXPECT_GT(stats.accuracy[clean], stats.accuracy[tainted]);
  EXPECT_EQ(std::string(HintSourceName(HintSource::kSpeculativeTainted)), "speculative_tainted");
  EXPECT_EQ(std::string(HintSourceName(HintSource::kHistory)), "history");
}

// A child re-reads what it read (a parser seeks back; garbage sends it to the same header again)
// and, in kernel data-cache mode, the program reads a block from the daemon once: only data
// neither cached nor coming nor just hinted becomes a hint, so none is left unconsumable.
TEST(SpecSourcesTest, ReadsOfDataCachedComingOrJustHintedAreNoHints) {
  CacheRig rig(2, kBlock, TestOptions(256), Wrap::kHeld);
  const std::string data = NewFile(rig, 1, 32);
  rig.HoldAll(true);
  const ReadContext child = Child(100, 1, HintSource::kSpeculativeTainted);
  rig.Read(child, 1, 0, 4 * kBlock, data.size());
  rig.Read(child, 1, 0, 4 * kBlock, data.size());           // the same again: in flight
  rig.Read(child, 1, kBlock, 100, data.size());             // part of it
  rig.Read(child, 1, 2 * kBlock, 4 * kBlock, data.size());  // blocks 4 and 5 are new
  EXPECT_EQ(rig.cache->QueryStream(100).hinted_bytes, 6u * kBlock);
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.spec_redundant_bytes, 4u * kBlock + 100 + 2 * kBlock);
  rig.HoldAll(false);
  rig.ReleaseAll();
  rig.Read(ReadContext{100, 100}, 1, 0, 6 * kBlock, data.size());
  stats = rig.cache->Stats();
  EXPECT_EQ(stats.blocks_consumed[static_cast<size_t>(HintSource::kSpeculativeTainted)], 6u);
  EXPECT_EQ(stats.hinted_skipped + stats.hinted_cancelled, 0u);
}

// The replay of the last run (history, a named stream of the program) and the program's
// speculating child disclose the same reads: neither hints again what the other holds, cached
// or not yet (a block far past the prefetch horizon is in no table, only in a stream).
TEST(SpecSourcesTest, HistoryAndSpeculationDoNotHintTheSameBlocksTwice) {
  CacheRig rig(2, kBlock, TestOptions(64), Wrap::kHeld);
  const std::string data = NewFile(rig, 1, 512);
  rig.HoldAll(true);
  const uint64_t history_stream = (uint64_t{100} << 32) | 0x68697374;
  HintBatch history;
  history.stream = history_stream;
  history.owner = 100;
  history.source = HintSource::kHistory;
  history.extents.push_back(HintExtent{1, 0, 256 * kBlock, data.size()});
  ASSERT_TRUE(rig.cache->Hint(history).ok());
  // The child reads blocks 200..203, which history hinted: no speculative hint.
  rig.Read(Child(100, 1, HintSource::kSpeculative), 1, 200 * kBlock, 4 * kBlock, data.size());
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.bytes_hinted[static_cast<size_t>(HintSource::kSpeculative)], 0u);
  EXPECT_FALSE(rig.cache->QueryStream(100).exists);
  // It reads on past what history holds: blocks 300..303 are its own hints.
  rig.Read(Child(100, 1, HintSource::kSpeculative), 1, 300 * kBlock, 4 * kBlock, data.size());
  EXPECT_EQ(rig.cache->QueryStream(100).hinted_bytes, 4u * kBlock);
  // History moving on to 296..311 hints only the 12 blocks the child does not hold.
  history.extents = {HintExtent{1, 296 * kBlock, 16 * kBlock, data.size()}};
  ASSERT_TRUE(rig.cache->Hint(history).ok());
  stats = rig.cache->Stats();
  EXPECT_EQ(stats.bytes_hinted[static_cast<size_t>(HintSource::kHistory)],
            256u * kBlock + 12 * kBlock);
  rig.HoldAll(false);
  rig.ReleaseAll();
}

// A speculating child hints only what is neither cached nor coming, so its program, on the child's
// path, makes reads no hint names (GNU ld re-reading objects still cached from its last pass).
// Those must not retire the stream: its program's on-track check judges it. Retiring it cancelled
// the hints ahead, and every later stream of a child far ahead was retired before the program got
// to it (a gcc link's first run at 0.89 of the original instead of 0.56).
TEST(SpecSourcesTest, ReadsNoHintNamesDoNotRetireTheChildsStream) {
  CacheRig rig(2, kBlock, TestOptions(256));
  const std::string data = NewFile(rig, 1, 200);
  int error = 0;
  EXPECT_EQ(rig.Read(Child(100, 1, HintSource::kSpeculativeTainted), 1, 150 * kBlock, kBlock,
                     data.size(), &error),
            "");
  EXPECT_EQ(error, EAGAIN);
  for (uint64_t b = 0; b < 2 * HintStream::kRetireAfterMismatches; ++b) {
    rig.Read(ReadContext{100, 100}, 1, b * kBlock, 10, data.size());
  }
  EXPECT_TRUE(rig.cache->QueryStream(100).exists);
  EXPECT_EQ(rig.Read(ReadContext{100, 100}, 1, 150 * kBlock, kBlock, data.size()),
            data.substr(150 * kBlock, kBlock));
  CacheStats stats = rig.cache->Stats();
  EXPECT_EQ(stats.streams_retired, 0u);
  EXPECT_EQ(stats.hinted_cancelled, 0u);
  EXPECT_EQ(stats.blocks_consumed[static_cast<size_t>(HintSource::kSpeculativeTainted)], 1u);
}

}  // namespace
}  // namespace tipfs::cache
