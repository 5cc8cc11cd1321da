// TipManager's hint streams: the hint entry points, the owners' caps, consumption of hinted
// accesses by reads, cancellation and retirement, and the sequential runs of unhinted readers.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "cache/tip_manager.h"

namespace tipfs::cache {

namespace {

// A stream without matching reads or new hints for this long is retired.
constexpr int64_t kStreamIdleRetireNanos = 60 * kNanosPerSecond;
constexpr size_t kMaxStreamsPerOwner = 64;
constexpr size_t kMaxStreams = 4096;
constexpr size_t kMaxReadaheadReaders = 4096;  // in all; per shard, this / kReadaheadShards

}  // namespace

template <typename Fn>
void TipManager::MutateStream(HintStream* s, Release how, Fn fn) {
  const uint64_t bytes_before = s->outstanding_bytes();
  const uint64_t tainted_before = s->outstanding_bytes(HintSource::kSpeculativeTainted);
  const uint64_t segments_before = s->segments();
  const uint64_t expanded_before = s->expanded();
  StreamRelease release;
  fn(&release);
  expanded_accesses_ = expanded_accesses_ + s->expanded() - expanded_before;
  ApplyRelease(s, &release, how);
  const uint64_t bytes_gone = bytes_before - s->outstanding_bytes();
  const uint64_t segments_gone = segments_before - s->segments();
  const uint64_t tainted_gone =
      tainted_before - s->outstanding_bytes(HintSource::kSpeculativeTainted);
  global_hinted_bytes_ -= bytes_gone;
  global_segments_ -= segments_gone;
  global_tainted_bytes_ -= tainted_gone;
  auto it = owners_.find(s->owner());
  if (it != owners_.end()) {
    it->second.bytes -= bytes_gone;
    it->second.segments -= segments_gone;
    it->second.tainted_bytes -= tainted_gone;
  }
}

void TipManager::MutateStreamWith(HintStream* s, Release how,
                                  const std::function<void(StreamRelease*)>& fn) {
  MutateStream(s, how, fn);
}

TipManager::OwnerTotals& TipManager::TotalsOf(uint32_t owner) {
  auto totals = owner_totals_.find(owner);
  if (totals != owner_totals_.end()) return totals->second;
  if (owner_totals_.size() >= kMaxOwnerTotals) {  // forget the longest idle owner
    auto oldest = owner_totals_.begin();
    for (auto it = owner_totals_.begin(); it != owner_totals_.end(); ++it) {
      if (it->second.last_ns < oldest->second.last_ns) oldest = it;
    }
    owner_totals_.erase(oldest);
  }
  return owner_totals_.try_emplace(owner).first->second;
}

double TipManager::Accuracy(uint32_t owner, HintSource source) const {
  const size_t i = static_cast<size_t>(source);
  auto totals = owner_totals_.find(owner);
  if (totals == owner_totals_.end()) return accuracy_[i].accuracy();
  return totals->second.accuracy[i].WithPrior(accuracy_[i].accuracy());
}

void TipManager::ApplyRelease(HintStream* s, StreamRelease* release, Release dropped_as) {
  const bool outcomes = !release->consumed.empty() ||
                        (dropped_as != Release::kRemoved && release->dropped_accesses() > 0);
  OwnerTotals* totals = outcomes ? &TotalsOf(s->owner()) : nullptr;
  if (totals != nullptr) totals->last_ns = std::max(totals->last_ns, s->last_activity_ns());
  auto record = [&](HintSource source, bool used, double n) REQUIRES(mu_) {
    const size_t i = static_cast<size_t>(source);
    if (used) {
      accuracy_[i].RecordUsed(n);
      totals->accuracy[i].RecordUsed(n);
    } else {
      accuracy_[i].RecordUnused(n);
      totals->accuracy[i].RecordUnused(n);
    }
  };
  for (const HintedAccess& a : release->consumed) {
    ++totals->consumed[static_cast<size_t>(a.source)];
  }
  if (!release->consumed.empty()) {
    s->consumption.Add(s->last_activity_ns(), static_cast<double>(release->consumed.size()));
  }
  for (const HintedAccess& a : release->consumed) {
    ReleaseHold(a, Release::kConsumed);
    record(a.source, true, 1);
    ++counters_.blocks_consumed[static_cast<size_t>(a.source)];
  }
  bool unexpanded_dropped = false;
  for (uint64_t n : release->unexpanded_dropped) unexpanded_dropped = unexpanded_dropped || n > 0;
  for (const HintedAccess& a : release->dropped) {
    ReleaseHold(a, dropped_as);
    if (dropped_as != Release::kRemoved) {
      record(a.source, a.consumed_any, 1);
    }
    if (dropped_as == Release::kDropped)
      ++counters_.hinted_skipped;
    else
      ++counters_.hinted_cancelled;
  }
  for (size_t source = 0; source < kHintSourceCount; ++source) {
    const uint64_t n = release->unexpanded_dropped[source];
    if (n == 0) continue;
    if (dropped_as != Release::kRemoved) {
      record(static_cast<HintSource>(source), false, static_cast<double>(n));
    }
    counters_.hinted_cancelled += n;
  }
  // Informed caching beyond the window (tip_reuse.cc): what the accesses that left had kept ends;
  // a block just read and disclosed again further on is kept for that reuse.
  ReviewKept(s, *release, unexpanded_dropped);
  for (const HintedAccess& a : release->consumed) KeepForReuse(s, a);
}

Status TipManager::AppendHints(uint64_t stream, uint32_t owner, HintSource source, uint32_t epoch,
                               const std::vector<HintSegment>& segments, int64_t now) {
  const bool warmup = source == HintSource::kWarmup;
  auto& map = warmup ? warmups_ : streams_;
  auto it = map.find(stream);
  const uint32_t charged = it != map.end() ? it->second->owner() : owner;
  auto owner_it = owners_.find(charged);
  const OwnerState empty;
  const OwnerState& o = owner_it != owners_.end() ? owner_it->second : empty;
  std::vector<HintSegment> trimmed;
  if (source == HintSource::kSpeculativeTainted) {
    trimmed = TrimToTaintedBudget(o.tainted_bytes, segments);
    if (trimmed.empty()) return Status::OK();
  }
  const std::vector<HintSegment>& kept =
      source == HintSource::kSpeculativeTainted ? trimmed : segments;
  uint64_t bytes = 0;
  for (const HintSegment& s : kept) bytes += s.length;
  const uint64_t count = kept.size();
  if (o.bytes + bytes > options_.per_process_hint_cap_bytes ||
      o.segments + count > options_.per_process_hint_segment_cap) {
    return Status::FromErrno(
        EDQUOT, "hints would exceed the per-process cap of " +
                    std::to_string(options_.per_process_hint_cap_bytes) + " outstanding bytes / " +
                    std::to_string(options_.per_process_hint_segment_cap) + " segments");
  }
  if (global_hinted_bytes_ + bytes > options_.global_hint_cap_bytes ||
      global_segments_ + count > options_.global_hint_segment_cap) {
    return Status::FromErrno(ENOBUFS, "hints would exceed the mount's cap of " +
                                          std::to_string(options_.global_hint_cap_bytes) +
                                          " outstanding hinted bytes");
  }
  if (it == map.end()) {
    if (o.streams.size() + o.warmups.size() >= kMaxStreamsPerOwner) {
      return Status::FromErrno(EDQUOT, "a process may have at most " +
                                           std::to_string(kMaxStreamsPerOwner) + " hint streams");
    }
    if (streams_.size() + warmups_.size() >= kMaxStreams) {
      return Status::FromErrno(
          ENOBUFS, "the mount has " + std::to_string(kMaxStreams) + " hint streams already");
    }
    it = map.emplace(stream, std::make_unique<HintStream>(stream, charged, block_size_, now)).first;
    auto [created, added] = owners_.try_emplace(charged);
    if (added) OwnerAdded(charged);  // before the hint call returns: its reads take mu_
    (warmup ? created->second.warmups : created->second.streams).push_back(stream);
  }
  HintStream* s = it->second.get();
  for (HintSegment segment : kept) {
    segment.epoch = epoch;
    segment.source = source;
    s->Append(segment);
  }
  s->Touch(now);
  OwnerState& charged_state = owners_[charged];
  charged_state.bytes += bytes;
  charged_state.segments += count;
  global_hinted_bytes_ += bytes;
  global_segments_ += count;
  if (source == HintSource::kSpeculativeTainted) {
    charged_state.tainted_bytes += bytes;
    global_tainted_bytes_ += bytes;
    counters_.tainted_outstanding_max_bytes =
        std::max(counters_.tainted_outstanding_max_bytes, charged_state.tainted_bytes);
  }
  PublishWork();
  return Status::OK();
}

std::vector<HintSegment> TipManager::TrimToTaintedBudget(uint64_t owner_tainted,
                                                         const std::vector<HintSegment>& segments) {
  const uint64_t owner_room = options_.tainted_hint_budget_bytes > owner_tainted
                                  ? options_.tainted_hint_budget_bytes - owner_tainted
                                  : 0;
  const uint64_t global_room =
      options_.global_tainted_hint_budget_bytes > global_tainted_bytes_
          ? options_.global_tainted_hint_budget_bytes - global_tainted_bytes_
          : 0;
  uint64_t room = std::min(owner_room, global_room);
  std::vector<HintSegment> kept;
  for (HintSegment segment : segments) {
    const uint64_t length = std::min(segment.length, room);
    counters_.tainted_trimmed_bytes += segment.length - length;
    if (length == 0) continue;
    segment.length = length;
    room -= length;
    kept.push_back(segment);
  }
  return kept;
}

void TipManager::DeleteStream(uint64_t id, bool warmup, Release how) {
  auto& map = warmup ? warmups_ : streams_;
  auto it = map.find(id);
  if (it == map.end()) return;
  HintStream* s = it->second.get();
  MutateStream(s, how, [s](StreamRelease* r) { s->CancelAll(r); });
  auto owner_it = owners_.find(s->owner());
  if (owner_it != owners_.end()) {
    std::vector<uint64_t>& ids = warmup ? owner_it->second.warmups : owner_it->second.streams;
    std::erase(ids, id);
    if (owner_it->second.streams.empty() && owner_it->second.warmups.empty()) {
      owners_.erase(owner_it);
      OwnerRemoved(s->owner());
    }
  }
  map.erase(it);
}

HintStream* TipManager::ListedStream(uint64_t id) const {
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    std::fprintf(stderr, "tipfs: INTERNAL ERROR: hint stream %llu is listed but does not exist\n",
                 static_cast<unsigned long long>(id));
    std::abort();
  }
  return it->second.get();
}

