// TipManager: the decision half of the cache (TIP, Patterson et al., SOSP 1995; TIP2, Tomkins,
// Patterson and Gibson, SIGMETRICS 1997). It owns the hint streams, their owners' caps, the
// accuracy of each source, the read-ahead runs of unhinted readers and every decision about
// buffers: which hinted or read-ahead block to prefetch, which buffer to take for it, which
// hinted block to give up. The data path (FileCache) owns blocks, buffers and fetches; it never
// runs a decision. It records what it measures in TipEvents, consumes hints synchronously
// through OnDemandRead, and calls WakeIfUseful(), which is wait-free. The manager sees the data
// path only through CacheBuffers (cache/cache_buffers.h): block lookups, holds, evictions,
// capacity and occupancy, room per disk, IssuePrefetch.
//
// Decisions run on the manager's own thread (CacheOptions::manager_thread), woken by hints,
// cancels, and by reads and completions when a round could decide something; or, for deterministic
// tests on a FakeClock, inline on the thread whose call woke the manager, after that call has
// released the data path's locks. Prefetches leave the manager only through
// CacheBuffers::IssuePrefetch.
//
// Locks, outermost first (docs/DESIGN.md "The cache's two halves"):
//   TipManager::mu_     streams, owners, caps, accuracy, counters. Held for one decision (not a
//                       whole round), for a hint call, or for the O(1)-per-block consumption of
//                       one read by a process that has streams (or whose shared_owner has), so
//                       such a read waits for at most one decision. A read by any other process
//                       does not take it (issue 11): owner_filter_ tells it, without a lock.
//   CacheBuffers::mu()  (FileCache::mu_) the block table; the manager takes it inside mu_,
//                       never the reverse.
//   ReadaheadShard::mu  read-ahead runs of the processes of one shard: a read takes its own
//                       alone; the manager takes each inside the two above, only to copy the
//                       wanted runs out and write back what it issued (never across a decision).
//   TipEvents' locks    leaves (cache/tip_events.h).
// Nothing is locked across a disk submission, a wait or a caller's callback.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/block_table.h"
#include "cache/cache_buffers.h"
#include "cache/cache_types.h"
#include "cache/hint_stream.h"
#include "cache/tip_events.h"
#include "cache/tip_model.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/status.h"

namespace tipfs::cache {

class TipManager {
 public:
  // REQUIRES: buffers and clock outlive the manager. Start() starts the thread (when
  // options.manager_thread); the destructor stops it.
  TipManager(CacheBuffers* buffers, Clock* clock, uint32_t block_size, uint32_t disk_count,
             const CacheOptions& options);
  ~TipManager();
  TipManager(const TipManager&) = delete;
  TipManager& operator=(const TipManager&) = delete;

  void Start();
  void Stop();  // joins the thread; later Wake()s only set the flag

  // ---- Called by the data path ----
  TipEvents* events() { return &events_; }
  // Asks for a round of decisions. Wait-free: an atomic flag, and a futex wake only when the
  // manager sleeps. May be called under any cache lock. For hints, cancels and option changes.
  void Wake();
  // After a read or a completion: wakes the manager only when a round could decide something
  // (docs/DESIGN.md "When the manager runs"): the table is over capacity (a demand miss found
  // every buffer held or in flight), or there is prefetch work (a hint stream, a warm-up, a
  // read-ahead run wanting blocks) and a disk with room for a prefetch
  // (CacheBuffers::AnyDiskHasRoom, read only when there is work) or idle streams due for
  // retirement. `over_capacity` is the table's, read under CacheBuffers::mu(). Wait-free: atomic
  // loads, then Wake(); the caller holds no lock for it.
  void WakeIfUseful(bool over_capacity, int64_t now);
  // In inline mode, runs the rounds that Wake() asked for on this thread (no-op with a thread,
  // and when this thread is already inside a round). REQUIRES: no cache lock held.
  void RunIfInline();
  // A demand read by `tgid` of [offset, offset + length) of `ino`, after the data path looked
  // its blocks up: consumes the hinted accesses it matches (releasing their holds) and feeds the
  // process's read-ahead run. Takes mu_ only when the reader or its shared_owner may own
  // streams (MayOwnStreams). REQUIRES: CacheBuffers::mu() not held.
  void OnDemandRead(const ReadContext& ctx, uint64_t ino, uint64_t offset, uint64_t length,
                    uint64_t file_size, int64_t now);
  // False when neither the reader (ctx.stream) nor the process it shares streams of
  // (ctx.shared_owner) owns a hint stream: its read cannot consume a hint, and FileCache serves
  // its hits without the cache's lock. Wait-free (owner_filter_): exact for hints appended
  // before the read began; may be true for a process that owns none (a filter slot's other
  // tgid owns some).
  bool MayConsumeHints(const ReadContext& ctx) const {
    return MayOwnStreams(static_cast<uint32_t>(ctx.stream)) ||
           (ctx.shared_owner != 0 && MayOwnStreams(ctx.shared_owner));
  }
  // A read by a speculating process: its range becomes a speculative hint.
  void OnSpeculativeRead(const ReadContext& ctx, uint64_t ino, uint64_t offset, uint64_t length,
                         uint64_t file_size, int64_t now);
  // The file is going away: its hinted accesses are dropped. REQUIRES: CacheBuffers::mu() not held.
  void DropInode(uint64_t ino);

