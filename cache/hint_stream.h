// HintStream: one hinter's disclosed future reads, in order, and how far its reads have consumed
// them. Segments (file, offset, length) are kept compact and expanded lazily into per-block
// accesses only as far as the TIP manager looks ahead, so a stream's memory is bounded by its
// segment count plus the blocks it holds.
//
// Matching (TIP: hints are disclosures, not commands): a read by the stream's process consumes
// the hinted accesses it overlaps, in order. A read that overlaps one of the next few accesses
// (kMatchLookahead) consumes it and drops the ones before it as skipped; a read of the block just
// consumed is neutral; anything else is an unhinted read, and after kRetireAfterMismatches of those
// in a row the stream is retired by its owner (unless it holds a speculating child's hints, which
// its program judges: TipManager::MatchStreams).
//
// A stream its owner shared with its descendants (TIPFS_IOC_SHARE: a loader whose worker processes
// read the order it disclosed, each its own part at once) is matched in any order instead: a read
// consumes what it overlaps among the next kSharedMatchWindow accesses and drops none, since the
// accesses before it belong to readers that have not got there yet.
//
// Not thread-safe: FileCache guards every stream with its mutex.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/tip_model.h"

namespace tipfs::cache {

// Where hints come from (values match enum tipfs_hint_source of include/tipfs/hint.h).
// kSpeculative: a speculating child's reads on data it really read (clean: what the program will
// do); kSpeculativeTainted: its reads after its first read of data it did not get (guesses made
// on garbage: capped by CacheOptions::tainted_hint_budget_bytes and cancelled apart);
// kHistory: the reads of the last run of the same command, replayed by `tipfs run`.
enum class HintSource : uint8_t {
  kManual = 0,
  kSpeculative = 1,
  kWarmup = 2,
  kHistory = 3,
  kSpeculativeTainted = 4,
};
constexpr size_t kHintSourceCount = 5;
// "manual", "speculative", "warmup", "history", "speculative_tainted"
const char* HintSourceName(HintSource source);

// A contiguous range of a file, as disclosed (already resolved and clipped to end of file).
struct HintSegment {
  uint64_t ino = 0;
  uint64_t offset = 0;
  uint64_t length = 0;  // > 0
  uint64_t file_size = 0;
  uint32_t epoch = 0;
  HintSource source = HintSource::kManual;
};

// One hinted block access: the bytes [begin, end) of block `block` of file `ino` still to be read.
struct HintedAccess {
  enum class State : uint8_t {
    kPending,  // not yet looked at by the prefetcher
    kHeld,     // the prefetcher holds its block (cached or in flight): block_id names it
    kDone,     // nothing to fetch (past end of file, the prefetch failed, warm-up completed)
  };
  uint64_t ino = 0;
  uint64_t block = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t file_size = 0;
  uint64_t block_id = 0;
  uint32_t epoch = 0;
  HintSource source = HintSource::kManual;
  State state = State::kPending;
  bool last_of_segment = false;
  bool consumed_any = false;
};

// What a change to a stream released: accesses consumed by reads, accesses dropped unread, and
// for segments dropped before they were expanded, their block accesses per source.
struct StreamRelease {
  std::vector<HintedAccess> consumed;
  std::vector<HintedAccess> dropped;
  std::array<uint64_t, kHintSourceCount> unexpanded_dropped{};
  uint64_t dropped_accesses() const;
  void Clear();
};

class HintStream {
 public:
  static constexpr size_t kMatchLookahead = 16;
  static constexpr uint32_t kRetireAfterMismatches = 64;
  // Wide enough for the samples a loader has handed its workers and they have not read yet
  // (PyTorch: prefetch_factor x num_workers batches; 2 x 8 x 256 samples is 4096).
  static constexpr size_t kSharedMatchWindow = 4096;

  HintStream(uint64_t id, uint32_t owner, uint32_t block_size, int64_t now_ns);

  uint64_t id() const { return id_; }
  uint32_t owner() const { return owner_; }