const std::vector<uint32_t>& TipManager::ConsumersOf(uint64_t id) const {
  auto it = shared_streams_.find(id);
  if (it == shared_streams_.end()) {
    std::fprintf(stderr, "tipfs: INTERNAL ERROR: hint stream %llu is not shared\n",
                 static_cast<unsigned long long>(id));
    std::abort();
  }
  return it->second.consumers;
}

void TipManager::RetireIdleStreams(int64_t now) {
  std::vector<uint64_t> idle;
  for (const auto& [id, s] : streams_) {
    if (now - s->last_activity_ns() > kStreamIdleRetireNanos) idle.push_back(id);
  }
  for (uint64_t id : idle) {
    DeleteStream(id, /*warmup=*/false, Release::kCancelled);
    ++counters_.streams_retired;
  }
}

// A speculating child's stream is not retired for reads that do not match it: its program judges
// it (libtipspec's on-track check cancels the child's epoch once the program's read is not the
// child's), and the child hints only blocks neither cached nor coming (OnSpeculativeRead), so a
// program on its child's path makes any number of reads no hint names. GNU ld re-reads objects
// still cached from its last pass: 64 such reads retired the stream, cancelling the hints ahead,
// and every stream the child (up to 512 reads ahead) made after that was retired before the
// program reached it, about 30 times a run: 0.89 of the original instead of 0.56
// (bench/spec/README.md, "gcc's bimodal first run"). The child's run-ahead bound and the tainted
// budget cap what such a stream holds; one left behind by a program that died retires when idle.
bool TipManager::HoldsSpeculativeHints(const HintStream& s) {
  return s.outstanding_bytes(HintSource::kSpeculative) > 0 ||
         s.outstanding_bytes(HintSource::kSpeculativeTainted) > 0;
}

