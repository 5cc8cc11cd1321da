// FileCache data path: reads (hits, misses, joins of fetches in flight) and fetch completion.
// The granules and the fetches a miss starts are in file_cache_granules.cc; writes, truncate and
// remove in file_cache_write.cc; the TIP manager, hints and read-ahead in tip_manager.cc.
//
// A block read moves through: queued (issue lists, under mu_) -> submitted (StripedIo::ReadAsync,
// outside mu_, batched into one io_uring submit) -> completed (OnFetchDone: kept in the cache
// unless it failed or raced with a writer; waiting reads are finished outside mu_).
#include "cache/file_cache.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>

#include "cache/file_cache_internal.h"
#include "cache/tip_manager.h"
#include "stripe/io_ring.h"
#include "util/mutex.h"
#include "util/perf_context.h"
#include "util/timeline.h"
#include "util/wait_notice.h"

namespace tipfs::cache {

namespace {

bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

uint32_t ChooseBlockSize(const CacheOptions& o, uint32_t unit) {
  const uint32_t b = o.block_size;
  if (b == 0 || b < 4096 || !IsPowerOfTwo(b) || unit % b != 0) return unit;
  return b;
}

uint64_t CapacityBlocks(uint64_t bytes, uint32_t block_size, uint32_t unit) {
  return std::max<uint64_t>(bytes, kMinCapacityUnits * unit) / block_size;
}

}  // namespace

Status CopyParts(std::vector<ReadPart>* parts, uint64_t first_block, uint32_t block_size,
                 uint64_t offset, uint64_t length, char* out, ReadData* shared) {
  const uint64_t end = offset + length;
  for (size_t i = 0; i < parts->size(); ++i) {
    ReadPart& part = (*parts)[i];
    if (part.fetch != nullptr && !part.fetch->status.ok()) return part.fetch->status;
    const uint64_t block_start = (first_block + i) * block_size;
    const uint64_t lo = std::max(offset, block_start);
    const uint64_t hi = std::min(end, block_start + block_size);
    const char* src = part.buffer.bytes() + (lo - block_start);
    if (out != nullptr) {
      std::memcpy(out + (lo - offset), src, hi - lo);
    } else {
      shared->slices.push_back(
          ReadSlice{std::move(part.buffer), src, static_cast<size_t>(hi - lo)});
    }
  }
  if (shared != nullptr) shared->bytes = length;
  return Status::OK();
}

void ReadData::CopyTo(char* out) const {
  for (const ReadSlice& slice : slices) {
    std::memcpy(out, slice.data, slice.length);
    out += slice.length;
  }
}

FileCache::FileCache(stripe::StripedIo* io, Clock* clock, CacheOptions options)
    : FileCache(io, clock, options, ChooseBlockSize(options, io->layout().stripe_unit())) {}

FileCache::FileCache(stripe::StripedIo* io, Clock* clock, CacheOptions options, uint32_t block_size)
    : CacheBuffers(io->layout(), block_size,
                   CapacityBlocks(options.capacity_bytes, block_size, io->layout().stripe_unit()),
                   options.max_prefetches_per_disk),
      io_(io),
      clock_(clock),
      granule_bytes_(GranuleBytesFor(block_size_)),
      options_(options) {
  options_.block_size = block_size_;
  // ValidateOptions refuses other values; in the block's terms, a miss reads at least a granule
  // and at most the block, so the read path uses min_read as it is.
  const uint32_t min_read = IsPowerOfTwo(options_.min_read) ? options_.min_read : 4096;
  options_.min_read = std::clamp(min_read, granule_bytes_, block_size_);
  options_.capacity_bytes = capacity_blocks_ * block_size_;
  disk_reads_failing_.assign(disk_count_, false);
  manager_ = std::make_unique<TipManager>(static_cast<CacheBuffers*>(this), clock_, block_size_,
                                          disk_count_, options_);
  manager_->Start();
}

void FileCache::SetDiskReadsFailing(uint32_t disk, bool failing) {
  MutexLock lock(&mu_);
  if (disk >= disk_count_ || disk_reads_failing_[disk] == failing) return;
  disk_reads_failing_[disk] = failing;
  const auto failed = static_cast<int32_t>(kFailedDiskPrefetches);
  AdjustDiskPrefetches(disk, failing ? failed : -failed);
}

FileCache::~FileCache() {
  manager_->Stop();
  WaitForFetches();
}

void FileCache::WaitForFetches() {
  MutexLock lock(&mu_);
  while (fetches_in_flight_.load(std::memory_order_acquire) != 0) idle_cv_.Wait(&mu_);
}

Status FileCache::ValidateOptions(const CacheOptions& options, uint32_t stripe_unit) {
  const uint32_t b = options.block_size;
  if (b != 0 && (b < 4096 || !IsPowerOfTwo(b) || stripe_unit % b != 0)) {
    return Status::InvalidArgument("cache block size " + std::to_string(b) +
                                   " must be a power of two >= 4096 dividing the stripe unit " +
                                   std::to_string(stripe_unit));
  }
  if (options.capacity_bytes < kMinCapacityUnits * stripe_unit) {
    return Status::InvalidArgument("cache size " + std::to_string(options.capacity_bytes) +
                                   " is below the minimum of " +
                                   std::to_string(kMinCapacityUnits * stripe_unit) + " bytes (" +
                                   std::to_string(kMinCapacityUnits) + " stripe units)");
  }
  if (options.min_read < 4096 || !IsPowerOfTwo(options.min_read)) {
    return Status::InvalidArgument("minimum read " + std::to_string(options.min_read) +
                                   " must be a power of two of at least 4096");
  }
  if (options.max_prefetches_per_disk == 0) {
    return Status::InvalidArgument("max prefetches per disk must be at least 1");
  }
  return Status::OK();
}

bool FileCache::Contains(uint64_t ino, uint64_t block_index) const {
  MutexLock lock(&mu_);
  return table_.Find(ino, block_index) != nullptr;
}

void FileCache::OnDemandHit(Block* b, LruEvents* lru) {
  ++counters_.demand_hits;
  ++lru->accesses;
  if (!b->used && b->origin == BlockOrigin::kReadahead && b->queue != BlockQueue::kNone) {
    // Read once as read-ahead foresaw: like a consumed hinted block (TipManager::ReleaseHold),
    // it goes first, not to the LRU's warm end, where a sequential reader's used-once blocks
    // pushed a re-reader's working set out (TipTest.ReadaheadCompetesWithTheLru). A second hit
    // moves it to the LRU as usual.
    b->used = true;
    ++counters_.readahead_hits;
    b->evict_first = true;
    table_.PushEvictFirst(b);
    return;
  }
  if (b->queue == BlockQueue::kLru) {
    // A hit on the warmest block (a reader reading again what it read last) is a hit an LRU of
    // one buffer would have: it says nothing about the coldest buffer, whose worth the tail hits
    // price. While the queue is shorter than its tail window every block is in the window, so
    // counted, a linker re-reading each object's block while its hints took the other buffers
    // priced the LRU's coldest buffer at up to 0.1 s per second, and the exchange refused its
    // deeper prefetches: 3 reads in flight on 4 disks (bench/spec/README.md, "What bounds ld's
    // second run").
    if (b->in_tail && (b != table_.LruWarmest() || table_.lru_size() == 1)) {
      ++lru->tail_hits;
      ++counters_.lru_tail_hits;
    }
    table_.PushLru(b);
  } else if (b->queue == BlockQueue::kEvictFirst) {
    table_.PushLru(b);
  }
  b->evict_first = false;
  if (!b->used) {
    b->used = true;
    if (b->origin == BlockOrigin::kHinted) ++counters_.hinted_used;
    if (b->origin == BlockOrigin::kReadahead) ++counters_.readahead_hits;
  }
}

Block* FileCache::IssuePrefetch(uint64_t ino, uint64_t block_index, Purpose purpose,
                                uint64_t file_size, int64_t now, uint32_t lo, uint32_t hi) {
  if (table_.size() >= capacity_blocks_ || !DiskHasRoom(DiskOf(ino, block_index))) return nullptr;
  const BlockOrigin origin = purpose == Purpose::kHinted      ? BlockOrigin::kHinted
                             : purpose == Purpose::kReadahead ? BlockOrigin::kReadahead
                                                              : BlockOrigin::kWarmup;
  if (purpose == Purpose::kReadahead) ++counters_.readahead_issued;
  const auto [round_lo, round_hi] = RoundToMinRead(lo, hi);
  return NewFetchedBlock(ino, block_index, origin, /*prefetch=*/true, file_size, now, round_lo,
                         round_hi);
}

std::optional<Result<size_t>> FileCache::StartRead(
    const ReadContext& ctx, uint64_t ino, uint64_t offset, size_t length, uint64_t file_size,
    char* out, ReadData* shared, std::function<void(Result<size_t>)>* done,
    std::function<void(Result<ReadData>)>* shared_done, std::shared_ptr<PendingRead>* pending_out) {
  if (length == 0 || offset >= file_size) return Result<size_t>(size_t{0});
  // Time here is the cache's (Figure 5.9's breakdown); the copy is a nested section.
  PerfSection lookup(Subsystem::kCacheLookup);
  const uint64_t n = std::min<uint64_t>(length, file_size - offset);
  const uint64_t first = offset / block_size_;
  const uint64_t last = (offset + n - 1) / block_size_;
  const int64_t now = clock_->NowNanos();
  // T_hit is CPU time (Patterson 1995: the CPU cost of serving a block from the cache): with
  // wall time a reader preempted on a busy machine looked as costly as a disk access. It is the
  // lookup under the lock and the copy only: not the wait for the lock, the manager's work
  // (hint consumption, its wake-up) nor the submission of fetches queued meanwhile, which made a
  // hit look dearer and the horizon shorter. The thread CPU clock is a system call, so one read
  // in kCpuSampleEvery is timed (the first included).
  thread_local uint32_t cpu_sample = 0;
  const bool timed = ++cpu_sample % kCpuSampleEvery == 1;
  int64_t hit_cpu = 0;
  const bool spec = ctx.speculative;
  TipEvents* events = manager_->events();
  if (spec) manager_->OnSpeculativeRead(ctx, ino, offset, n, file_size, now);
  std::shared_ptr<ReaderTiming> reader;
  if (!spec) reader = events->ReadStarted(static_cast<uint32_t>(ctx.stream), now, last - first + 1);

  // Parts of a read served from memory; reused per thread so a hit allocates nothing.
  thread_local std::vector<ReadPart> scratch;
  scratch.clear();
  // A hit of a reader that no hint names takes no lock of the whole cache: its blocks' shard
  // mutexes only. A hinter's read takes mu_: its hits must reach the queues before its hints
  // are consumed (a consumed block goes first to evict, a hit moves it to the LRU).
  if (!spec && !manager_->MayConsumeHints(ctx)) {
    const int64_t cpu0 = timed ? clock_->ThreadCpuNanos() : 0;
    if (HitWithoutTableLock(ino, offset, n, &scratch)) {
      const int64_t lookup_cpu = timed ? clock_->ThreadCpuNanos() - cpu0 : 0;
      manager_->OnDemandRead(ctx, ino, offset, n, file_size, now);
      manager_->WakeIfUseful(/*over_capacity=*/false, now);
      return FinishHit(&scratch, first, offset, n, out, shared, reader.get(), timed, lookup_cpu);
    }
  }
  std::shared_ptr<PendingRead> pending;
  bool eagain = false;
  LruEvents lru;
  bool over_capacity = false;  // what the manager may have to act on (WakeIfUseful)
  bool took_issues = false;
  {
    MutexLock lock(&mu_);
    const int64_t cpu_locked = timed ? clock_->ThreadCpuNanos() : 0;
    // Hits served meanwhile without mu_ go first: this read's own misses may evict.
    ApplyDeferredHits();
    if (spec) {
      ++counters_.spec_reads;
    } else {
      ++counters_.demand_reads;
    }
    uint32_t waits = 0;
    for (uint64_t index = first; index <= last; ++index) {
      Block* b = table_.Find(ino, index);
      const auto [lo, hi] = ReadBytesInBlock(index, offset, n);
      if (b != nullptr && Holds(*b, lo, hi)) {
        scratch.push_back(ReadPart{Pin(b->data), nullptr});
        if (!spec) OnDemandHit(b, &lru);
        continue;
      }
      if (spec && !ctx.wait_for_data) {
        eagain = true;
        break;
      }
      scratch.push_back(DemandPart(ctx, ino, index, b, lo, hi, file_size, now, &lru));
      ++waits;
    }
    if (eagain) {
      ++counters_.spec_eagain;
    } else if (spec && waits == 0) {
      ++counters_.spec_hits;
    }
    if (!eagain && waits > 0) {
      pending = std::make_shared<PendingRead>();
      pending->out = out;
      pending->offset = offset;
      pending->length = n;
      pending->first_block = first;
      pending->block_size = block_size_;
      pending->start_ns = now;
      pending->demand = !spec;
      pending->reader = reader;
      if (done != nullptr) pending->done = std::move(*done);
      if (shared_done != nullptr) pending->shared_done = std::move(*shared_done);
      pending->parts.assign(std::make_move_iterator(scratch.begin()),
                            std::make_move_iterator(scratch.end()));
      pending->remaining.store(waits, std::memory_order_relaxed);
      for (const ReadPart& part : pending->parts) {
        if (part.fetch != nullptr) part.fetch->waiters.push_back(pending);
      }
    }
    if (timed) hit_cpu = clock_->ThreadCpuNanos() - cpu_locked;
    over_capacity = table_.size() > capacity_blocks_;
    // A miss's fetch goes out below: taken now, it costs no second round of the lock.
    took_issues = TakeIssuesLocked();
  }
  events->RecordLru(now, lru);
  // Consumption is synchronous (the read's hinted accesses are gone before it returns); the
  // decisions it may call for are the manager's.
  if (!spec) manager_->OnDemandRead(ctx, ino, offset, n, file_size, now);
  // After the consumption: a read that published the first work (its read-ahead run now wants
  // blocks) gets its round now, not at the next read. The disks' room is the wake-up's to read.
  manager_->WakeIfUseful(over_capacity, now);
  if (took_issues) {
    SubmitTakenIssues();
  } else {
    DrainIssues();
  }
  if (eagain) {
    scratch.clear();
    manager_->RunIfInline();
    return Result<size_t>(Status::FromErrno(EAGAIN, "speculative read of uncached data"));
  }
  if (pending != nullptr) {
    scratch.clear();
    *pending_out = std::move(pending);
    manager_->RunIfInline();
    return std::nullopt;
  }
  return FinishHit(&scratch, first, offset, n, out, shared, spec ? nullptr : reader.get(),
                   timed && !spec, hit_cpu);
}

Result<size_t> FileCache::FinishHit(std::vector<ReadPart>* parts, uint64_t first, uint64_t offset,
                                    uint64_t n, char* out, ReadData* shared, ReaderTiming* reader,
                                    bool timed, int64_t hit_cpu) {
  Status st;
  {
    // A shared read (ReadShared, every FUSE read) copies nothing here, it only takes references:
    // no section, whose two clock reads were a hit's largest cost after the lookup.
    std::optional<PerfSection> copy;
    if (out != nullptr) copy.emplace(Subsystem::kDataCopy);
    const int64_t cpu_copy = timed ? clock_->ThreadCpuNanos() : 0;
    st = CopyParts(parts, first, block_size_, offset, n, out, shared);
    if (timed) hit_cpu += clock_->ThreadCpuNanos() - cpu_copy;
  }
  const uint64_t blocks = parts->size();
  parts->clear();
  if (timed) manager_->events()->RecordHit(hit_cpu, blocks);
  TipEvents::ReadFinished(reader, clock_->NowNanos());
  manager_->RunIfInline();
  if (!st.ok()) return Result<size_t>(st);
  return Result<size_t>(static_cast<size_t>(n));
}

std::pair<uint32_t, uint32_t> FileCache::ReadBytesInBlock(uint64_t index, uint64_t offset,
                                                          uint64_t n) const {
  const uint64_t block_start = index * block_size_;
  return {static_cast<uint32_t>(std::max(offset, block_start) - block_start),
          static_cast<uint32_t>(std::min<uint64_t>(offset + n - block_start, block_size_))};
}

bool FileCache::HitWithoutTableLock(uint64_t ino, uint64_t offset, uint64_t n,
                                    std::vector<ReadPart>* parts) {
  const uint64_t first = offset / block_size_;
  const uint64_t last = (offset + n - 1) / block_size_;
  thread_local std::vector<DeferredHit> hits;
  hits.clear();
  uint64_t deferred = 0;
  for (uint64_t index = first; index <= last; ++index) {
    const auto [lo, hi] = ReadBytesInBlock(index, offset, n);
    MutexLock shard(shards_.ShardMutex(ino, index));
    const Block* b = shards_.Find(ino, index);
    if (b == nullptr || !Holds(*b, lo, hi)) {
      parts->clear();  // unpins what this read pinned; nothing was counted
      return false;
    }
    parts->push_back(ReadPart{Pin(b->data), nullptr});
    hits.push_back(DeferredHit{0, b->key, b->id, index == last ? 1u : 0u});
    // The read's hits go into the last block's shard, whose mutex is held: a read takes each of
    // its shards' mutexes once.
    if (index == last) deferred = shards_.DeferHits(ino, index, &hits);
  }
  // The queues follow in batches: the thread that finds enough kept applies them if mu_ is free
  // (BP-Wrapper's try-lock), and waits for it only when far too many are kept.
  if (deferred >= kDeferredHitsHardLimit) {
    MutexLock lock(&mu_);
    ApplyDeferredHits();
  } else if (deferred >= kDeferredHitsBatch && mu_.TryLock()) {
    ApplyDeferredHits();
    mu_.Unlock();
  }
  return true;
}

void FileCache::ApplyDeferredHits() {
  if (!shards_.HasDeferredHits()) return;
  thread_local std::vector<DeferredHit> hits;
  hits.clear();
  shards_.TakeDeferredHits(&hits);
  std::sort(hits.begin(), hits.end(),
            [](const DeferredHit& a, const DeferredHit& b) { return a.seq < b.seq; });
  LruEvents lru;
  for (const DeferredHit& hit : hits) {
    counters_.demand_reads += hit.reads;
    Block* b = table_.Find(hit.key.ino, hit.key.index);
    if (b != nullptr && b->id == hit.id) {
      OnDemandHit(b, &lru);
    } else {
      // Written over, truncated or removed since: a hit all the same, which moves nothing.
      ++counters_.demand_hits;
      ++lru.accesses;
    }
  }
  counters_.hits_without_table_lock += hits.size();
  manager_->events()->RecordLru(clock_->NowNanos(), lru);
}

// Why a block is fetched, for the disks' statistics and the timeline.
stripe::DiskRequest::Purpose FileCache::PurposeOf(const Block& block) {
  using Purpose = stripe::DiskRequest::Purpose;
  switch (block.origin) {
    case BlockOrigin::kDemand:
      return Purpose::kDemand;
    case BlockOrigin::kReadahead:
      return Purpose::kReadahead;
    case BlockOrigin::kWarmup:
      return Purpose::kHinted;
    case BlockOrigin::kHinted:
      return block.hint_source == static_cast<uint8_t>(HintSource::kSpeculative) ||
                     block.hint_source == static_cast<uint8_t>(HintSource::kSpeculativeTainted)
                 ? Purpose::kSpeculative
                 : Purpose::kHinted;
  }
  return Purpose::kDemand;
}

Result<size_t> FileCache::FinishPending(PendingRead* read, ReadData* shared) {
  Status st;
  {
    PerfSection copy(Subsystem::kDataCopy);
    st = CopyParts(&read->parts, read->first_block, read->block_size, read->offset, read->length,
                   read->out, shared);
  }
  read->parts.clear();  // releases the pins of a copy (a shared read's slices took theirs)
  if (read->demand) {
    const int64_t end = clock_->NowNanos();
    stall_nanos_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, end - read->start_ns)),
                           std::memory_order_relaxed);
    TimelineRecorder::Global()->Record(
        TimelineEvent{read->start_ns, end, static_cast<uint32_t>(read->length),
                      read->reader != nullptr ? read->reader->tgid : 0, TimelineActivity::kStall});
    TipEvents::ReadFinished(read->reader.get(), end);
  }
  if (!st.ok()) return Result<size_t>(st);
  return Result<size_t>(static_cast<size_t>(read->length));
}

