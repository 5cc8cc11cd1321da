// FileCache: tipfs's block cache with informed prefetching and caching (TIP, Patterson et al.,
// SOSP 1995; TIP2 for several processes), sequential read-ahead for unhinted reads, and the
// speculation-aware read path of SpecHint (Chang & Gibson, OSDI 1999).
//
// Two halves (docs/DESIGN.md "The cache's two halves: data path and manager"):
//   the data path (this class): the cached blocks of every file, their queues, the buffers and
//     the fetches in flight; reads, writes, truncates, fetch completion. It never runs a TIP
//     decision: it records what it measures (cache/tip_events.h), consumes hints synchronously
//     through TipManager::OnDemandRead, and wakes the manager.
//   the manager (cache/tip_manager.h): hint streams, estimators and every decision. It sees
//     the data path only through CacheBuffers (cache/cache_buffers.h), which this class
//     implements: the block table, its queues, capacity, per-disk room and the buffer
//     operations; its prefetches enter the data path only through IssuePrefetch.
// All disk access goes through stripe::StripedIo; all time through a Clock, so tests run it on a
// FakeClock over modelled disks, deterministically (with CacheOptions::manager_thread = false).
//
// Data path: Read serves cached blocks and fetches all missing blocks of one request in parallel
// (a block already being fetched is waited for, never fetched twice). A read that hits every
// block, by a process no hint names, takes only its blocks' shard mutexes (BlockShards) and
// leaves its queue updates for the next holder of mu_ to apply in order. Writes go through to the
// disks; cached blocks they cover are patched (or dropped when writes to the file overlap in time)
// and a fetch that raced with a write never inserts its bytes, so no reader sees stale data.
//
// Thread-safety: every method may be called from any thread. Completions arrive on the disks'
// completion thread (or the clock's timer thread, or inline). Locks, in order:
//   TipManager::mu_     the manager's state (streams, caps, accuracy); a read takes it only
//                       when its process may own a hint stream (TipManager::MayConsumeHints)
//   mu_                 (CacheBuffers::mu()) the block table, queues, fetch lists, per-disk
//                       prefetch counts, counters
//   a BlockShards shard's mutex   the index entries and hit fields of its blocks (taken inside
//                       mu_ by the writers of those, alone by a hit: cache/block_shards.h)
//   PendingRead::mu     one waiting reader's latch (taken without mu_)
//   TipEvents' locks     leaves: the disk and CPU estimators' mutex (misses, the manager), a
//                       reader's shard by tgid (T_cpu), a thread's shard (LRU events); the
//                       manager's read-ahead shards by tgid are leaves too (TipManager::TrackRun)
//   the Clock's mutex   (NowNanos may be called under mu_)
// The data path never takes TipManager::mu_ while holding mu_. No lock is held while waiting for
// I/O or while submitting it, and no caller's callback runs under mu_.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/block_table.h"
#include "cache/cache_buffers.h"
#include "cache/cache_types.h"
#include "cache/hint_stream.h"
#include "cache/tip_events.h"
#include "cache/tip_model.h"
#include "stripe/striped_io.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/status.h"

namespace tipfs::cache {

struct PendingRead;  // a read waiting for fetches (file_cache_internal.h)
struct ReadPart;     // one block of a read (file_cache_internal.h)
class TipManager;    // the decisions (tip_manager.h)

// Private inheritance: the buffer operations are the manager's (it gets them as a CacheBuffers*),
// not part of the cache's public interface.
class FileCache final : private CacheBuffers {
 public:
  // REQUIRES: io and clock outlive the cache. Invalid options are clamped (see ValidateOptions).
  FileCache(stripe::StripedIo* io, Clock* clock, CacheOptions options);
  ~FileCache();  // waits for fetches in flight
  // Waits until no fetch is in flight (every waiting read has had its callback).
  void WaitForFetches();
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
  // The same, handing out the bytes as references instead of copying them: `done` runs exactly
  // once, inline on a hit, else on the thread that completed the last fetch it waited for.
  void ReadShared(const ReadContext& ctx, uint64_t ino, uint64_t offset, size_t length,
                  uint64_t file_size, std::function<void(Result<ReadData>)> done);

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
  // Every stream, readers' and warm-ups', by id (`tipfs stats --streams`).
  std::vector<StreamSummary> ListStreams() const;

  // A disk whose reads fail gets no prefetches (hinted, read-ahead, warm-up) until it works
  // again; demand reads still go to it and get its error. Called by the volume's disk health
  // board (stripe/disk_health.h) when that changes.
  void SetDiskReadsFailing(uint32_t disk, bool failing);

  // Not const: hits served without mu_ are applied to the counters and queues first.
  CacheStats Stats();
  CacheOptions options() const;
  // Applies the run-time changeable fields; EINVAL (nothing changed) when a fixed field differs.
  Status SetOptions(const CacheOptions& options);

