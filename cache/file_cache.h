// FileCache: tipfs's block cache with informed prefetching and caching (TIP, Patterson et al.,
// SOSP 1995; TIP2 for several processes), sequential read-ahead for unhinted reads, and the
// speculation-aware read path of SpecHint (Chang & Gibson, OSDI 1999).
//
// It owns the cached blocks of every file, the hint streams disclosed through the hint ioctls
// (already resolved by fusefs to inode numbers and clipped to end of file), the online estimators
// of the TIP cost-benefit model (cache/tip_model.h) and the prefetches in flight. All disk access
// goes through stripe::StripedIo; all time through a Clock, so tests run it on a FakeClock over
// modelled disks, deterministically.
//
// Data path: Read serves cached blocks and fetches all missing blocks of one request in parallel
// (a block already being fetched is waited for, never fetched twice). Writes go through to the
// disks; cached blocks they cover are patched (or dropped when writes to the file overlap in time)
// and a fetch that raced with a write never inserts its bytes, so no reader sees stale data.
//
// Thread-safety: every method may be called from any thread. Completions arrive on the disks'
// completion thread (or the clock's timer thread, or inline). Locks, in order:
//   mu_                 everything in the cache (blocks, queues, streams, estimators, counters)
//   PendingRead::mu     one waiting reader's latch (taken without mu_)
//   the Clock's mutex   (NowNanos may be called under mu_)
// No lock is held while waiting for I/O or while submitting it, and no caller's callback runs
// under mu_.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "cache/block_table.h"
#include "cache/hint_stream.h"
#include "cache/tip_model.h"
#include "stripe/striped_io.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/status.h"