Result<size_t> FileCache::Read(const ReadContext& ctx, uint64_t ino, uint64_t offset, size_t length,
                               uint64_t file_size, char* out) {
  std::shared_ptr<PendingRead> pending;
  std::optional<Result<size_t>> result =
      StartRead(ctx, ino, offset, length, file_size, out, nullptr, nullptr, nullptr, &pending);
  if (result.has_value()) return std::move(*result);
  stripe::IoRing::FlushThisThread();
  {
    PerfSection wait(Subsystem::kDiskWait);
    MutexLock lock(&pending->mu);
    NoticedWait noticed;  // a FUSE ring thread passes its ring on if the disks take long
    while (!pending->complete) noticed.Wait(&pending->cv, &pending->mu);
  }
  return FinishPending(pending.get(), nullptr);
}

void FileCache::ReadAsync(const ReadContext& ctx, uint64_t ino, uint64_t offset, size_t length,
                          uint64_t file_size, char* out, std::function<void(Result<size_t>)> done) {
  std::shared_ptr<PendingRead> pending;
  std::optional<Result<size_t>> result =
      StartRead(ctx, ino, offset, length, file_size, out, nullptr, &done, nullptr, &pending);
  if (result.has_value()) done(std::move(*result));
}

void FileCache::ReadShared(const ReadContext& ctx, uint64_t ino, uint64_t offset, size_t length,
                           uint64_t file_size, std::function<void(Result<ReadData>)> done) {
  std::shared_ptr<PendingRead> pending;
  ReadData data;
  std::optional<Result<size_t>> result =
      StartRead(ctx, ino, offset, length, file_size, nullptr, &data, nullptr, &done, &pending);
  if (!result.has_value()) return;  // the fetches call done
  if (!result->ok()) return done(result->status());
  done(std::move(data));
}