bool TipManager::MatchStreams(uint32_t tgid, uint64_t ino, uint64_t offset, uint64_t length,
                              int64_t now) {
  auto owner_it = owners_.find(tgid);
  if (owner_it == owners_.end()) return false;
  bool matched = false;
  std::vector<uint64_t> retire;
  for (uint64_t id : owner_it->second.streams) {
    if (IsShared(id)) continue;  // MatchSharedStreams (stream_sharing.cc)
    HintStream* s = ListedStream(id);
    HintStream::MatchResult result = HintStream::MatchResult::kMismatch;
    MutateStream(s, Release::kDropped,
                 [&](StreamRelease* r) { result = s->Match(ino, offset, length, now, r); });
    if (result != HintStream::MatchResult::kMismatch) {
      matched = true;
      break;
    }
    if (s->retire_due() && !HoldsSpeculativeHints(*s)) retire.push_back(id);
  }
  for (uint64_t id : retire) {
    DeleteStream(id, /*warmup=*/false, Release::kCancelled);
    ++counters_.streams_retired;
  }
  return matched;
}

void TipManager::TrackRun(uint32_t tgid, uint64_t ino, uint64_t offset, uint64_t length,
                          uint64_t file_size, bool matched, int64_t now) {
  const size_t shard_index = tgid % kReadaheadShards;
  ReadaheadShard& shard = readahead_shards_[shard_index];
  bool wanted = false;
  {
    MutexLock lock(&shard.mu);
    auto& readers = shard.readers;
    if (readers.size() >= kMaxReadaheadReaders / kReadaheadShards &&
        readers.find(tgid) == readers.end()) {
      auto oldest = readers.begin();
      for (auto r = readers.begin(); r != readers.end(); ++r) {
        if (r->second.last_ns < oldest->second.last_ns) oldest = r;
      }
      readers.erase(oldest);
    }
    ReadaheadState& reader = readers[tgid];
    reader.last_ns = now;
    ReadaheadState::Run* run = nullptr;
    for (size_t i = 0; i < reader.run_count; ++i) {
      if (reader.runs[i].ino == ino) run = &reader.runs[i];
    }
    const uint64_t end = offset + length;
    const bool sequential =
        run != nullptr && offset >= run->last_block * block_size_ && offset <= run->next_offset;
    if (run == nullptr) {
      if (reader.run_count < ReadaheadState::kRuns) {
        run = &reader.runs[reader.run_count++];
      } else {
        run =
            &*std::min_element(reader.runs.begin(), reader.runs.end(),
                               [](const auto& a, const auto& b) { return a.used_ns < b.used_ns; });
      }
      *run = ReadaheadState::Run{};
      run->ino = ino;
    }
    if (sequential) {
      if (end > run->next_offset) {
        run->seq_bytes += end - run->next_offset;
        run->next_offset = end;
      }
    } else {
      // A run starts at offset 0 (a file read from its start) or with the second contiguous read.
      run->seq_bytes = offset == 0 ? length : 0;
      run->ra_next = 0;
      run->next_offset = end;
      run->serial = ++shard.next_serial;  // a new run: what the manager issued for the old is
                                          // not its
    }
    run->last_block = (run->next_offset - 1) / block_size_;
    run->used_ns = now;
    run->file_size = file_size;
    ++run->version;
    // Hinted reads are prefetched by their hints; the next round issues the window for the
    // others.
    run->wanted = !matched && readahead_enabled_.load(std::memory_order_relaxed) &&
                  run->seq_bytes >= block_size_;
    wanted = run->wanted;
  }
  // After the shard's lock, so that RunReadahead, which clears the bit before it reads the
  // shard, either saw this run or finds the bit set again. The caller's WakeIfUseful reads it.
  const uint64_t bit = uint64_t{1} << shard_index;
  if (wanted && (readahead_wanted_.load(std::memory_order_relaxed) & bit) == 0) {
    readahead_wanted_.fetch_or(bit);
  }
}