  // ---- Public entry points (FileCache forwards) ----
  Status Hint(const HintBatch& batch);
  Status Cancel(uint64_t stream, std::optional<uint32_t> epoch, bool tainted_only);
  void CancelProcess(uint32_t owner);
  Status ShareStream(uint64_t stream, uint32_t owner, bool shared);
  void ForgetSharer(uint32_t owner);
  StreamInfo QueryStream(uint64_t stream) const;
  // Every stream, readers' and warm-ups', by id (cache/stream_listing.cc).
  std::vector<StreamSummary> ListStreams() const;
  // Applies the manager's changeable options; drops every hint when hints become ignored.
  void SetOptions(const CacheOptions& options);
  // Fills the manager's counters and estimates into *stats.
  void FillStats(CacheStats* stats) const;

 private:
  struct OwnerState {
    uint64_t bytes = 0;             // outstanding hinted bytes of all its streams
    uint64_t segments = 0;          // and their segments
    uint64_t tainted_bytes = 0;     // of `bytes`, tainted speculative ones
    std::vector<uint64_t> streams;  // ids of its reader streams (matched against its reads)
    std::vector<uint64_t> warmups;  // ids of its warm-up streams
  };
  // Per reading process: its sequential runs, which drive read-ahead.
  struct ReadaheadState {
    struct Run {
      uint64_t ino = 0;
      uint64_t next_offset = 0;  // where a sequential continuation starts
      uint64_t last_block = 0;   // last block the run read
      uint64_t seq_bytes = 0;    // bytes read sequentially so far
      uint64_t ra_next = 0;      // first block read-ahead has not issued yet
      uint64_t file_size = 0;
      int64_t used_ns = 0;
      bool wanted = false;  // read-ahead has blocks to issue (the next round issues them)
      // For the manager's write-back (RunReadahead decides on a copy, outside the shard's lock):
      // `serial` names the run (new whenever the slot starts one), `version` counts its reads.
      uint64_t serial = 0;
      uint64_t version = 0;
    };
    static constexpr size_t kRuns = 8;
    std::array<Run, kRuns> runs;
    size_t run_count = 0;
    int64_t last_ns = 0;
  };
  // How hinted accesses left a stream: read by the hinter, passed over by its reads, cancelled
  // (cancel call, new epoch, retirement), or dropped because their file was removed.
  enum class Release { kConsumed, kDropped, kCancelled, kRemoved };
  // A hinted block to give up: access `index` of `stream` inside its lookahead window, or
  // (kept) the block `key` that stream keeps for a reuse beyond it (HintStream::kept).
  struct Ejection {
    HintStream* stream = nullptr;
    size_t index = 0;
    double cost = 0;
    bool kept = false;
    HintStream::BlockKeyPair key;
  };