namespace tipfs::cache {

struct PendingRead;  // a read waiting for fetches (file_cache_internal.h)
struct ReaderState;  // per reading process: timing and read-ahead runs

// Plain options struct (RocksDB style): each field says its default and whether SetOptions may
// change it while mounted.
struct CacheOptions {
  // --cache-size. Changeable (shrinking evicts at once). At least kMinCapacityUnits stripe units.
  uint64_t capacity_bytes = 256ull << 20;
  // 0 = the stripe unit; else a power of two >= 4096 dividing it. Fixed at mount.
  uint32_t block_size = 0;
  // --readahead=on|off: sequential read-ahead for unhinted reads. Changeable.
  bool readahead = true;
  // Read-ahead window cap in blocks (the paper's baseline: 64). Changeable.
  uint32_t max_readahead_blocks = 64;
  // --hints=ignore: hints are validated and counted but nothing is prefetched for them (the
  // overhead baseline of the paper's Figure 4). Changeable; turning it on drops current hints.
  bool hints_ignored = false;
  // Outstanding hinted bytes (disclosed, not yet read or cancelled) one process may have; a hint
  // call that would exceed it fails with EDQUOT and changes nothing. Changeable.
  uint64_t per_process_hint_cap_bytes = 4ull << 30;
  // The same over all processes; exceeding it fails with ENOBUFS. Changeable.
  uint64_t global_hint_cap_bytes = 64ull << 30;
  // Tainted speculative hints (HintSource::kSpeculativeTainted: a speculating child's reads after
  // it read data it did not get) outstanding per process and over all processes. A hint beyond
  // either is trimmed to what fits (or dropped), never refused: a garbage-fed child can keep at
  // most this much of the disks' work queued, and its clean hints are never displaced. 4 MiB is
  // 64 blocks of 64 KiB: four times what 4 disks x max_prefetches_per_disk keep in flight, so a
  // child whose tainted hints are right (grep, tar) still keeps every disk busy. Changeable.
  uint64_t tainted_hint_budget_bytes = 4ull << 20;
  uint64_t global_tainted_hint_budget_bytes = 32ull << 20;
  // Hint segments (the metadata that hints cost) per process (EDQUOT) and in all (ENOBUFS).
  // Bound the daemon's memory for hints to about 64 bytes x global_hint_segment_cap. Changeable.
  uint32_t per_process_hint_segment_cap = 1u << 16;
  uint32_t global_hint_segment_cap = 1u << 20;
  // Prefetches (hinted and read-ahead) in flight per disk, so a demand read never queues behind
  // many of them. Changeable.
  uint32_t max_prefetches_per_disk = 4;
  // Beyond the TIP paper, for arrays: when a reader is faster than the array (its horizon exceeds
  // disks x max_prefetches_per_disk), a disk with no prefetch in flight may fetch hinted blocks
  // past the horizon (up to 256 accesses ahead) into spare buffers only. The reads of one stream
  // fall unevenly on the disks; without this a disk that is locally ahead idles and later stalls
  // the reader. false: exactly the paper's horizon. Changeable.
  bool prefetch_idle_disks = true;
  // T_disk assumed for a disk until its first completion is measured. Fixed at mount.
  int64_t initial_disk_nanos = 5'000'000;
};

// Smallest capacity, in stripe units.
constexpr uint64_t kMinCapacityUnits = 4;

// Who is reading. fusefs fills it from the FUSE request (and the process's speculation attach).
struct ReadContext {
  uint64_t stream = 0;  // the reader's process (tgid): its hint streams and read-ahead state
  uint32_t pid = 0;     // the calling thread (tid)
  // Set for a process attached with TIPFS_IOC_SPEC_ATTACH: its reads become speculative hints for
  // `spec_stream` (epoch `spec_epoch`) and never wait for the disk: cached data is returned,
  // uncached data fails with EAGAIN — unless `wait_for_data`, when the read waits like a normal
  // read. Either way it is never counted as a demand access nor consumes a hint stream, and no
  // byte it did not really read enters the cache.
  bool speculative = false;
  bool wait_for_data = false;
  uint64_t spec_stream = 0;
  uint32_t spec_epoch = 0;
  uint32_t spec_owner = 0;  // the process the hints are charged to (0: spec_stream)
  // A process whose shared streams (ShareStream) this reader's reads consume too. fusefs sets it
  // only when the reader has that process's uid and descends from it (0: none).
  uint32_t shared_owner = 0;
  // kSpeculative until the child has read data it did not get, kSpeculativeTainted after.
  HintSource spec_source = HintSource::kSpeculative;
};

// One hinted range of a file, resolved by fusefs: inode, offset, length clipped to end of file
// (ranges wholly past end of file are dropped before, or are ignored here), and the file's size.
struct HintExtent {
  uint64_t ino = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t file_size = 0;
};

// One hint call: extents in the order they will be read, appended to stream `stream`.
struct HintBatch {
  uint64_t stream = 0;  // resolved: the caller's tgid for TIPFS_STREAM_SELF, else the caller's id
  uint32_t owner = 0;   // the process charged for the hints (caps, CancelProcess)
  HintSource source = HintSource::kManual;
  uint32_t epoch = 0;
  std::vector<HintExtent> extents;
};

// The state of one stream (TIPFS_IOC_QUERY).
struct StreamInfo {
  bool exists = false;
  uint64_t hinted_bytes = 0;       // disclosed and not yet consumed or cancelled
  uint64_t segments_pending = 0;   // segments not yet wholly consumed
  uint64_t blocks_consumed = 0;    // hinted block accesses its reads consumed
  uint64_t blocks_prefetched = 0;  // blocks fetched for its hints
  uint64_t cap_bytes = 0;          // per-process cap on outstanding hinted bytes
  double horizon = 0;              // its prefetch horizon P, in block accesses
};

// A snapshot of the cache's counters and gauges (fusefs renders it as .tipfs/stats text and JSON
// and as Prometheus text in .tipfs/metrics). Counters only grow; gauges are current values.
struct CacheStats {
  // Demand reads: `demand_reads` counts read requests; hits and misses count the blocks they
  // touched: hit = served from memory without waiting; miss = waited for the disk (a new fetch,
  // or `inflight_waits`: joined a fetch already in flight).
  uint64_t demand_reads = 0;
  uint64_t demand_hits = 0;
  uint64_t demand_misses = 0;
  uint64_t inflight_waits = 0;
  uint64_t ghost_hits = 0;   // misses that one more LRU buffer would have turned into hits
  uint64_t stall_nanos = 0;  // time readers waited for the disk for demand data
  // Read-ahead (unhinted sequential reads).
  uint64_t readahead_issued = 0;
  uint64_t readahead_hits = 0;  // first demand read of a read-ahead block
  uint64_t readahead_evicted_unused = 0;
  // Hints (TIP).
  uint64_t hint_calls = 0;
  uint64_t hints_refused = 0;  // calls refused by a cap (EDQUOT / ENOBUFS)
  std::array<uint64_t, kHintSourceCount> bytes_hinted{};     // per source, as disclosed
  std::array<uint64_t, kHintSourceCount> blocks_consumed{};  // hinted accesses read, per source
  std::array<double, kHintSourceCount> accuracy{};           // measured, per source (the discount)
  uint64_t hinted_prefetched = 0;                            // blocks fetched for hints
  uint64_t hinted_used = 0;                                  // of those, read on demand
  uint64_t hinted_evicted_unused = 0;                        // of those, evicted before any read
  uint64_t hinted_cancelled = 0;  // hinted accesses dropped by cancel, epoch or retirement
  uint64_t hinted_skipped = 0;    // hinted accesses passed over by the reader
  uint64_t hinted_ejected = 0;    // hinted blocks given up for a better use (TIP decision)
  uint64_t shared_consumed = 0;   // hinted accesses of a shared stream read by a descendant
  // Tainted speculative hints: bytes trimmed by the budget, and the most ever outstanding.
  uint64_t tainted_trimmed_bytes = 0;
  uint64_t tainted_outstanding_max_bytes = 0;
  uint64_t outstanding_tainted_bytes = 0;  // gauge
  uint64_t warmup_prefetched = 0;
  uint64_t streams_active = 0;
  uint64_t streams_retired = 0;  // stopped matching, or idle
  uint64_t outstanding_hinted_bytes = 0;
  uint64_t expanded_hint_accesses = 0;  // per-block hint metadata held (bounded, see the .cc)
  // Speculative readers.
  uint64_t spec_reads = 0;
  uint64_t spec_hits = 0;
  uint64_t spec_eagain = 0;
  // Writes and evictions.
  uint64_t write_blocks_updated = 0;
  uint64_t write_blocks_dropped = 0;
  uint64_t evictions = 0;
  uint64_t fetch_errors = 0;
  // Buffers (gauges): the LRU part, hinted (held by hints or in flight for them), evict-first,
  // in flight for demand or read-ahead.
  uint64_t capacity_blocks = 0;
  uint64_t block_size = 0;
  uint64_t lru_buffers = 0;
  uint64_t hinted_buffers = 0;
  uint64_t evict_first_buffers = 0;
  uint64_t fetching_buffers = 0;
  // The TIP model's current estimates.
  double prefetch_horizon = 0;  // P of the busiest stream (or of a reader with T_cpu = 0)
  double t_hit_nanos = 0;
  double t_driver_nanos = 0;
  std::vector<double> t_disk_nanos;  // per disk
  double lru_marginal_hit_ratio = 0;
};

class FileCache {
 public:
  // REQUIRES: io and clock outlive the cache. Invalid options are clamped (see ValidateOptions).
  FileCache(stripe::StripedIo* io, Clock* clock, CacheOptions options);
  ~FileCache();  // waits for fetches in flight
  FileCache(const FileCache&) = delete;
  FileCache& operator=(const FileCache&) = delete;