void TipManager::OnDemandRead(const ReadContext& ctx, uint64_t ino, uint64_t offset,
                              uint64_t length, uint64_t file_size, int64_t now) {
  const uint32_t tgid = static_cast<uint32_t>(ctx.stream);
  bool matched = false;
  // Only a process that may have streams (or whose shared_owner may) takes mu_ to consume; the
  // filter is exact for those that have (see owner_filter_), so consumption stays synchronous.
  if (MayConsumeHints(ctx)) {
    MutexLock lock(&mu_);
    if (owners_.find(tgid) != owners_.end() ||
        (ctx.shared_owner != 0 && owners_.find(ctx.shared_owner) != owners_.end())) {
      MutexLock table_lock(buffers_->mu());
      matched = MatchStreams(tgid, ino, offset, length, now) ||
                MatchSharedStreams(ctx, ino, offset, length, now);
    }
  }
  TrackRun(tgid, ino, offset, length, file_size, matched, now);
}

void TipManager::DropInode(uint64_t ino) {
  MutexLock lock(&mu_);
  MutexLock table_lock(buffers_->mu());
  for (auto* map : {&streams_, &warmups_}) {
    for (auto& [id, stream] : *map) {
      HintStream* s = stream.get();
      MutateStream(s, Release::kRemoved, [s, ino](StreamRelease* r) { s->RemoveInode(ino, r); });
    }
  }
}