  // The thread and the rounds (tip_manager.cc).
  void ThreadLoop();
  // Publishes whether there is stream work for WakeIfUseful. Called under mu_ wherever work
  // appears (a hint appended) and at the end of every round, so the flag is never false while
  // work waits: a stale true costs one empty round at most. (A read-ahead run wanting blocks
  // sets readahead_wanted_ instead, without mu_.)
  void PublishWork() REQUIRES(mu_);
  void RunRound() EXCLUDES(mu_);
  // One decision: true when it issued or gave up something, so another may follow.
  bool DecideOnce() REQUIRES(mu_, buffers_->mu());

  // All below run with mu_ and CacheBuffers::mu() held, unless said otherwise.
  double AppNanos(const HintStream* s) const
      REQUIRES(mu_, buffers_->mu());  // T_cpu + T_hit + T_driver of its reader
  double AccessRate(const HintStream* s, int64_t now) const
      REQUIRES(mu_, buffers_->mu());  // accesses per second (TIP2)
  // Whether a stream with this horizon is limited by the disks (prefetch_idle_disks applies).
  bool ArrayIsTheBottleneck(double horizon) const REQUIRES(mu_, buffers_->mu());
  // Access `index`'s distance x = index + 1 per fetch queued on `disk`, counting its own:
  // x / (q + 1) (x without queue_aware_horizon). It is due when this is <= P.
  double QueueDistance(size_t index, uint32_t disk) const REQUIRES(mu_, buffers_->mu());
  // *beyond_horizon: the access is past its horizon, valued for an idle disk (see the .cc).
  double Benefit(HintStream* s, size_t index, int64_t now, bool* beyond_horizon) const
      REQUIRES(mu_, buffers_->mu());
  double LruCostRate(int64_t now) const REQUIRES(mu_, buffers_->mu());
  double LruGrowthCostRate(int64_t now) const REQUIRES(mu_, buffers_->mu());
  Ejection CheapestEjection(const HintStream* exclude, int64_t now) const
      REQUIRES(mu_, buffers_->mu());
  void Eject(const Ejection& e) REQUIRES(mu_, buffers_->mu());
  // Informed caching beyond the lookahead window (tip_reuse.cc). After `s` consumed `a`: keeps
  // its block, now held by no hint, when the stream discloses that it reads the block again.
  void KeepForReuse(HintStream* s, const HintedAccess& a) REQUIRES(mu_, buffers_->mu());
  // The stream's window has reached the kept block `b` and holds it (or the block kept is gone):
  // the keeping ends, the window's hold takes its place.
  void HandOverKept(HintStream* s, const HintedAccess& a, const Block* b)
      REQUIRES(mu_, buffers_->mu());
  // Ends the keeping of `key` by `s` (its reuse was read or dropped); the block goes to the
  // evict-first queue when nothing else holds it.
  void ReleaseKept(HintStream* s, const HintStream::BlockKeyPair& key)
      REQUIRES(mu_, buffers_->mu());
  // After accesses of `s` were consumed or dropped: releases what they kept or what is no longer
  // disclosed (`all`: check every kept block, after segments were dropped unexpanded).
  void ReviewKept(HintStream* s, const StreamRelease& release, bool all)
      REQUIRES(mu_, buffers_->mu());
  // The cheapest kept block of any stream to give up, valued as TIP values a hinted block at its
  // distance y: EjectCost(y) x accuracy x the stream's access rate. Drops stale entries.
  Ejection CheapestKept(int64_t now) REQUIRES(mu_, buffers_->mu());
  static Ejection CheapestOf(const Ejection& a, const Ejection& b) {
    return b.cost < a.cost ? b : a;
  }
  // Frees one buffer: the coldest evict-first block, else the LRU's coldest, else the cheapest
  // hinted block of a stream other than `exclude`. False when every buffer is in flight.
  bool FreeOneBuffer(const HintStream* exclude, int64_t now) REQUIRES(mu_, buffers_->mu());
  // `spare_only`: take only a free buffer, an evict-first block or an LRU tail without marginal
  // hits (for prefetches beyond the horizon on idle disks).
  bool MakeRoomForPrefetch(double benefit, const HintStream* requester, int64_t now,
                           bool spare_only) REQUIRES(mu_, buffers_->mu());
  // Gives up buffers until the table is within capacity (a demand read may overshoot).
  void EnforceCapacity(int64_t now) REQUIRES(mu_, buffers_->mu());
  size_t NextCandidate(HintStream* s, int64_t now) REQUIRES(mu_, buffers_->mu());
  void ExpandStream(HintStream* s, size_t count) REQUIRES(mu_, buffers_->mu());
  uint64_t ExpansionBudget() const REQUIRES(mu_, buffers_->mu());
  // The bytes of its block (from the block's start) that access i of s and the accesses right
  // after it naming the same block will read: what a prefetch for them fetches.
  std::pair<uint32_t, uint32_t> BytesInBlock(const HintStream& s, size_t i) const;
  void Hold(HintedAccess* a, Block* b) REQUIRES(mu_, buffers_->mu());
  void ReleaseHold(const HintedAccess& a, Release how) REQUIRES(mu_, buffers_->mu());
  void RunWarmups(int64_t now) REQUIRES(mu_, buffers_->mu());
  // Issues what the wanted read-ahead runs want; keeps a shard's bit of readahead_wanted_ while
  // a run of it still wants blocks. Takes a ReadaheadShard::mu briefly, never across a decision.
  void RunReadahead(int64_t now) REQUIRES(mu_, buffers_->mu());
  // What prefetching block x accesses ahead of reader `tgid`'s sequential run is worth, in the
  // currency of Benefit (0 beyond its horizon).
  double ReadaheadBenefit(uint32_t tgid, uint32_t disk, uint64_t x) const
      REQUIRES(mu_, buffers_->mu());

