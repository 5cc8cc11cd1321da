// FileCache's TIP manager: hint streams, the cost-benefit buffer allocation, warm-up and
// sequential read-ahead. Everything here runs under FileCache::mu_ (REQUIRES: mu_ held) except
// the public entry points, which take it.
//
// The manager (RunManager) runs after every event that can change a decision: a read, a hint,
// a cancel, a completed fetch. Each round it asks every stream for its next prefetch candidate
// (the first hinted access past its cursor whose block is not cached and whose disk has room
// for another prefetch), values each as TIP does — benefit T_disk/(x(x-1)) of prefetching x
// accesses ahead, discounted by the source's accuracy and weighted by the stream's access rate
// (TIP2) — and takes the best. A free buffer or an evict-first block costs nothing; otherwise it
// is bought from the cheaper of the LRU queue's tail (its marginal hits) and the hinted block of
// another stream needed furthest ahead (its re-fetch cost), and only while benefit > cost.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cache/file_cache.h"
#include "cache/file_cache_internal.h"
#include "util/mutex.h"

namespace tipfs::cache {

namespace {

constexpr int kMaxDecisionsPerRun = 256;
// How far past its cursor a stream looks for an access whose disk has room, so prefetches go to
// every idle disk even when the next access's disk is busy: as far as its horizon (nothing beyond
// has a benefit), at least kMinPrefetchLookahead, at most kMaxPrefetchLookahead. On an array the
// reads of one stream fall unevenly on the disks; a disk that is locally ahead idles unless it
// may fetch further down the stream. (With a fixed 32, hinted random reads on 4 disks kept about
// 35 buffers hinted with a horizon of 80 and lost about 5% of the array's throughput.)
constexpr size_t kMinPrefetchLookahead = 32;
constexpr size_t kMaxPrefetchLookahead = 256;
// Accesses scanned (from the far end of the lookahead window down) for a stream's cheapest held
// block to give up: the whole window and a little below it.
constexpr size_t kEjectScan = kMaxPrefetchLookahead + 64;
// A stream whose reader has done nothing for longer than this (and 4 of its usual gaps) is
// valued at the rate its idleness implies, not its last measured rate.
constexpr int64_t kIdleGraceNanos = 100 * kNanosPerMilli;
// A stream without matching reads or new hints for this long is retired.
constexpr int64_t kStreamIdleRetireNanos = 60 * kNanosPerSecond;
constexpr size_t kMaxStreamsPerOwner = 64;
constexpr size_t kMaxStreams = 4096;
constexpr size_t kNone = std::numeric_limits<size_t>::max();
constexpr double kInfinity = std::numeric_limits<double>::infinity();

}  // namespace

// ---- Estimates ----------------------------------------------------------------------------

double FileCache::DiskNanos(uint32_t disk) const { return disk_estimators_[disk].nanos(); }

double FileCache::MeanDiskNanos() const {
  double sum = 0;
  for (const DiskServiceEstimator& d : disk_estimators_) sum += d.nanos();
  return disk_estimators_.empty() ? 0 : sum / disk_estimators_.size();
}

double FileCache::AppNanos(const HintStream* s) const {
  double t_cpu = 0;
  auto it = readers_.find(s->owner());
  if (it != readers_.end()) t_cpu = it->second->cpu_per_access.value();
  return std::max(kMinAppNanos, t_cpu + t_hit_.value() + t_driver_.value());
}

double FileCache::AccessRate(const HintStream* s, int64_t now) const {
  double interval = AppNanos(s);
  int64_t last = s->last_activity_ns();
  auto it = readers_.find(s->owner());
  const bool measured = it != readers_.end() && it->second->cpu_per_access.has_sample();
  if (it != readers_.end()) last = std::max(last, it->second->last_start_ns);
  // A hinter that has not read yet is valued as a reader that stalls on every block would run
  // (one access per T_disk + T_app): enough to fill free buffers for it, not enough to evict
  // what proven readers hit until its own reads show its pace.
  if (!measured) interval += MeanDiskNanos();
  const double idle = static_cast<double>(std::max<int64_t>(0, now - last));
  const double grace = std::max(static_cast<double>(kIdleGraceNanos), 4 * interval);
  return 1e9 / (idle > grace ? idle : interval);
}

bool FileCache::ArrayIsTheBottleneck(double horizon) const {
  // The reader consumes faster than the array delivers with every disk's prefetch queue full
  // (P > disks x prefetches per disk): every second a disk idles is lost. Below that the reader
  // is the bottleneck, imbalance costs nothing, and an extra fetch beyond the horizon would only
  // delay the next useful one on its disk (measured: 20% more stall for two readers sharing 4
  // buffers with P = 5).
  return options_.prefetch_idle_disks &&
         horizon >= static_cast<double>(disk_count_) * options_.max_prefetches_per_disk;
}

double FileCache::Benefit(HintStream* s, size_t index, int64_t now, bool* beyond_horizon) const {
  const HintedAccess& a = s->at(index);
  const uint32_t disk = DiskOf(a.ino, a.block);
  const double t_disk = DiskNanos(disk);
  const double t_app = AppNanos(s);
  double benefit = PrefetchBenefit(t_disk, t_app, index + 1);
  *beyond_horizon = benefit == 0;
  const double horizon = PrefetchHorizon(t_disk, t_app);
  if (benefit == 0 && disk_prefetches_[disk] == 0 && ArrayIsTheBottleneck(horizon)) {
    // Beyond the horizon, on a disk that would otherwise idle (beyond the paper, for arrays):
    // the reads of one stream fall unevenly on the disks, so a disk that is locally ahead will be
    // the one stalling the reader later. Its idle time costs nothing, only the buffer does, so
    // the access is valued as the deepest useful prefetch, the smallest benefit inside the
    // horizon, and gets only a spare buffer (RunManager): free, evict-first or an LRU tail
    // without hits, and only while hints hold less than half the cache (never another hinted
    // block, nor the last buffers of a small cache: with few buffers that churns, each ejected
    // block is fetched again).
    benefit =
        PrefetchBenefit(t_disk, t_app, static_cast<uint64_t>(std::max(2.0, std::floor(horizon))));
  }
  return benefit * accuracy_[static_cast<size_t>(a.source)].accuracy() * AccessRate(s, now);
}

double FileCache::LruCostRate(int64_t now) const {
  if (table_.lru_size() == 0) return kInfinity;
  // (H(n) - H(n-1)) * (T_miss - T_hit) per LRU access, times LRU accesses per second, is the
  // marginal hits per second times T_driver + T_disk.
  const double hits_per_second =
      lru_marginal_.MarginalHitsPerSecond(now, table_.tail_count(), table_.tail_window());
  return hits_per_second * (t_driver_.value() + MeanDiskNanos());
}

FileCache::Ejection FileCache::CheapestEjection(const HintStream* exclude, int64_t now) const {
  Ejection best;
  best.cost = kInfinity;
  for (const auto& [id, stream] : streams_) {
    HintStream* s = stream.get();
    if (s == exclude) continue;
    const size_t end = std::min(s->expanded(), s->cursor() + kMaxPrefetchLookahead);
    size_t scanned = 0;
    for (size_t i = end; i-- > 0 && scanned < kEjectScan; ++scanned) {
      const HintedAccess& a = s->at(i);
      if (a.state != HintedAccess::State::kHeld) continue;
      const Block* b = table_.Find(a.ino, a.block);
      if (b == nullptr || b->id != a.block_id || !b->valid() || b->hint_refs != 1) continue;
      // The block needed furthest ahead is the stream's cheapest: cost falls with y.
      const double cost = EjectCost(DiskNanos(b->disk), AppNanos(s), t_driver_.value(), i + 1) *
                          accuracy_[static_cast<size_t>(a.source)].accuracy() * AccessRate(s, now);
      if (cost < best.cost) best = Ejection{s, i, cost};
      break;
    }
  }
  return best;
}

// ---- Buffers ------------------------------------------------------------------------------

void FileCache::Hold(HintedAccess* a, Block* b) {
  a->state = HintedAccess::State::kHeld;
  a->block_id = b->id;
  if (b->hint_refs++ == 0) table_.Unqueue(b);
  b->evict_first = false;
}

void FileCache::ReleaseHold(const HintedAccess& a, Release how) {
  if (a.state != HintedAccess::State::kHeld) return;
  Block* b = table_.Find(a.ino, a.block);
  if (b == nullptr || b->id != a.block_id || b->hint_refs == 0) return;
  if (--b->hint_refs > 0) return;
  if (how != Release::kConsumed && b->origin == BlockOrigin::kHinted && !b->used) {
    b->evict_first = true;  // fetched for a hint nobody will read: first in line to go
  }
  if (b->valid()) PlaceUnheld(b);
}

void FileCache::Eject(const Ejection& e) {
  HintedAccess& a = e.stream->at(e.index);
  Block* b = table_.Find(a.ino, a.block);
  a.state = HintedAccess::State::kPending;
  a.block_id = 0;
  e.stream->RewindCursor(e.index);
  ++counters_.hinted_ejected;
  if (b != nullptr && b->hint_refs > 0 && --b->hint_refs == 0) EvictBlock(b);
}

bool FileCache::MakeRoom(Purpose purpose, int64_t now) {
  while (table_.size() >= capacity_blocks_) {
    if (Block* b = table_.EvictFirstColdest(); b != nullptr) {
      EvictBlock(b);
      continue;
    }
    Block* lru = table_.LruColdest();
    if (purpose == Purpose::kDemand) {
      // A demand miss takes the cheapest buffer, hinted or not (TIP §4).
      Ejection e = CheapestEjection(nullptr, now);
      if (e.stream != nullptr && (lru == nullptr || e.cost < LruCostRate(now))) {
        Eject(e);
        continue;
      }
    }
    if (lru == nullptr) return false;  // all in flight or held: a demand read overshoots
    EvictBlock(lru);
  }
  return true;
}

bool FileCache::MakeRoomForPrefetch(double benefit, const HintStream* requester, int64_t now,
                                    bool spare_only) {
  while (table_.size() >= capacity_blocks_) {
    if (Block* b = table_.EvictFirstColdest(); b != nullptr) {
      EvictBlock(b);
      continue;
    }
    const double lru_cost = LruCostRate(now);
    if (spare_only) {
      if (lru_cost > 0) return false;  // LRU tail without hits, or nothing (infinite when empty)
      EvictBlock(table_.LruColdest());
      continue;
    }
    const Ejection e = CheapestEjection(requester, now);
    if (!(benefit > std::min(lru_cost, e.cost))) return false;
    if (e.stream != nullptr && e.cost < lru_cost) {
      Eject(e);
    } else {
      EvictBlock(table_.LruColdest());
    }
  }
  return true;
}

// ---- Streams ------------------------------------------------------------------------------

template <typename Fn>
void FileCache::MutateStream(HintStream* s, Release how, Fn fn) {
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

void FileCache::MutateStreamWith(HintStream* s, Release how,
                                 const std::function<void(StreamRelease*)>& fn) {
  MutateStream(s, how, fn);
}

void FileCache::ApplyRelease(HintStream* s, StreamRelease* release, Release dropped_as) {
  (void)s;
  for (const HintedAccess& a : release->consumed) {
    ReleaseHold(a, Release::kConsumed);
    accuracy_[static_cast<size_t>(a.source)].RecordUsed();
    ++counters_.blocks_consumed[static_cast<size_t>(a.source)];
  }
  for (const HintedAccess& a : release->dropped) {
    ReleaseHold(a, dropped_as);
    if (dropped_as != Release::kRemoved) {
      if (a.consumed_any) {
        accuracy_[static_cast<size_t>(a.source)].RecordUsed();
      } else {
        accuracy_[static_cast<size_t>(a.source)].RecordUnused();
      }
    }
    if (dropped_as == Release::kDropped)
      ++counters_.hinted_skipped;
    else
      ++counters_.hinted_cancelled;
  }
  for (size_t source = 0; source < kHintSourceCount; ++source) {
    const uint64_t n = release->unexpanded_dropped[source];
    if (n == 0) continue;
    if (dropped_as != Release::kRemoved) accuracy_[source].RecordUnused(static_cast<double>(n));
    counters_.hinted_cancelled += n;
  }
}

Status FileCache::AppendHints(uint64_t stream, uint32_t owner, HintSource source, uint32_t epoch,
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
    OwnerState& created = owners_[charged];
    (warmup ? created.warmups : created.streams).push_back(stream);
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
  return Status::OK();
}

std::vector<HintSegment> FileCache::TrimToTaintedBudget(uint64_t owner_tainted,
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

void FileCache::DeleteStream(uint64_t id, bool warmup, Release how) {
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
    }
  }
  map.erase(it);
}

void FileCache::DropInodeHints(uint64_t ino) {
  for (auto* map : {&streams_, &warmups_}) {
    for (auto& [id, stream] : *map) {
      HintStream* s = stream.get();
      MutateStream(s, Release::kRemoved, [s, ino](StreamRelease* r) { s->RemoveInode(ino, r); });
    }
  }
}

void FileCache::RetireIdleStreams(int64_t now) {
  std::vector<uint64_t> idle;
  for (const auto& [id, s] : streams_) {
    if (now - s->last_activity_ns() > kStreamIdleRetireNanos) idle.push_back(id);
  }
  for (uint64_t id : idle) {
    DeleteStream(id, /*warmup=*/false, Release::kCancelled);
    ++counters_.streams_retired;
  }
}

bool FileCache::MatchStreams(uint32_t tgid, uint64_t ino, uint64_t offset, uint64_t length,
                             int64_t now) {
  auto owner_it = owners_.find(tgid);
  if (owner_it == owners_.end()) return false;
  bool matched = false;
  std::vector<uint64_t> retire;
  for (uint64_t id : owner_it->second.streams) {
    if (IsShared(id)) continue;  // MatchSharedStreams (stream_sharing.cc)
    HintStream* s = streams_.at(id).get();
    HintStream::MatchResult result = HintStream::MatchResult::kMismatch;
    MutateStream(s, Release::kDropped,
                 [&](StreamRelease* r) { result = s->Match(ino, offset, length, now, r); });
    if (result != HintStream::MatchResult::kMismatch) {
      matched = true;
      break;
    }
    if (s->retire_due()) retire.push_back(id);
  }
  for (uint64_t id : retire) {
    DeleteStream(id, /*warmup=*/false, Release::kCancelled);
    ++counters_.streams_retired;
  }
  return matched;
}

// ---- The manager --------------------------------------------------------------------------

uint64_t FileCache::ExpansionBudget() const {
  return std::max<uint64_t>(4 * capacity_blocks_, 1 << 16);
}

void FileCache::ExpandStream(HintStream* s, size_t count) {
  // Past the budget a stream works with what it has expanded until reads or cancels free some.
  if (count <= s->expanded() || expanded_accesses_ >= ExpansionBudget()) return;
  const size_t before = s->expanded();
  s->Expand(std::min<uint64_t>(count, before + ExpansionBudget() - expanded_accesses_));
  expanded_accesses_ += s->expanded() - before;
}

size_t FileCache::NextCandidate(HintStream* s) {
  s->AdvanceCursor();
  // A stream never holds more than the whole cache.
  if (s->cursor() >= capacity_blocks_) return kNone;
  double slowest_disk = 0;
  for (const DiskServiceEstimator& d : disk_estimators_)
    slowest_disk = std::max(slowest_disk, d.nanos());
  // Index i is the access x = i + 1 ahead; PrefetchBenefit is 0 for x > P.
  const double horizon = std::min(PrefetchHorizon(slowest_disk, AppNanos(s)),
                                  static_cast<double>(s->cursor() + kMaxPrefetchLookahead));
  const size_t reach = static_cast<size_t>(horizon);
  const size_t end =
      std::clamp(reach, s->cursor() + kMinPrefetchLookahead, s->cursor() + kMaxPrefetchLookahead);
  // Past the horizon only idle disks are served (see Benefit), and only when there is one.
  bool any_disk_idle = false;
  if (ArrayIsTheBottleneck(PrefetchHorizon(slowest_disk, AppNanos(s)))) {
    for (uint32_t in_flight : disk_prefetches_) any_disk_idle = any_disk_idle || in_flight == 0;
  }
  const size_t far = any_disk_idle ? s->cursor() + kMaxPrefetchLookahead : end;
  ExpandStream(s, far);
  const size_t limit = std::min(far, s->expanded());
  for (size_t i = s->cursor(); i < limit; ++i) {
    if (i >= end && disk_prefetches_[DiskOf(s->at(i).ino, s->at(i).block)] != 0) continue;
    HintedAccess& a = s->at(i);
    if (a.state != HintedAccess::State::kPending) continue;
    if (a.block * block_size_ >= a.file_size) {
      a.state = HintedAccess::State::kDone;
      continue;
    }
    if (Block* b = table_.Find(a.ino, a.block); b != nullptr) {
      Hold(&a, b);  // cached or on its way already: no buffer and no I/O to decide about
      continue;
    }
    if (disk_prefetches_[DiskOf(a.ino, a.block)] >= options_.max_prefetches_per_disk) continue;
    s->AdvanceCursor();
    return i;
  }
  s->AdvanceCursor();
  return kNone;
}

void FileCache::RunManager(int64_t now) {
  if (now - last_idle_check_ns_ >= kNanosPerSecond) {
    last_idle_check_ns_ = now;
    RetireIdleStreams(now);
  }
  if (options_.hints_ignored) return;
  auto any_disk_has_room = [this]() REQUIRES(mu_) {
    for (uint32_t in_flight : disk_prefetches_) {
      if (in_flight < options_.max_prefetches_per_disk) return true;
    }
    return false;
  };
  for (int decision = 0; decision < kMaxDecisionsPerRun; ++decision) {
    // Nothing can be issued while every disk has its share of prefetches: the next completion
    // runs the manager again. (Keeps a read's cost independent of the number of streams then.)
    if (!any_disk_has_room()) return;
    HintStream* best = nullptr;
    size_t best_index = 0;
    double best_benefit = 0;
    bool best_beyond_horizon = false;
    for (auto& [id, stream] : streams_) {
      const size_t index = NextCandidate(stream.get());
      if (index == kNone) continue;
      bool beyond_horizon = false;
      const double benefit = Benefit(stream.get(), index, now, &beyond_horizon);
      if (benefit > best_benefit) {
        best = stream.get();
        best_index = index;
        best_benefit = benefit;
        best_beyond_horizon = beyond_horizon;
      }
    }
    if (best == nullptr) break;
    // Beyond the horizon only while buffers held for hints or in flight stay under half the
    // cache: a small cache needs every buffer inside the horizons.
    if (best_beyond_horizon &&
        2 * (table_.size() - table_.lru_size() - table_.evict_first_size() + 1) >
            capacity_blocks_) {
      break;
    }
    if (!MakeRoomForPrefetch(best_benefit, best, now, best_beyond_horizon)) break;
    HintedAccess& a = best->at(best_index);
    Block* b =
        NewFetchedBlock(a.ino, a.block, BlockOrigin::kHinted, /*prefetch=*/true, a.file_size, now);
    b->hint_source = static_cast<uint8_t>(a.source);
    Hold(&a, b);
    ++best->blocks_prefetched;
    best->AdvanceCursor();
  }
  RunWarmups(now);
}

void FileCache::RunWarmups(int64_t now) {
  std::vector<uint64_t> finished;
  for (auto& [id, stream] : warmups_) {
    HintStream* w = stream.get();
    while (true) {
      MutateStream(w, Release::kConsumed, [w](StreamRelease* r) { w->PopDoneFront(r); });
      w->AdvanceCursor();
      ExpandStream(w, w->cursor() + 1);
      if (w->cursor() >= w->expanded()) break;
      HintedAccess& a = w->at(w->cursor());
      if (a.block * block_size_ < a.file_size && table_.Find(a.ino, a.block) == nullptr) {
        // Warm-up is prefetched in the order given, with whatever the LRU queue can spare.
        if (disk_prefetches_[DiskOf(a.ino, a.block)] >= options_.max_prefetches_per_disk) break;
        if (!MakeRoom(Purpose::kWarmup, now)) break;
        NewFetchedBlock(a.ino, a.block, BlockOrigin::kWarmup, /*prefetch=*/true, a.file_size, now);
        ++w->blocks_prefetched;
      }
      a.state = HintedAccess::State::kDone;
    }
    if (w->exhausted()) finished.push_back(id);
  }
  for (uint64_t id : finished) DeleteStream(id, /*warmup=*/true, Release::kConsumed);
}

// ---- Read-ahead and speculative reads ----------------------------------------------------

void FileCache::Readahead(ReaderState* reader, uint64_t ino, uint64_t offset, uint64_t length,
                          uint64_t file_size, bool matched, int64_t now) {
  ReaderState::Run* run = nullptr;
  for (size_t i = 0; i < reader->run_count; ++i) {
    if (reader->runs[i].ino == ino) run = &reader->runs[i];
  }
  const uint64_t end = offset + length;
  const bool sequential =
      run != nullptr && offset >= run->last_block * block_size_ && offset <= run->next_offset;
  if (run == nullptr) {
    if (reader->run_count < ReaderState::kRuns) {
      run = &reader->runs[reader->run_count++];
    } else {
      run = &*std::min_element(reader->runs.begin(), reader->runs.end(),
                               [](const auto& a, const auto& b) { return a.used_ns < b.used_ns; });
    }
    *run = ReaderState::Run{};
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
  }
  run->last_block = (run->next_offset - 1) / block_size_;
  run->used_ns = now;
  if (matched || !options_.readahead) return;
  // The paper's baseline: read ahead as many blocks as have been read sequentially, up to 64.
  const uint64_t window =
      std::min<uint64_t>(run->seq_bytes / block_size_, options_.max_readahead_blocks);
  if (window == 0) return;
  const uint64_t target = std::min(run->last_block + window, (file_size - 1) / block_size_);
  uint64_t index = std::max(run->ra_next, run->last_block + 1);
  for (; index <= target; ++index) {
    if (table_.Find(ino, index) != nullptr) continue;
    if (disk_prefetches_[DiskOf(ino, index)] >= options_.max_prefetches_per_disk) break;
    if (!MakeRoom(Purpose::kReadahead, now)) break;
    NewFetchedBlock(ino, index, BlockOrigin::kReadahead, /*prefetch=*/true, file_size, now);
    ++counters_.readahead_issued;
  }
  run->ra_next = index;
}

void FileCache::HintSpeculativeRead(const ReadContext& ctx, uint64_t ino, uint64_t offset,
                                    uint64_t length, uint64_t file_size, int64_t now) {
  counters_.bytes_hinted[static_cast<size_t>(ctx.spec_source)] += length;
  if (options_.hints_ignored) return;
  // Named streams (ids from 2^32 up) carry their process in the high half, as fusefs makes them.
  const uint32_t owner = ctx.spec_owner != 0          ? ctx.spec_owner
                         : ctx.spec_stream >> 32 != 0 ? static_cast<uint32_t>(ctx.spec_stream >> 32)
                                                      : static_cast<uint32_t>(ctx.spec_stream);
  HintSegment segment{ino, offset, length, file_size, ctx.spec_epoch, ctx.spec_source};
  if (!AppendHints(ctx.spec_stream, owner, ctx.spec_source, ctx.spec_epoch, {segment}, now).ok()) {
    ++counters_.hints_refused;
  }
}

// ---- Public hint entry points ------------------------------------------------------------

Status FileCache::Hint(const HintBatch& batch) {
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
    if (e.length == 0 || e.offset >= e.file_size) continue;  // clipped to nothing
    const uint64_t length = std::min(e.length, e.file_size - e.offset);
    segments.push_back(
        HintSegment{e.ino, e.offset, length, e.file_size, batch.epoch, batch.source});
    bytes += length;
  }
  {
    MutexLock lock(&mu_);
    ++counters_.hint_calls;
    if (!options_.hints_ignored && !segments.empty()) {
      const int64_t now = clock_->NowNanos();
      Status st = AppendHints(batch.stream, batch.owner, batch.source, batch.epoch, segments, now);
      if (!st.ok()) {
        ++counters_.hints_refused;
        return st;
      }
      RunManager(now);
    }
    counters_.bytes_hinted[static_cast<size_t>(batch.source)] += bytes;
  }
  DrainIssues();
  return Status::OK();
}