  // EINVAL naming the field when `options` is unusable with this stripe unit.
  static Status ValidateOptions(const CacheOptions& options, uint32_t stripe_unit);

  // Bytes copied into out: min(length, file_size - offset), 0 at/after EOF. Errors: EIO from the
  // disks; EAGAIN for a speculative reader whose data is not cached.
  Result<size_t> Read(const ReadContext& ctx, uint64_t ino, uint64_t offset, size_t length,
                      uint64_t file_size, char* out);
  // The same without blocking: `done` runs exactly once, inline when no disk read is needed,
  // else from a completion. `out` must stay valid until then.
  void ReadAsync(const ReadContext& ctx, uint64_t ino, uint64_t offset, size_t length,
                 uint64_t file_size, char* out, std::function<void(Result<size_t>)> done);

  // Write-through to the disks; cached blocks covering the range are updated (or dropped).
  Status Write(uint64_t ino, uint64_t offset, const char* data, size_t length);
  // Cache and objects follow a size change.
  Status Truncate(uint64_t ino, uint64_t old_size, uint64_t new_size);
  Status Sync(uint64_t ino);
  // Drops the file's cached blocks and hints and removes its objects.
  Status Remove(uint64_t ino);

  // Hints (see tipfs_hint(3)). Appends the extents to the stream (created on first use). EINVAL:
  // unknown source or an extent whose end overflows; EDQUOT: the owner's outstanding hinted bytes
  // or segments would exceed its cap; ENOBUFS: the global cap. On error nothing changes.
  Status Hint(const HintBatch& batch);
  // Drops a stream's hints (all, or one epoch's, or only that epoch's tainted speculative ones).
  // Queued prefetches for them are dropped at once; blocks already fetched for them become the
  // first to evict. OK when there is none.
  Status Cancel(uint64_t stream, std::optional<uint32_t> epoch = std::nullopt,
                bool tainted_only = false);
  // Drops every stream owned by process `owner`.
  void CancelProcess(uint32_t owner);
  // Lets the reads of `owner`'s descendants (ReadContext::shared_owner) consume `owner`'s stream
  // `stream`, in any order (HintStream::MatchAnyOrder), or (`shared` false) stops that. The mark
  // outlives the stream's hints: a stream retired and hinted again is still shared. EDQUOT: the
  // owner shares kMaxSharedPerOwner streams already.
  Status ShareStream(uint64_t stream, uint32_t owner, bool shared);
  // Drops `owner`'s sharing marks and cancels its streams (fusefs: the process exited).
  void ForgetSharer(uint32_t owner);
  StreamInfo QueryStream(uint64_t stream) const;