  // Streams (tip_streams.cc). CacheBuffers::mu() is held too where a stream releases holds
  // (MutateStream and what calls it).
  template <typename Fn>
  void MutateStream(HintStream* s, Release how, Fn fn) REQUIRES(mu_, buffers_->mu());
  // The same for callers outside tip_streams.cc, where the template is defined.
  void MutateStreamWith(HintStream* s, Release how, const std::function<void(StreamRelease*)>& fn)
      REQUIRES(mu_, buffers_->mu());
  void ApplyRelease(HintStream* s, StreamRelease* release, Release dropped_as)
      REQUIRES(mu_, buffers_->mu());
  // The part of `segments` (tainted speculative hints of an owner with `owner_tainted` bytes
  // outstanding) that fits the tainted budgets; counts what is trimmed.
  std::vector<HintSegment> TrimToTaintedBudget(uint64_t owner_tainted,
                                               const std::vector<HintSegment>& segments)
      REQUIRES(mu_);
  Status AppendHints(uint64_t stream, uint32_t owner, HintSource source, uint32_t epoch,
                     const std::vector<HintSegment>& segments, int64_t now) REQUIRES(mu_);
  void DeleteStream(uint64_t id, bool warmup, Release how) REQUIRES(mu_, buffers_->mu());
  void RetireIdleStreams(int64_t now) REQUIRES(mu_, buffers_->mu());
  // The first byte in [start, end) of `ino` whose block some stream of `owner` other than
  // `except` holds outstanding (`held`), or holds not (!`held`); `end` if none. A speculating
  // child and the replay of the last run (history) disclose the same reads, and a read hinted
  // twice is consumed once, the other copy held unused: neither hints what the other holds.
  uint64_t FirstBlockHeldElsewhere(uint32_t owner, uint64_t except, uint64_t ino, uint64_t start,
                                   uint64_t end, bool held) const REQUIRES(mu_);
  bool MatchStreams(uint32_t tgid, uint64_t ino, uint64_t offset, uint64_t length, int64_t now)
      REQUIRES(mu_, buffers_->mu());
  // True while `s` holds a speculating child's hints: reads that do not match do not retire it.
  static bool HoldsSpeculativeHints(const HintStream& s);
  // Stream sharing (stream_sharing.cc). The shared streams of the reader itself and of
  // ctx.shared_owner, matched in any order.
  bool MatchSharedStreams(const ReadContext& ctx, uint64_t ino, uint64_t offset, uint64_t length,
                          int64_t now) REQUIRES(mu_, buffers_->mu());
  bool IsShared(uint64_t stream) const REQUIRES(mu_) {
    return !shared_streams_.empty() && shared_streams_.contains(stream);  // no hash when unused
  }
  // The stream an owner's list names. Holds by construction: AppendHints adds a stream to
  // streams_ and to its owner's list together and DeleteStream drops both together, so a missing
  // one is a broken invariant, not bad input: it aborts naming the id (as BlockTable does) rather
  // than throw into the FUSE guard. One hash lookup, as the .at() it replaces.
  HintStream* ListedStream(uint64_t id) const REQUIRES(mu_);
  // The consumers of a shared stream. REQUIRES: IsShared(id), checked under the same mu_ hold.
  const std::vector<uint32_t>& ConsumersOf(uint64_t id) const REQUIRES(mu_);
  // Feeds the reader's sequential run (read-ahead). Takes only the reader's ReadaheadShard::mu:
  // every demand read comes here, hinted or not, and without mu_.
  void TrackRun(uint32_t tgid, uint64_t ino, uint64_t offset, uint64_t length, uint64_t file_size,
                bool matched, int64_t now) EXCLUDES(mu_);
  // Whether `tgid` may be a key of owners_ (false: certainly not). Wait-free; see owner_filter_.
  bool MayOwnStreams(uint32_t tgid) const {
    return owner_filter_[tgid % kOwnerFilterSlots].load(std::memory_order_acquire) != 0;
  }
  // Called where owners_ gains or loses a key, under mu_ with the change.
  void OwnerAdded(uint32_t tgid) REQUIRES(mu_) {
    owner_filter_[tgid % kOwnerFilterSlots].fetch_add(1, std::memory_order_release);
  }
  void OwnerRemoved(uint32_t tgid) REQUIRES(mu_) {
    owner_filter_[tgid % kOwnerFilterSlots].fetch_sub(1, std::memory_order_release);
  }