Status FileCache::Cancel(uint64_t stream, std::optional<uint32_t> epoch, bool tainted_only) {
  {
    MutexLock lock(&mu_);
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
    RunManager(clock_->NowNanos());
  }
  DrainIssues();
  return Status::OK();
}

void FileCache::CancelProcess(uint32_t owner) {
  {
    MutexLock lock(&mu_);
    auto it = owners_.find(owner);
    if (it != owners_.end()) {
      const std::vector<uint64_t> streams = it->second.streams;
      const std::vector<uint64_t> warmups = it->second.warmups;
      for (uint64_t id : streams) DeleteStream(id, /*warmup=*/false, Release::kCancelled);
      for (uint64_t id : warmups) DeleteStream(id, /*warmup=*/true, Release::kCancelled);
    }
    RunManager(clock_->NowNanos());
  }
  DrainIssues();
}

StreamInfo FileCache::QueryStream(uint64_t stream) const {
  MutexLock lock(&mu_);
  StreamInfo info;
  info.cap_bytes = options_.per_process_hint_cap_bytes;
  const HintStream* s = nullptr;
  if (auto it = streams_.find(stream); it != streams_.end()) s = it->second.get();
  if (auto it = warmups_.find(stream); s == nullptr && it != warmups_.end()) s = it->second.get();
  if (s == nullptr) return info;
  info.exists = true;
  info.hinted_bytes = s->outstanding_bytes();
  info.segments_pending = s->segments_pending();
  info.blocks_consumed = s->blocks_consumed;
  info.blocks_prefetched = s->blocks_prefetched;
  info.horizon = std::min(PrefetchHorizon(MeanDiskNanos(), AppNanos(s)),
                          static_cast<double>(capacity_blocks_));
  return info;
}

