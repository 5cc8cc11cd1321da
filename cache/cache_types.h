// The cache's public value types: its options, who is reading, hint batches and the statistics
// snapshot. Shared by FileCache (the data path) and TipManager (the decisions).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cache/block_buffer.h"
#include "cache/hint_stream.h"

namespace tipfs::cache {

// Plain options struct (RocksDB style): each field says its default and whether SetOptions may
// change it while mounted.
struct CacheOptions {
  // --cache-size. Changeable (shrinking evicts at once). At least kMinCapacityUnits stripe units.
  uint64_t capacity_bytes = 256ull << 20;
  // 0 = the stripe unit; else a power of two >= 4096 dividing it. Fixed at mount.
  uint32_t block_size = 0;
  // --min-read: the least a demand miss fetches, in bytes, aligned to itself: a miss reads the
  // granules its request covers, rounded out to this (a power of two >= 4096; a block or more
  // fetches whole blocks, as before partial blocks). Prefetch, read-ahead and warm-up always
  // fetch whole blocks. Default 4 KiB (a page). Changeable.
  uint32_t min_read = 4096;
  // --readahead=on|off: sequential read-ahead for unhinted reads. Changeable.
  bool readahead = true;
  // Read-ahead window cap in blocks (the paper's baseline: 64). Changeable.
  uint32_t max_readahead_blocks = 64;
  // --hints=ignore: hints are validated and counted but nothing is prefetched for them (the
  // overhead baseline of the paper's Figure 4). Changeable; turning it on drops current hints.
  bool hints_ignored = false;
  // --hints=always: a policy to compare against, not TIP's. Within the horizon a hinted prefetch
  // always gets a buffer (the LRU's coldest first, else another stream's cheapest hinted block)
  // instead of weighing its benefit against what the buffer is worth elsewhere (the simple
  // "always prefetch to depth P" of Cao et al. and of issue 16's comparison). Changeable.
  bool always_prefetch_hinted = false;
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
  // the reader. Only hints from a source at least 90% accurate for their owner, never tainted
  // speculative ones, go beyond (docs/DESIGN.md). false: exactly the paper's horizon. Changeable.
  bool prefetch_idle_disks = true;
  // Beyond the TIP paper, for arrays: the horizon counts the fetches queued ahead on the
  // access's disk. TIP's P = T_disk / T_app assumes no disk congestion (Patterson et al., SOSP
  // 1995, the system model of section 4); on D disks with accesses placed at random, P accesses
  // ahead collide on one disk most of the time (3 on 4 disks: 62 %) and the reader waits behind its
  // own prefetches. With q prefetches queued on its disk a fetch issued now completes after about
  // (q + 1) T_disk and is needed after x T_app, so it must be issued now when x <= (q + 1) P.
  // false: every access uses the paper's horizon x <= P. Changeable.
  bool queue_aware_horizon = true;
  // T_disk assumed for a disk until its first completion is measured. Fixed at mount.
  int64_t initial_disk_nanos = 5'000'000;
  // Where the TIP manager's decisions run: on its own thread, woken by reads and completions
  // (true), or inline at the end of the cache call that asked for them, on the caller's thread
  // (false: deterministic, for tests on a FakeClock). Fixed at mount.
  bool manager_thread = true;
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

// A read's bytes as references into the cache's buffers: FUSE replies straight from them. `keep`
// pins the buffer until the slice is destroyed, so no write changes these bytes meanwhile (a
// write into a pinned buffer patches a copy; cache/block_buffer.h). Move-only.
struct ReadSlice {
  BufferPin keep;
  const char* data = nullptr;
  size_t length = 0;
};
struct ReadData {
  std::vector<ReadSlice> slices;
  size_t bytes = 0;  // min(length, file_size - offset); 0 at/after EOF
  void CopyTo(char* out) const;
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
  // Hinted accesses read from all streams of the stream's owner since its first hint, by source
  // (kept for the last kMaxOwnerTotals owners, streams deleted or not): what the owner's reads
  // really got from hints (libtipspec reports it at exit).
  std::array<uint64_t, kHintSourceCount> owner_consumed{};
  // The discount the manager gives the owner's hints, by source: its own record of used and
  // unused hinted accesses, starting from the source's figure over every process.
  std::array<double, kHintSourceCount> owner_accuracy{};
};

// One hint stream as `tipfs stats --streams` lists it (FileCache::ListStreams).
struct StreamSummary {
  uint64_t id = 0;
  uint32_t owner = 0;   // the process charged for its hints
  bool warmup = false;  // prefetched in order for whoever reads (tipfs hint), not matched
  bool shared = false;  // its owner's descendants consume it too (TIPFS_IOC_SHARE)
  std::array<uint64_t, kHintSourceCount> outstanding_bytes{};  // not yet read, by source
  uint64_t segments_pending = 0;
  uint64_t blocks_consumed = 0;
  uint64_t blocks_prefetched = 0;
  double horizon = 0;  // its prefetch horizon P, in block accesses
};

// A snapshot of the cache's counters and gauges (fusefs renders it as .tipfs/stats text and JSON
// and as Prometheus text in .tipfs/metrics). Counters only grow; gauges are current values.
struct CacheStats {
  // Demand reads: `demand_reads` counts read requests; hits and misses count the blocks they
  // touched: hit = served from memory without waiting; miss = waited for the disk (a new fetch,
  // or `inflight_waits`: joined a fetch already in flight).
  uint64_t demand_reads = 0;
  uint64_t demand_hits = 0;
  // Of the hits, those served under their blocks' shard mutexes without the cache's lock (a
  // reader no hint names; cache/block_shards.h).
  uint64_t hits_without_table_lock = 0;
  uint64_t demand_misses = 0;
  uint64_t inflight_waits = 0;
  // Partially valid blocks (FileCache::DemandPart). Private: demand misses whose granules came
  // in a buffer of their own, not kept in the cache, because another fetch was filling the block.
  // Span: misses of a block whose missing granules were not one run, read as one span (with the
  // valid granules between them) into a copy of the block.
  uint64_t demand_private_fetches = 0;
  uint64_t demand_span_fetches = 0;
  uint64_t ghost_hits = 0;     // misses that one more LRU buffer would have turned into hits
  uint64_t lru_tail_hits = 0;  // hits in the LRU's tail window (the coldest buffers' worth)
  uint64_t stall_nanos = 0;    // time readers waited for the disk for demand data
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
  // Prefetches of the granules a hint names that its block, cached in part, lacked.
  uint64_t hinted_fills = 0;
  // Blocks kept after a read because the reader's hints read them again beyond the lookahead
  // window (informed caching; cache/tip_reuse.cc).
  uint64_t hinted_kept_for_reuse = 0;
  uint64_t shared_consumed = 0;  // hinted accesses of a shared stream read by a descendant
  // Why a round's hinted prefetching stopped (TipManager::DecideOnce found nothing to issue):
  // every disk had its share of prefetches; no stream had an access due on a disk with room;
  // the best was beyond its horizon and hinted buffers left no room for that; the exchange found
  // no buffer worth taking for it. What bounds the depth of a hinted reader's prefetching.
  uint64_t prefetch_stops_disks_full = 0;
  uint64_t prefetch_stops_no_candidate = 0;
  uint64_t prefetch_stops_beyond_horizon = 0;
  uint64_t prefetch_stops_no_buffer = 0;
  // Tainted speculative hints: bytes trimmed by the budget, and the most ever outstanding.
  uint64_t tainted_trimmed_bytes = 0;
  uint64_t tainted_outstanding_max_bytes = 0;
  uint64_t outstanding_tainted_bytes = 0;  // gauge
  uint64_t warmup_prefetched = 0;
  uint64_t streams_active = 0;
  uint64_t streams_retired = 0;  // stopped matching, or idle
  uint64_t outstanding_hinted_bytes = 0;
  uint64_t expanded_hint_accesses = 0;  // per-block hint metadata held (bounded, see the .cc)
  // The TIP manager's rounds of decisions, and the times its thread was woken from sleep for one
  // (a futex wake by the data path or a hint call; 0 with the decisions inline).
  uint64_t manager_rounds = 0;
  uint64_t manager_wakeups = 0;
  // Speculative readers.
  uint64_t spec_reads = 0;
  uint64_t spec_hits = 0;
  uint64_t spec_eagain = 0;
  uint64_t spec_redundant_bytes = 0;  // speculative reads of data cached, coming or just hinted
  // Writes and evictions.
  uint64_t write_blocks_updated = 0;  // cached blocks a write patched (in place or in a copy)
  uint64_t write_blocks_dropped = 0;  // cached blocks dropped: writes to the file overlapped
  // Of the blocks patched: those patched in place (no reader held the buffer), and the bytes
  // copied into new buffers for the others (the block, copied because a reader held it).
  uint64_t write_blocks_patched_in_place = 0;
  uint64_t write_copied_bytes = 0;
  uint64_t evictions = 0;
  uint64_t fetch_errors = 0;
  // Buffers (gauges): the LRU part, hinted (held by hints or in flight for them), evict-first,
  // in flight for anything else (demand, read-ahead, warm-up) and held by no hint.
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
  // Per disk, what its T_disk comes from and what it makes of the busiest stream's horizon: the
  // figures behind a decision (docs/DESIGN.md "Estimators").
  struct DiskEstimate {
    double t_disk_nanos = 0;    // the estimate in use (the same as t_disk_nanos[d])
    double idle_nanos = 0;      // latency of reads that found the disk idle
    double queued_nanos = 0;    // completion gaps of reads that queued behind another
    uint64_t idle_samples = 0;  // reads measured each way
    uint64_t queued_samples = 0;
    uint32_t in_flight = 0;  // the cache's reads on the disk now
    double horizon = 0;      // P = T_disk / T_app on this disk, of the busiest stream
  };
  std::vector<DiskEstimate> disk_estimates;
};

}  // namespace tipfs::cache