  // Constant after construction.
  CacheBuffers* const buffers_;  // the data path, as far as the manager may touch it
  Clock* const clock_;
  const uint32_t block_size_;
  const uint32_t disk_count_;
  TipEvents events_;

  mutable Mutex mu_;
  CacheOptions options_ GUARDED_BY(mu_);  // the manager's view of the options
  std::unordered_map<uint64_t, std::unique_ptr<HintStream>> streams_
      GUARDED_BY(mu_);  // matched against reads
  std::unordered_map<uint64_t, std::unique_ptr<HintStream>> warmups_
      GUARDED_BY(mu_);  // prefetched in order
  std::unordered_map<uint32_t, OwnerState> owners_ GUARDED_BY(mu_);
  // A shared stream's owner (a loader) never reads it: its pace is its consumers' (workers').
  struct SharedStream {
    uint32_t owner = 0;
    std::vector<uint32_t> consumers;  // the processes that consumed from it, at most kMaxConsumers
  };
  static constexpr size_t kMaxConsumers = 64;
  // A stream whose reader has done nothing for longer than this (and 4 of its usual gaps) is
  // valued at the rate its idleness implies, not its last measured rate.
  static constexpr int64_t kIdleGraceNanos = 100 * kNanosPerMilli;
  void NoteConsumer(uint64_t stream, uint32_t reader) REQUIRES(mu_);
  // Per owner: hinted accesses its streams had consumed, by source (StreamInfo::owner_consumed).
  struct OwnerTotals {
    std::array<uint64_t, kHintSourceCount> consumed{};
    // The owner's own accuracy per source, so that one wrong speculator does not discount every
    // other process's hints (issue 16, item 6); it starts from the source's figure (Accuracy).
    std::array<AccuracyEstimator, kHintSourceCount> accuracy;
    int64_t last_ns = 0;
  };
  OwnerTotals& TotalsOf(uint32_t owner) REQUIRES(mu_);
  // The discount of `source`'s hints from `owner`: its own record, with the source's measured
  // accuracy (over every process) as the prior.
  double Accuracy(uint32_t owner, HintSource source) const REQUIRES(mu_);
  static constexpr size_t kMaxOwnerTotals = 4096;
  std::unordered_map<uint32_t, OwnerTotals> owner_totals_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, SharedStream> shared_streams_
      GUARDED_BY(mu_);  // stream id -> owner and consumers (ShareStream)
  // T_app of a shared stream: what one access of the stream costs its consumers together, or
  // nullopt before one of them has a measured pace.
  std::optional<double> SharedAppNanos(const HintStream* s) const REQUIRES(mu_);
  int64_t LastStartNanos(const HintStream* s) const REQUIRES(mu_);
  uint64_t global_hinted_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t global_tainted_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t global_segments_ GUARDED_BY(mu_) = 0;
  // Hinted accesses expanded from segments in all streams (about 80 bytes each): the manager
  // stops expanding beyond ExpansionBudget(), so many streams cannot multiply the metadata.
  uint64_t expanded_accesses_ GUARDED_BY(mu_) = 0;
  std::array<AccuracyEstimator, kHintSourceCount> accuracy_ GUARDED_BY(mu_);
  CacheStats counters_ GUARDED_BY(mu_);  // the fields the manager counts (FillStats copies them)
  int64_t last_idle_check_ns_ GUARDED_BY(mu_) = 0;