namespace {

// Fetches this thread took from the issue lists and submits (FileCache::TakeIssuesLocked). While
// set, a completion that runs inline and queues more leaves it to the loop already running on
// this thread (SubmitTakenIssues) instead of recursing once per block.
thread_local bool t_draining = false;
thread_local std::vector<std::shared_ptr<Fetch>> t_work;

}  // namespace

bool FileCache::TakeIssuesLocked() {
  if (t_draining || !issues_queued_.load(std::memory_order_relaxed)) return false;
  t_work.swap(issue_demand_);  // demand reads go out first
  t_work.insert(t_work.end(), issue_prefetch_.begin(), issue_prefetch_.end());
  issue_prefetch_.clear();
  issues_queued_.store(false, std::memory_order_relaxed);
  for (std::shared_ptr<Fetch>& f : t_work) {
    if (f->block != nullptr) f->purpose = PurposeOf(*f->block);
  }
  t_draining = true;
  return true;
}

void FileCache::DrainIssues() {
  if (t_draining || !issues_queued_.load(std::memory_order_acquire)) return;
  bool took;
  {
    MutexLock lock(&mu_);
    took = TakeIssuesLocked();
  }
  if (took) SubmitTakenIssues();
}

void FileCache::SubmitTakenIssues() {
  while (true) {
    TipEvents* events = manager_->events();
    std::optional<stripe::IoRing::SubmitBatch> batch;
    batch.emplace();
    uint64_t timed = 0;  // fetches of this batch whose T_driver is sampled
    for (std::shared_ptr<Fetch>& f : t_work) {
      Fetch* raw = f.get();  // `t_work` keeps it alive even when it completes inside ReadAsync
      const int64_t cpu0 = raw->timed ? clock_->ThreadCpuNanos() : 0;
      raw->submit_ns = clock_->NowNanos();
      raw->disk_was_idle = events->RecordSubmit(raw->disk);
      io_->ReadAsync(raw->key.ino, raw->key.index * block_size_ + raw->offset, raw->length,
                     raw->buffer->bytes() + raw->offset,
                     raw->prefetch ? stripe::DiskRequest::Priority::kPrefetch
                                   : stripe::DiskRequest::Priority::kDemand,
                     raw->purpose, [this, raw](Status s) { OnFetchDone(raw, std::move(s)); });
      if (raw->timed) {
        events->RecordDriver(clock_->ThreadCpuNanos() - cpu0, 0);
        ++timed;
      }
    }
    // The batch's submission (the ring's wake-up) is shared by its fetches.
    const int64_t cpu_flush = timed > 0 ? clock_->ThreadCpuNanos() : 0;
    batch.reset();
    if (timed > 0) {
      events->RecordDriver((clock_->ThreadCpuNanos() - cpu_flush) * static_cast<int64_t>(timed) /
                               static_cast<int64_t>(t_work.size()),
                           0);
    }
    t_work.clear();
    // More queued meanwhile by a completion that ran inline on this thread (its own drain
    // returned at once). Other threads drain what they queue themselves.
    t_draining = false;
    if (!issues_queued_.load(std::memory_order_acquire)) return;
    MutexLock lock(&mu_);
    if (!TakeIssuesLocked()) return;
  }
}