  // A disk whose reads fail gets no prefetches (hinted, read-ahead, warm-up) until it works
  // again; demand reads still go to it and get its error. Called by the volume's disk health
  // board (stripe/disk_health.h) when that changes.
  void SetDiskReadsFailing(uint32_t disk, bool failing);

  CacheStats Stats() const;
  CacheOptions options() const;
  // Applies the run-time changeable fields; EINVAL (nothing changed) when a fixed field differs.
  Status SetOptions(const CacheOptions& options);

  uint32_t block_size() const { return block_size_; }
  // True when the block is cached (valid or in flight). For tests and diagnostics.
  bool Contains(uint64_t ino, uint64_t block_index) const;

 private:
  struct OwnerState {
    uint64_t bytes = 0;             // outstanding hinted bytes of all its streams
    uint64_t segments = 0;          // and their segments
    uint64_t tainted_bytes = 0;     // of `bytes`, tainted speculative ones
    std::vector<uint64_t> streams;  // ids of its reader streams (matched against its reads)
    std::vector<uint64_t> warmups;  // ids of its warm-up streams
  };
  // How hinted accesses left a stream: read by the hinter, passed over by its reads, cancelled
  // (cancel call, new epoch, retirement), or dropped because their file was removed.
  enum class Release { kConsumed, kDropped, kCancelled, kRemoved };

  // Read path (file_cache.cc).
  std::optional<Result<size_t>> StartRead(const ReadContext& ctx, uint64_t ino, uint64_t offset,
                                          size_t length, uint64_t file_size, char* out,
                                          std::function<void(Result<size_t>)> done,
                                          std::shared_ptr<PendingRead>* pending);
  Result<size_t> FinishPending(PendingRead* read);
  void OnFetchDone(Fetch* fetch, Status status);
  void DrainIssues();
  // All below run with mu_ held.
  // A new block of `ino` read from the disks as far as a file of `file_size` bytes goes.
  Block* NewFetchedBlock(uint64_t ino, uint64_t index, BlockOrigin origin, bool prefetch,
                         uint64_t file_size, int64_t now) REQUIRES(mu_);
  // Bytes of block `index` a read must fetch when the file is `file_size` long: up to the end
  // of file rounded up to 4 KiB, at most a block.
  uint32_t FetchLength(uint64_t index, uint64_t file_size) const REQUIRES(mu_);
  void OnDemandHit(Block* b, int64_t now) REQUIRES(mu_);
  void PlaceUnheld(Block* b) REQUIRES(mu_);
  void EvictBlock(Block* b) REQUIRES(mu_);
  void DetachInFlight(uint64_t ino, uint64_t first, uint64_t last) REQUIRES(mu_);
  void DropBlocks(uint64_t ino, uint64_t first, uint64_t last) REQUIRES(mu_);
  void FoldCpuSamples() REQUIRES(mu_);
  ReaderState* Reader(uint32_t tgid, int64_t now) REQUIRES(mu_);
  uint32_t DiskOf(uint64_t ino, uint64_t index) const REQUIRES(mu_);