CacheStats FileCache::Stats() const {
  MutexLock lock(&mu_);
  const int64_t now = clock_->NowNanos();
  CacheStats stats = counters_;
  stats.stall_nanos = stall_nanos_.load(std::memory_order_relaxed);
  stats.capacity_blocks = capacity_blocks_;
  stats.block_size = block_size_;
  stats.lru_buffers = table_.lru_size();
  stats.evict_first_buffers = table_.evict_first_size();
  table_.ForEach([&stats](const Block& b) {
    if (b.hint_refs > 0 || (!b.valid() && b.origin == BlockOrigin::kHinted)) {
      ++stats.hinted_buffers;
    } else if (!b.valid()) {
      ++stats.fetching_buffers;
    }
  });
  for (size_t i = 0; i < kHintSourceCount; ++i) stats.accuracy[i] = accuracy_[i].accuracy();
  stats.streams_active = streams_.size() + warmups_.size();
  stats.outstanding_hinted_bytes = global_hinted_bytes_;
  stats.outstanding_tainted_bytes = global_tainted_bytes_;
  stats.expanded_hint_accesses = expanded_accesses_;
  stats.t_hit_nanos = t_hit_.value();
  stats.t_driver_nanos = t_driver_.value();
  for (const DiskServiceEstimator& d : disk_estimators_) stats.t_disk_nanos.push_back(d.nanos());
  double horizon = PrefetchHorizon(MeanDiskNanos(), t_hit_.value() + t_driver_.value());
  if (!streams_.empty()) {
    horizon = 0;
    for (const auto& [id, s] : streams_) {
      horizon = std::max(horizon, PrefetchHorizon(MeanDiskNanos(), AppNanos(s.get())));
    }
  }
  stats.prefetch_horizon = std::min(horizon, static_cast<double>(capacity_blocks_));
  stats.lru_marginal_hit_ratio =
      lru_marginal_.MarginalHitRatio(now, table_.tail_count(), table_.tail_window());
  return stats;
}

}  // namespace tipfs::cache