  void Append(const HintSegment& segment);
  // True when the last segment appended covers [offset, offset + length) of `ino` (and has not
  // been wholly consumed or dropped since).
  bool LastAppendedCovers(uint64_t ino, uint64_t offset, uint64_t length) const;
  // True when an access to block `block` of `ino` is still outstanding (expanded or not). A hash
  // lookup among the expanded accesses and O(log n) among the file's pending segments (see
  // PendingIndex), not a scan: the manager asks it per block of every speculative read. The
  // indexes are built at the first call and kept from then on, so a stream nobody asks about
  // (most: only an owner with several streams is asked) does not pay for them on every read.
  bool HoldsBlock(uint64_t ino, uint64_t block) const;
  // The index of the first outstanding access to block `block` of `ino` (its distance is the
  // index + 1), or kNotFound when there is none among the first `limit` accesses. Walks the
  // expanded accesses, then the pending segments a block count at a time (without expanding
  // them): at most `limit` steps of each.
  static constexpr size_t kNotFound = static_cast<size_t>(-1);
  size_t IndexOf(uint64_t ino, uint64_t block, size_t limit) const;
  // Accesses that have left the front of the stream (read or dropped), counted from creation:
  // an access now at index i is at position popped() + i, which stays put while accesses leave
  // from the front (one leaving from the middle moves those before it by one).
  uint64_t popped() const { return popped_; }

  // Expanded accesses; index 0 is the next access the stream's reader will make (x = 1).
  size_t expanded() const { return accesses_.size(); }
  HintedAccess& at(size_t i) { return accesses_[i]; }
  const HintedAccess& at(size_t i) const { return accesses_[i]; }
  // Expands segments until at least `count` accesses are expanded or none are left.
  void Expand(size_t count);
  bool exhausted() const { return accesses_.empty() && pending_.empty(); }

  enum class MatchResult { kMatched, kNeutral, kMismatch };
  // A read of [offset, offset + length) of `ino` by the stream's process. Consumed and skipped
  // accesses are appended to *release.
  MatchResult Match(uint64_t ino, uint64_t offset, uint64_t length, int64_t now_ns,
                    StreamRelease* release);
  // The same for a shared stream, in any order within kSharedMatchWindow (see above).
  MatchResult MatchAnyOrder(uint64_t ino, uint64_t offset, uint64_t length, int64_t now_ns,
                            StreamRelease* release);

  // Drops every access (or those of one epoch, its tainted ones only, or one file) into *release.
  void CancelAll(StreamRelease* release);
  void CancelEpoch(uint32_t epoch, bool tainted_only, StreamRelease* release);
  void RemoveInode(uint64_t ino, StreamRelease* release);
  // Pops leading accesses that are kDone and were never read (warm-up streams advance this way).
  void PopDoneFront(StreamRelease* release);

  // The prefetcher's cursor: every access before it is kHeld or kDone.
  size_t cursor() const { return cursor_; }
  void AdvanceCursor();              // past leading non-pending accesses
  void RewindCursor(size_t index) {  // after an access at `index` went back to kPending
    if (index < cursor_) cursor_ = index;
  }

  uint64_t outstanding_bytes() const { return outstanding_bytes_; }
  uint64_t outstanding_bytes(HintSource source) const {
    return outstanding_by_source_[static_cast<size_t>(source)];
  }
  uint64_t segments_pending() const { return pending_.size() + expanded_segment_ends_; }
  uint64_t segments() const { return segments_pending(); }
  uint32_t mismatches() const { return mismatches_; }
  bool retire_due() const { return mismatches_ >= kRetireAfterMismatches; }
  int64_t created_ns() const { return created_ns_; }
  int64_t last_activity_ns() const { return last_activity_ns_; }
  // New hints count as activity (matching reads do too).
  void Touch(int64_t now_ns) {
    if (now_ns > last_activity_ns_) last_activity_ns_ = now_ns;
  }

  // Counters for QueryStream.
  uint64_t blocks_consumed = 0;
  uint64_t blocks_prefetched = 0;
  // Accesses consumed per second, recent ones weighing most: the stream's pace as it runs,
  // stalls included (TipManager::AccessRate).
  static constexpr int64_t kConsumptionHalfLifeNanos = 500'000'000;
  DecayingRate consumption{kConsumptionHalfLifeNanos};