void FileCache::OnFetchDone(Fetch* fetch, Status status) {
  const int64_t cpu0 = fetch->timed ? clock_->ThreadCpuNanos() : 0;
  const int64_t now = clock_->NowNanos();
  std::vector<std::shared_ptr<PendingRead>> waiters;
  std::shared_ptr<Fetch> self;
  const bool timed = fetch->timed;
  bool over_capacity = false;
  {
    MutexLock lock(&mu_);
    manager_->events()->RecordFetchDone(fetch->disk, fetch->submit_ns, now, fetch->disk_was_idle,
                                        status.ok());
    if (fetch->prefetch) AdjustDiskPrefetches(fetch->disk, -1);
    fetch->status = status;
    fetch->done = true;
    if (Block* b = fetch->block; b != nullptr) {
      table_.EndFetch(b);
      fetch->block = nullptr;
      const InodeState* inode = table_.FindInode(b->key.ino);
      // Bytes read while a write to the file was in progress, or before one that has since
      // finished, may be older than the disks': they go to the waiting readers (who overlapped
      // the write) but never into the cache.
      const bool keep = status.ok() && inode != nullptr && inode->epoch == fetch->inode_epoch &&
                        inode->writers == 0;
      if (keep) {
        const bool first_fill = b->data == nullptr;
        FillFromFetch(b, *fetch);
        if (first_fill && b->origin == BlockOrigin::kHinted) ++counters_.hinted_prefetched;
        if (first_fill && b->origin == BlockOrigin::kWarmup) ++counters_.warmup_prefetched;
        if (b->hint_refs == 0) PlaceUnheld(b);
      } else {
        if (!status.ok()) ++counters_.fetch_errors;
        table_.Erase(b);
      }
    } else if (!status.ok()) {
      ++counters_.fetch_errors;
    }
    waiters.swap(fetch->waiters);
    self = std::move(fetch->self);
    over_capacity = table_.size() > capacity_blocks_;
  }
  manager_->WakeIfUseful(over_capacity, now);
  // The completion's part of T_driver ends here: what follows is the readers' and the manager's.
  if (timed) manager_->events()->RecordDriver(clock_->ThreadCpuNanos() - cpu0, 1);
  for (const std::shared_ptr<PendingRead>& read : waiters) {
    if (read->remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
    if (read->done) {
      Result<size_t> result = FinishPending(read.get(), nullptr);
      auto done = std::move(read->done);
      done(std::move(result));
    } else if (read->shared_done) {
      ReadData data;
      Result<size_t> result = FinishPending(read.get(), &data);
      auto done = std::move(read->shared_done);
      if (result.ok()) {
        done(std::move(data));
      } else {
        done(result.status());
      }
    } else {
      MutexLock lock(&read->mu);
      read->complete = true;
      read->cv.Signal();
    }
  }
  waiters.clear();
  self.reset();
  manager_->RunIfInline();
  // Last: the destructor may run as soon as the count reaches zero.
  FetchFinished();
}

void FileCache::FetchFinished() {
  // Not the last fetch: nobody waits for this count, and the lock (the hottest of a miss: every
  // read and completion takes it) is not taken a second time per completion.
  uint64_t n = fetches_in_flight_.load(std::memory_order_relaxed);
  while (n > 1) {
    if (fetches_in_flight_.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel)) return;
  }
  // To 0 only under mu_, so a waiter that read the count under mu_ is waiting when signalled,
  // and the cache outlives this call (WaitForFetches returns only after mu_ is released here).
  MutexLock lock(&mu_);
  if (fetches_in_flight_.fetch_sub(1, std::memory_order_acq_rel) == 1) idle_cv_.SignalAll();
}

}  // namespace tipfs::cache