  // TIP (tip_manager.cc).
  enum class Purpose { kDemand, kReadahead, kWarmup };
  bool MakeRoom(Purpose purpose, int64_t now) REQUIRES(mu_);
  // `spare_only`: take only a free buffer, an evict-first block or an LRU tail without marginal
  // hits (for prefetches beyond the horizon on idle disks).
  bool MakeRoomForPrefetch(double benefit, const HintStream* requester, int64_t now,
                           bool spare_only) REQUIRES(mu_);
  void RunManager(int64_t now) REQUIRES(mu_);
  size_t NextCandidate(HintStream* s) REQUIRES(mu_);
  void ExpandStream(HintStream* s, size_t count) REQUIRES(mu_);
  uint64_t ExpansionBudget() const REQUIRES(mu_);
  void RunWarmups(int64_t now) REQUIRES(mu_);
  void Hold(HintedAccess* a, Block* b) REQUIRES(mu_);
  void ApplyRelease(HintStream* s, StreamRelease* release, Release dropped_as) REQUIRES(mu_);
  void ReleaseHold(const HintedAccess& a, Release how) REQUIRES(mu_);
  bool MatchStreams(uint32_t tgid, uint64_t ino, uint64_t offset, uint64_t length, int64_t now)
      REQUIRES(mu_);
  // Stream sharing (stream_sharing.cc). The shared streams of the reader itself and of
  // ctx.shared_owner, matched in any order.
  bool MatchSharedStreams(const ReadContext& ctx, uint64_t ino, uint64_t offset, uint64_t length,
                          int64_t now) REQUIRES(mu_);
  bool IsShared(uint64_t stream) const REQUIRES(mu_) {
    return !shared_streams_.empty() && shared_streams_.contains(stream);  // no hash when unused
  }
  void Readahead(ReaderState* reader, uint64_t ino, uint64_t offset, uint64_t length,
                 uint64_t file_size, bool matched, int64_t now) REQUIRES(mu_);
  void HintSpeculativeRead(const ReadContext& ctx, uint64_t ino, uint64_t offset, uint64_t length,
                           uint64_t file_size, int64_t now) REQUIRES(mu_);
  // The part of `segments` (tainted speculative hints of an owner with `owner_tainted` bytes
  // outstanding) that fits the tainted budgets; counts what is trimmed.
  std::vector<HintSegment> TrimToTaintedBudget(uint64_t owner_tainted,
                                               const std::vector<HintSegment>& segments)
      REQUIRES(mu_);
  Status AppendHints(uint64_t stream, uint32_t owner, HintSource source, uint32_t epoch,
                     const std::vector<HintSegment>& segments, int64_t now) REQUIRES(mu_);
  void DeleteStream(uint64_t id, bool warmup, Release how) REQUIRES(mu_);
  void DropInodeHints(uint64_t ino) REQUIRES(mu_);
  void RetireIdleStreams(int64_t now) REQUIRES(mu_);
  double DiskNanos(uint32_t disk) const REQUIRES(mu_);
  double MeanDiskNanos() const REQUIRES(mu_);
  double AppNanos(const HintStream* s) const
      REQUIRES(mu_);  // T_cpu + T_hit + T_driver of its reader
  double AccessRate(const HintStream* s, int64_t now) const
      REQUIRES(mu_);  // accesses per second (TIP2)
  // Whether a stream with this horizon is limited by the disks (prefetch_idle_disks applies).
  bool ArrayIsTheBottleneck(double horizon) const REQUIRES(mu_);
  // *beyond_horizon: the access is past its horizon, valued for an idle disk (see the .cc).
  double Benefit(HintStream* s, size_t index, int64_t now, bool* beyond_horizon) const
      REQUIRES(mu_);
  double LruCostRate(int64_t now) const REQUIRES(mu_);
  struct Ejection {
    HintStream* stream = nullptr;
    size_t index = 0;
    double cost = 0;
  };
  Ejection CheapestEjection(const HintStream* exclude, int64_t now) const REQUIRES(mu_);
  void Eject(const Ejection& e) REQUIRES(mu_);
  template <typename Fn>
  void MutateStream(HintStream* s, Release how, Fn fn) REQUIRES(mu_);
  // The same for callers outside tip_manager.cc, where the template is defined.
  void MutateStreamWith(HintStream* s, Release how, const std::function<void(StreamRelease*)>& fn)
      REQUIRES(mu_);