  uint32_t block_size() const { return block_size_; }
  // A block's validity is tracked in granules of this size: 4 KiB, or block_size / 64 for
  // blocks over 256 KiB (the mask has 64 bits), which then is the least a miss fetches.
  uint32_t granule_bytes() const { return granule_bytes_; }
  // True when the block is cached (valid or in flight). For tests and diagnostics.
  bool Contains(uint64_t ino, uint64_t block_index) const;

 private:
  // The public constructor's body, given the block size it chose (the base class needs it twice:
  // for the block size and for the capacity in blocks).
  FileCache(stripe::StripedIo* io, Clock* clock, CacheOptions options, uint32_t block_size);
  // Read path (file_cache.cc).
  // A hit copies into `out`, or (out == nullptr) hands out slices in *shared. A miss returns
  // nullopt with *pending set: the fetches finish it (*done, *shared_done, moved from into the
  // pending read, or the blocking waiter). Callbacks by pointer (null: none) so that a hit, which
  // the caller answers, leaves them where they are instead of copying them.
  std::optional<Result<size_t>> StartRead(const ReadContext& ctx, uint64_t ino, uint64_t offset,
                                          size_t length, uint64_t file_size, char* out,
                                          ReadData* shared,
                                          std::function<void(Result<size_t>)>* done,
                                          std::function<void(Result<ReadData>)>* shared_done,
                                          std::shared_ptr<PendingRead>* pending);
  Result<size_t> FinishPending(PendingRead* read, ReadData* shared);
  // The bytes [lo, hi) of block `index`, from the block's start, that a read of n bytes at
  // `offset` needs.
  std::pair<uint32_t, uint32_t> ReadBytesInBlock(uint64_t index, uint64_t offset, uint64_t n) const;
  // A demand read whose every block holds its bytes, served under the blocks' shard mutexes
  // alone (cache/block_shards.h): pins the blocks into *parts and defers the hits. False, with
  // nothing pinned or counted, when some block lacks bytes the read needs (it then takes mu_).
  bool HitWithoutTableLock(uint64_t ino, uint64_t offset, uint64_t n, std::vector<ReadPart>* parts)
      EXCLUDES(mu_);
  // The end of a read served from memory: copies the pinned *parts into `out` (or hands them out
  // in *shared), records T_hit (`hit_cpu`, when `timed`) and the reader's end.
  Result<size_t> FinishHit(std::vector<ReadPart>* parts, uint64_t first, uint64_t offset,
                           uint64_t n, char* out, ReadData* shared, ReaderTiming* reader,
                           bool timed, int64_t hit_cpu);
  void ApplyDeferredHits() override REQUIRES(mu_);
  void OnFetchDone(Fetch* fetch, Status status);
  // The completion's last step: one fetch fewer in flight.
  void FetchFinished() EXCLUDES(mu_);
  // All below run with mu_ held.
  // Why a block's fetch goes to disk (for the disk's statistics and the timeline).
  static stripe::DiskRequest::Purpose PurposeOf(const Block& block);
  // A new block of `ino` read from the disks as far as a file of `file_size` bytes goes: whole
  // (prefetch) or its granules [lo, hi) (bytes from the block's start, granule-aligned).
  Block* NewFetchedBlock(uint64_t ino, uint64_t index, BlockOrigin origin, bool prefetch,
                         uint64_t file_size, int64_t now, uint32_t lo = 0, uint32_t hi = UINT32_MAX)
      REQUIRES(mu_);
  // A fetch of bytes [lo, hi) of block `index` (granule-aligned) as far as the file goes, into
  // `buffer` (a new one when null), queued for submission. Attached to no block.
  std::shared_ptr<Fetch> NewFetch(uint64_t ino, uint64_t index, bool prefetch, uint64_t file_size,
                                  int64_t now, uint32_t lo, uint32_t hi,
                                  std::shared_ptr<BlockBuffer> buffer) REQUIRES(mu_);
  // A reader's pin on a buffer (cache/block_buffer.h): taken only here, under mu_ or (a hit)
  // under the block's shard mutex, which is what lets a writer holding both trust an unpinned
  // count.
  BufferPin Pin(const std::shared_ptr<BlockBuffer>& buffer) const;
  // A read's part that waits for `fetch`, pinning the buffer it fills.
  ReadPart JoinFetch(std::shared_ptr<Fetch> fetch) const REQUIRES(mu_);
  // What a demand read of bytes [lo, hi) of block b (null: absent) must wait for: the block
  // itself (valid), its fetch, or a fetch started here. Counts the miss.
  ReadPart DemandPart(const ReadContext& ctx, uint64_t ino, uint64_t index, Block* b, uint32_t lo,
                      uint32_t hi, uint64_t file_size, int64_t now, LruEvents* lru) REQUIRES(mu_);
  // Bytes [lo, hi) of a block rounded out to min_read (aligned to itself), within the block.
  std::pair<uint32_t, uint32_t> RoundToMinRead(uint32_t lo, uint32_t hi) const REQUIRES(mu_);
  // Fetches the granules of bytes [lo, hi) (rounded to min_read) that block b lacks: into b's own
  // buffer when they are one run, else as one span into a copy that replaces it at completion.
  // REQUIRES: b holds data, no fetch fills it, and it lacks some of them.
  std::shared_ptr<Fetch> FetchMissing(Block* b, uint32_t lo, uint32_t hi, bool prefetch,
                                      uint64_t file_size, int64_t now) REQUIRES(mu_);
  // True when b's fetch in flight brings every granule of `needed` that b lacks.
  bool FetchBrings(const Block& b, uint64_t needed) const REQUIRES(mu_);
  // Granules (bits) covering bytes [lo, hi) of a block.
  uint64_t GranuleMask(uint64_t lo, uint64_t hi) const;
  // True when bytes [lo, hi) of the block are in memory (its valid granules, or its tail).
  // REQUIRES: mu_ or b's shard mutex (the fields it reads change only under both).
  bool Holds(const Block& b, uint32_t lo, uint32_t hi) const;
  // Drops b's tail mark (bytes valid from a missing granule's start) once that granule is valid.
  void ForgetCoveredTail(Block* b) const REQUIRES(mu_);
  void OnDemandHit(Block* b, LruEvents* lru) REQUIRES(mu_);
  // Sets b's hit fields from a completed fetch (its buffer, the granules it made valid), under
  // b's shard mutex too.
  void FillFromFetch(Block* b, const Fetch& fetch) REQUIRES(mu_);
  void DetachInFlight(uint64_t ino, uint64_t first, uint64_t last) REQUIRES(mu_);
  void DropBlocks(uint64_t ino, uint64_t first, uint64_t last) REQUIRES(mu_);