void TipManager::RunWarmups(int64_t now) {
  std::vector<uint64_t> finished;
  for (auto& [id, stream] : warmups_) {
    HintStream* w = stream.get();
    while (true) {
      MutateStream(w, Release::kConsumed, [w](StreamRelease* r) { w->PopDoneFront(r); });
      w->AdvanceCursor();
      ExpandStream(w, w->cursor() + 1);
      if (w->cursor() >= w->expanded()) break;
      HintedAccess& a = w->at(w->cursor());
      if (a.block * block_size_ < a.file_size && buffers_->FindBlock(a.ino, a.block) == nullptr) {
        // Warm-up is prefetched in the order given, with whatever the LRU queue can spare.
        if (!buffers_->DiskHasRoom(buffers_->DiskOf(a.ino, a.block))) break;
        buffers_->MakeRoomFromUnheld();
        if (buffers_->IssuePrefetch(a.ino, a.block, CacheBuffers::Purpose::kWarmup, a.file_size,
                                    now, 0, block_size_) == nullptr) {
          break;
        }
        ++w->blocks_prefetched;
      }
      a.state = HintedAccess::State::kDone;
    }
    if (w->exhausted()) finished.push_back(id);
  }
  for (uint64_t id : finished) DeleteStream(id, /*warmup=*/true, Release::kConsumed);
}