  // Blocks the manager keeps for a disclosed reuse beyond its lookahead window (informed
  // caching, TipManager::KeepForReuse): each holds one hint_ref of its block, named by id, and is
  // valued at the distance of the access that will read it again, at stream position `reuse_at`.
  // Kept by the manager; here so they live and die with the stream.
  struct KeptBlock {
    uint64_t block_id = 0;
    uint64_t reuse_at = 0;
    HintSource source = HintSource::kManual;  // of the access that read it (for its accuracy)
  };
  using BlockKeyPair = std::pair<uint64_t, uint64_t>;  // (ino, block)
  struct BlockHash {
    size_t operator()(const BlockKeyPair& k) const {
      const uint64_t h = k.first * 0x9E3779B97F4A7C15ull ^ (k.second + 0x632BE59BD9B4E019ull);
      return static_cast<size_t>((h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ull);
    }
  };
  std::unordered_map<BlockKeyPair, KeptBlock, BlockHash> kept;
  std::set<std::pair<uint64_t, BlockKeyPair>> kept_by_reuse;  // (reuse_at, key), furthest last

 private:
  void PopFront(bool consumed, StreamRelease* release);
  // Consumes the accesses from `index` on that [offset, end) of `ino` overlaps (at least the one
  // at `index`, which it must overlap).
  void ConsumeFrom(size_t index, uint64_t ino, uint64_t offset, uint64_t end, int64_t now_ns,
                   StreamRelease* release);
  // Removes access `index` as consumed.
  void ConsumeAt(size_t index, StreamRelease* release);
  bool IsReread(uint64_t ino, uint64_t offset, uint64_t end) const;
  template <typename Pred>
  void DropIf(Pred pred, StreamRelease* release);
  void Account(const HintedAccess& a, int sign);
  void AddOutstanding(HintSource source, int64_t bytes);
  static uint64_t BlocksOf(const HintSegment& s, uint32_t block_size);
  // The indexes behind HoldsBlock, kept with accesses_ and pending_.
  void IndexAccess(const HintedAccess& a, int sign) const;
  void IndexSegment(uint64_t ino, uint64_t offset, uint64_t end, int sign) const;
  void RebuildIndexes() const;

  const uint64_t id_;
  const uint32_t owner_;
  const uint32_t block_size_;
  const int64_t created_ns_;
  int64_t last_activity_ns_;

  std::deque<HintedAccess> accesses_;
  std::deque<HintSegment> pending_;  // not yet expanded; the front may be partly expanded
  // Expanded accesses per (ino, block): how many of accesses_ name it (BlockHash above).
  // Built by the first HoldsBlock (hence mutable: a stream is used under its manager's lock only).
  mutable bool indexed_ = false;
  mutable std::unordered_map<std::pair<uint64_t, uint64_t>, uint32_t, BlockHash> expanded_blocks_;
  // Per file, the pending segments' unexpanded ranges [offset, end), sorted by offset, and the
  // longest range it has held since it was last empty: a range ending after `b` starts after
  // b - longest, so an overlap query looks at that window only.
  struct PendingIndex {
    std::multiset<std::pair<uint64_t, uint64_t>> ranges;
    uint64_t longest = 0;
  };
  mutable std::unordered_map<uint64_t, PendingIndex> pending_by_ino_;
  HintSegment last_appended_;  // length 0: none (or gone)
  size_t cursor_ = 0;
  uint64_t popped_ = 0;
  uint64_t outstanding_bytes_ = 0;
  std::array<uint64_t, kHintSourceCount> outstanding_by_source_{};
  uint64_t expanded_segment_ends_ = 0;
  uint32_t mismatches_ = 0;
  // The block the last matching read consumed from: re-reading it is neutral.
  bool has_last_ = false;
  uint64_t last_ino_ = 0;
  uint64_t last_block_ = 0;
};

}  // namespace tipfs::cache