  // CacheBuffers' two operations that need the data path's fetches (cache_buffers.h).
  Block* IssuePrefetch(uint64_t ino, uint64_t block_index, Purpose purpose, uint64_t file_size,
                       int64_t now, uint32_t lo, uint32_t hi) override REQUIRES(mu_);
  Fill PrefetchMissing(Block* b, uint32_t lo, uint32_t hi, uint64_t file_size, int64_t now) override
      REQUIRES(mu_);
  void DrainIssues() override EXCLUDES(mu_);
  // Moves the queued fetches to this thread's list for SubmitTakenIssues, unless this thread is
  // submitting already (its loop takes them) or none is queued; true when it took some.
  bool TakeIssuesLocked() REQUIRES(mu_);
  // Submits what TakeIssuesLocked took, then whatever completions inline on this thread queued.
  void SubmitTakenIssues() EXCLUDES(mu_);

  // Constant after construction (the block size, the disk count and the layout are
  // CacheBuffers').
  stripe::StripedIo* const io_;
  Clock* const clock_;
  const uint32_t granule_bytes_;

  // Protected by mu_ (CacheBuffers' lock, which also guards the block table, the capacity, the
  // per-disk prefetch counts and the data path's counters).
  CacheOptions options_ GUARDED_BY(mu_);
  std::vector<bool> disk_reads_failing_ GUARDED_BY(mu_);
  static constexpr uint32_t kFailedDiskPrefetches = 1u << 30;
  std::vector<std::shared_ptr<Fetch>> issue_demand_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Fetch>> issue_prefetch_ GUARDED_BY(mu_);
  CondVar idle_cv_;  // signalled when fetches_in_flight_ drops to 0

  // Updated without mu_.
  std::atomic<uint64_t> stall_nanos_{0};
  // Fetches not yet completed. Raised under mu_; lowered without it, but the last one (to 0)
  // under mu_ with idle_cv_'s signal, so WaitForFetches (and the destructor) cannot return
  // while a completion still touches the cache (FileCache::FetchFinished).
  std::atomic<uint64_t> fetches_in_flight_{0};
  // True while the issue lists above may hold fetches: set under mu_ when one is queued, cleared
  // under mu_ by the drain that takes them. DrainIssues reads it first, so a read that queued
  // nothing (every hit) does not take mu_ a second time. Every thread that queues a fetch drains
  // after it, so a load that misses a concurrent queueing leaves that fetch to its own thread.
  std::atomic<bool> issues_queued_{false};

  // Last: constructed after, and destroyed (its thread stopped) before, the data path above.
  std::unique_ptr<TipManager> manager_;
};

}  // namespace tipfs::cache