void TipManager::OnSpeculativeRead(const ReadContext& ctx, uint64_t ino, uint64_t offset,
                                   uint64_t length, uint64_t file_size, int64_t now) {
  MutexLock lock(&mu_);
  // Only what is neither cached nor coming is worth a hint. A child re-reads what it read before
  // (a parser seeks back; a garbage-fed one re-reads the same header), and in kernel data-cache
  // mode the program reads a block from the daemon once, however often it reads it: a hint
  // repeated is one its reads never consume, holding buffers and the tainted budget.
  const uint64_t end = offset + length;
  uint64_t start = offset;
  {
    MutexLock table_lock(buffers_->mu());
    while (start < end) {
      const uint64_t index = start / block_size_;
      if (buffers_->FindBlock(ino, index) == nullptr) break;
      start = (index + 1) * block_size_;
    }
  }
  auto stream = streams_.find(ctx.spec_stream);
  if (start < end && stream != streams_.end() &&
      stream->second->LastAppendedCovers(ino, start, end - start)) {
    start = end;  // the same read again before its hint was fetched
  }
  // Named streams (ids from 2^32 up) carry their process in the high half, as fusefs makes them.
  const uint32_t owner = ctx.spec_owner != 0          ? ctx.spec_owner
                         : ctx.spec_stream >> 32 != 0 ? static_cast<uint32_t>(ctx.spec_stream >> 32)
                                                      : static_cast<uint32_t>(ctx.spec_stream);
  if (start < end) {
    start = FirstBlockHeldElsewhere(owner, ctx.spec_stream, ino, start, end, /*held=*/false);
  }
  counters_.spec_redundant_bytes += std::min(start, end) - offset;
  if (start >= end) return;
  counters_.bytes_hinted[static_cast<size_t>(ctx.spec_source)] += end - start;
  if (options_.hints_ignored) return;
  HintSegment segment{ino, start, end - start, file_size, ctx.spec_epoch, ctx.spec_source};
  if (!AppendHints(ctx.spec_stream, owner, ctx.spec_source, ctx.spec_epoch, {segment}, now).ok()) {
    ++counters_.hints_refused;
  }
}

uint64_t TipManager::FirstBlockHeldElsewhere(uint32_t owner, uint64_t except, uint64_t ino,
                                             uint64_t start, uint64_t end, bool held) const {
  auto owner_it = owners_.find(owner);
  if (owner_it == owners_.end() || owner_it->second.streams.empty() ||
      (owner_it->second.streams.size() == 1 && owner_it->second.streams[0] == except)) {
    return held ? end : start;  // no other stream
  }
  while (start < end) {
    const uint64_t block = start / block_size_;
    bool found = false;
    for (uint64_t id : owner_it->second.streams) {
      if (id == except) continue;
      auto other = streams_.find(id);
      if (other != streams_.end() && other->second->HoldsBlock(ino, block)) {
        found = true;
        break;
      }
    }
    if (found == held) return std::max(start, block * block_size_);
    start = (block + 1) * block_size_;
  }
  return end;
}

// ---- Public hint entry points ------------------------------------------------------------

Status TipManager::Hint(const HintBatch& batch) {
  if (static_cast<size_t>(batch.source) >= kHintSourceCount) {
    return Status::InvalidArgument("unknown hint source " +
                                   std::to_string(static_cast<int>(batch.source)));
  }
  std::vector<HintSegment> segments;
  segments.reserve(batch.extents.size());
  uint64_t bytes = 0;
  for (const HintExtent& e : batch.extents) {
    if (e.offset + e.length < e.offset) {
      return Status::InvalidArgument("hint range at offset " + std::to_string(e.offset) +
                                     " overflows");
    }
  }
  {
    MutexLock lock(&mu_);
    for (const HintExtent& e : batch.extents) {
      if (e.length == 0 || e.offset >= e.file_size) continue;  // clipped to nothing
      const uint64_t end = e.offset + std::min(e.length, e.file_size - e.offset);
      if (batch.source != HintSource::kHistory) {
        segments.push_back(
            HintSegment{e.ino, e.offset, end - e.offset, e.file_size, batch.epoch, batch.source});
        bytes += end - e.offset;
        continue;
      }
      // The last run's reads replayed: what the process's speculating child hinted already is
      // not hinted again; the rest is, in the runs of blocks between.
      for (uint64_t start = e.offset; start < end;) {
        start = FirstBlockHeldElsewhere(batch.owner, batch.stream, e.ino, start, end, false);
        if (start >= end) break;
        const uint64_t stop =
            FirstBlockHeldElsewhere(batch.owner, batch.stream, e.ino, start, end, true);
        segments.push_back(
            HintSegment{e.ino, start, stop - start, e.file_size, batch.epoch, batch.source});
        bytes += stop - start;
        start = stop;
      }
    }
    ++counters_.hint_calls;
    if (!options_.hints_ignored && !segments.empty()) {
      const int64_t now = clock_->NowNanos();
      Status st = AppendHints(batch.stream, batch.owner, batch.source, batch.epoch, segments, now);
      if (!st.ok()) {
        ++counters_.hints_refused;
        return st;
      }
    }
    counters_.bytes_hinted[static_cast<size_t>(batch.source)] += bytes;
  }
  Wake();
  return Status::OK();
}