  // Constant after construction.
  stripe::StripedIo* const io_;
  Clock* const clock_;
  const uint32_t block_size_;
  const uint32_t disk_count_;

  // Protected by mu_. Lock order: mu_ before the Clock's own mutex (NowNanos under mu_); a
  // PendingRead's mu is never taken with mu_ held; mu_ is never held across StripedIo calls,
  // waits, or callers' callbacks.
  mutable Mutex mu_;
  CacheOptions options_ GUARDED_BY(mu_);
  uint64_t capacity_blocks_ GUARDED_BY(mu_);
  BlockTable table_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, std::unique_ptr<HintStream>> streams_
      GUARDED_BY(mu_);  // matched against reads
  std::unordered_map<uint64_t, std::unique_ptr<HintStream>> warmups_
      GUARDED_BY(mu_);  // prefetched in order
  std::unordered_map<uint32_t, OwnerState> owners_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, uint32_t> shared_streams_
      GUARDED_BY(mu_);  // stream id -> owner (ShareStream)
  uint64_t global_hinted_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t global_tainted_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t global_segments_ GUARDED_BY(mu_) = 0;
  // Hinted accesses expanded from segments in all streams (about 80 bytes each): the manager
  // stops expanding beyond ExpansionBudget(), so many streams cannot multiply the metadata.
  uint64_t expanded_accesses_ GUARDED_BY(mu_) = 0;
  std::unordered_map<uint32_t, std::shared_ptr<ReaderState>> readers_ GUARDED_BY(mu_);
  std::vector<DiskServiceEstimator> disk_estimators_ GUARDED_BY(mu_);
  // Prefetches in flight per disk, plus kFailedDiskPrefetches while the disk's reads fail: every
  // prefetch decision compares this with max_prefetches_per_disk, so a failing disk looks full.
  std::vector<uint32_t> disk_prefetches_ GUARDED_BY(mu_);
  std::vector<bool> disk_reads_failing_ GUARDED_BY(mu_);
  static constexpr uint32_t kFailedDiskPrefetches = 1u << 30;
  uint64_t fetches_in_flight_ GUARDED_BY(mu_) = 0;
  uint64_t hinted_in_flight_ GUARDED_BY(mu_) = 0;
  Ewma t_hit_ GUARDED_BY(mu_){0.125, 0};
  Ewma t_driver_ GUARDED_BY(mu_){0.125, 0};
  LruMarginalEstimator lru_marginal_ GUARDED_BY(mu_);
  std::array<AccuracyEstimator, kHintSourceCount> accuracy_ GUARDED_BY(mu_);
  CacheStats counters_ GUARDED_BY(mu_);  // the counter fields; gauges are filled in by Stats()
  std::vector<std::shared_ptr<Fetch>> issue_demand_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Fetch>> issue_prefetch_ GUARDED_BY(mu_);
  int64_t last_idle_check_ns_ GUARDED_BY(mu_) = 0;
  CondVar idle_cv_;  // signalled when fetches_in_flight_ drops to 0

  // Updated without mu_ (folded in under mu_ by FoldCpuSamples).
  std::atomic<uint64_t> stall_nanos_{0};
  std::atomic<int64_t> hit_nanos_sum_{0};
  std::atomic<uint64_t> hit_blocks_sum_{0};
  std::atomic<int64_t> driver_nanos_sum_{0};
  std::atomic<uint64_t> driver_count_{0};
};

}  // namespace tipfs::cache