namespace tipfs::cache {

CacheOptions FileCache::options() const {
  MutexLock lock(&mu_);
  return options_;
}

Status FileCache::SetOptions(const CacheOptions& requested) {
  if (requested.block_size != 0 && requested.block_size != block_size_) {
    return Status::InvalidArgument("the cache block size is fixed at mount (" +
                                   std::to_string(block_size_) + ")");
  }
  const uint32_t unit = io_->layout().stripe_unit();
  TIPFS_RETURN_IF_ERROR(ValidateOptions(requested, unit));
  CacheOptions next = requested;
  {
    MutexLock lock(&mu_);
    next.block_size = block_size_;
    next.initial_disk_nanos = options_.initial_disk_nanos;
    next.manager_thread = options_.manager_thread;
    capacity_blocks_ = CapacityBlocks(requested.capacity_bytes, block_size_, unit);
    next.capacity_bytes = capacity_blocks_ * block_size_;
    options_ = next;
    SetMaxPrefetchesPerDisk(next.max_prefetches_per_disk);
    if (table_.tail_window() != TailWindowFor(capacity_blocks_)) {
      table_.SetTailWindow(TailWindowFor(capacity_blocks_));
    }
    // A smaller cache gives up its cheapest unheld buffers at once; the manager gives up held
    // ones (it knows what they are worth).
    while (table_.size() > capacity_blocks_) {
      Block* b = EvictFirstColdest();
      if (b == nullptr) b = LruColdest();
      if (b == nullptr) break;
      EvictBlock(b);
    }
  }
  manager_->SetOptions(next);
  manager_->Wake();
  manager_->RunIfInline();
  return Status::OK();
}

Status FileCache::Hint(const HintBatch& batch) {
  Status st = manager_->Hint(batch);
  manager_->RunIfInline();
  return st;
}

Status FileCache::Cancel(uint64_t stream, std::optional<uint32_t> epoch, bool tainted_only) {
  Status st = manager_->Cancel(stream, epoch, tainted_only);
  manager_->RunIfInline();
  return st;
}

void FileCache::CancelProcess(uint32_t owner) {
  manager_->CancelProcess(owner);
  manager_->RunIfInline();
}

Status FileCache::ShareStream(uint64_t stream, uint32_t owner, bool shared) {
  return manager_->ShareStream(stream, owner, shared);
}

void FileCache::ForgetSharer(uint32_t owner) {
  manager_->ForgetSharer(owner);
  manager_->RunIfInline();
}

StreamInfo FileCache::QueryStream(uint64_t stream) const { return manager_->QueryStream(stream); }

std::vector<StreamSummary> FileCache::ListStreams() const { return manager_->ListStreams(); }

CacheStats FileCache::Stats() {
  CacheStats stats;
  {
    MutexLock lock(&mu_);
    ApplyDeferredHits();  // so the counters and queues include every hit served
    stats = counters_;
    stats.capacity_blocks = capacity_blocks_;
    stats.block_size = block_size_;
    stats.lru_buffers = table_.lru_size();
    stats.evict_first_buffers = table_.evict_first_size();
    // A block on neither queue is held by a hint or in flight. In flight for a hint, or held,
    // it is a hinted buffer; in flight for anything else and unheld, a fetching one. So only
    // the blocks in flight need a look, not the whole cache.
    table_.ForEachInFlight([&stats](const Block& b) {
      if (b.hint_refs == 0 && b.origin != BlockOrigin::kHinted) ++stats.fetching_buffers;
    });
    stats.hinted_buffers =
        table_.size() - stats.lru_buffers - stats.evict_first_buffers - stats.fetching_buffers;
  }
  stats.stall_nanos = stall_nanos_.load(std::memory_order_relaxed);
  manager_->FillStats(&stats);
  return stats;
}

}  // namespace tipfs::cache