  // Read-ahead runs by tgid, sharded so that a read takes a lock only processes with the same
  // tgid % kReadaheadShards share, not mu_, which every read took before (issue 11).
  static constexpr size_t kReadaheadShards = 64;
  struct alignas(64) ReadaheadShard {
    Mutex mu;
    std::unordered_map<uint32_t, ReadaheadState> readers GUARDED_BY(mu);
    uint64_t next_serial GUARDED_BY(mu) = 0;
  };
  std::array<ReadaheadShard, kReadaheadShards> readahead_shards_;
  // A wanted run's copy, for RunReadahead (kept to reuse its memory).
  struct WantedRun {
    uint32_t tgid = 0;
    size_t slot = 0;
    ReadaheadState::Run run;
    uint64_t next = 0;    // the first block not issued after the round
    uint64_t target = 0;  // the last block the window reaches
  };
  std::vector<WantedRun> wanted_runs_ GUARDED_BY(mu_);
  // Bit s: some run of shard s wants blocks (Run::wanted). Set by a read after its shard's lock
  // (TrackRun) or by RunReadahead; a bit is cleared only by RunReadahead before it reads that
  // shard, so it is never clear while a run of the shard waits, and a round reads only the
  // shards whose bit is set. WakeIfUseful reads it beside has_work_.
  std::atomic<uint64_t> readahead_wanted_{0};
  static_assert(kReadaheadShards == 64, "one bit of readahead_wanted_ per shard");
  std::atomic<bool> readahead_enabled_;  // options_.readahead, for TrackRun, which runs without mu_

  // Counts, per slot tgid % kOwnerFilterSlots, the keys of owners_ in it; changed under mu_ with
  // owners_. A demand read whose tgid's slot (and its shared_owner's) is zero owns no stream and
  // skips mu_; otherwise it takes mu_ and looks owners_ up as before. Exact for hinters: the
  // count is raised before the hint call that made the owner returns, so a read that follows it
  // sees it and consumes synchronously; a collision only costs the lock.
  static constexpr size_t kOwnerFilterSlots = 4096;
  std::array<std::atomic<uint32_t>, kOwnerFilterSlots> owner_filter_{};

  // The thread and its wake-up (no lock: see Wake()).
  std::atomic<bool> pending_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> rounds_{0};  // CacheStats::manager_rounds
  // Published under mu_ (PublishWork), read by WakeIfUseful without it: streams or warm-ups
  // exist (read-ahead's work is readahead_wanted_).
  std::atomic<bool> has_work_{false};
  std::atomic<int64_t> retire_due_ns_{std::numeric_limits<int64_t>::max()};
  std::atomic<uint64_t> wakeups_{0};  // CacheStats::manager_wakeups
  const bool threaded_;               // options.manager_thread
  std::thread thread_;
};

}  // namespace tipfs::cache