Status TipManager::Cancel(uint64_t stream, std::optional<uint32_t> epoch, bool tainted_only) {
  {
    MutexLock lock(&mu_);
    MutexLock table_lock(buffers_->mu());
    for (bool warmup : {false, true}) {
      auto& map = warmup ? warmups_ : streams_;
      auto it = map.find(stream);
      if (it == map.end()) continue;
      if (epoch.has_value()) {
        HintStream* s = it->second.get();
        MutateStream(s, Release::kCancelled, [s, &epoch, tainted_only](StreamRelease* r) {
          s->CancelEpoch(*epoch, tainted_only, r);
        });
      } else {
        DeleteStream(stream, warmup, Release::kCancelled);
      }
    }
  }
  Wake();
  return Status::OK();
}

void TipManager::CancelProcess(uint32_t owner) {
  {
    MutexLock lock(&mu_);
    MutexLock table_lock(buffers_->mu());
    auto it = owners_.find(owner);
    if (it != owners_.end()) {
      const std::vector<uint64_t> streams = it->second.streams;
      const std::vector<uint64_t> warmups = it->second.warmups;
      for (uint64_t id : streams) DeleteStream(id, /*warmup=*/false, Release::kCancelled);
      for (uint64_t id : warmups) DeleteStream(id, /*warmup=*/true, Release::kCancelled);
    }
  }
  Wake();
}

StreamInfo TipManager::QueryStream(uint64_t stream) const {
  MutexLock lock(&mu_);
  MutexLock table_lock(buffers_->mu());
  StreamInfo info;
  info.cap_bytes = options_.per_process_hint_cap_bytes;
  // Named streams (ids from 2^32 up) carry their process in the high half.
  const uint32_t owner = static_cast<uint32_t>(stream >> 32 != 0 ? stream >> 32 : stream);
  if (auto totals = owner_totals_.find(owner); totals != owner_totals_.end()) {
    info.owner_consumed = totals->second.consumed;
  }
  for (size_t i = 0; i < kHintSourceCount; ++i) {
    info.owner_accuracy[i] = Accuracy(owner, static_cast<HintSource>(i));
  }
  const HintStream* s = nullptr;
  if (auto it = streams_.find(stream); it != streams_.end()) s = it->second.get();
  if (auto it = warmups_.find(stream); s == nullptr && it != warmups_.end()) s = it->second.get();
  if (s == nullptr) return info;
  info.exists = true;
  info.hinted_bytes = s->outstanding_bytes();
  info.segments_pending = s->segments_pending();
  info.blocks_consumed = s->blocks_consumed;
  info.blocks_prefetched = s->blocks_prefetched;
  info.horizon = std::min(PrefetchHorizon(events_.MeanDiskNanos(), AppNanos(s)),
                          static_cast<double>(buffers_->capacity_blocks()));
  return info;
}

}  // namespace tipfs::cache
