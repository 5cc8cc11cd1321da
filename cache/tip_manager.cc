// TipManager's decisions: the cost-benefit buffer allocation, read-ahead, and the thread that
// runs them.
//
// A round runs after an event that can change a decision: a hint, a cancel, an option change
// (Wake()), and a read or a completed fetch when there is something to prefetch and a disk with
// room, or the table is over capacity (WakeIfUseful()). Each decision asks every stream for its
// next prefetch candidate (the first hinted access past its cursor whose block is not cached and
// whose disk has room for another prefetch), values each as TIP does — benefit T_disk/(x(x-1)) of
// prefetching x accesses ahead, discounted by the source's accuracy and weighted by the stream's
// access rate (TIP2) — and takes the best. A free buffer or an evict-first block costs nothing;
// otherwise it is bought from the cheaper of the LRU queue's tail (its marginal hits) and the
// hinted block of another stream needed furthest ahead (its re-fetch cost), and only while the
// benefit exceeds the cost.
#include "cache/tip_manager.h"

#include <pthread.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "util/perf_context.h"

namespace tipfs::cache {

namespace {

constexpr int kMaxDecisionsPerRound = 256;
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
constexpr size_t kNone = std::numeric_limits<size_t>::max();
// Accesses right after one that may name its block too, read by the same prefetch: a block of
// 64 KiB read 4 KiB at a time, each read hinted, is 16.
constexpr size_t kBlockRunLookahead = 64;
constexpr double kInfinity = std::numeric_limits<double>::infinity();
// Hints go beyond their horizon on an idle disk only from a source at least this accurate (for
// their owner), and never tainted speculative ones (issue 16, item 7; see Benefit).
constexpr double kBeyondHorizonAccuracy = 0.9;

}  // namespace

TipManager::TipManager(CacheBuffers* buffers, Clock* clock, uint32_t block_size,
                       uint32_t disk_count, const CacheOptions& options)
    : buffers_(buffers),
      clock_(clock),
      block_size_(block_size),
      disk_count_(disk_count),
      events_(disk_count, static_cast<double>(options.initial_disk_nanos)),
      options_(options),
      readahead_enabled_(options.readahead),
      threaded_(options.manager_thread) {}

TipManager::~TipManager() { Stop(); }

// ---- The thread ---------------------------------------------------------------------------

void TipManager::Start() {
  if (!threaded_) return;
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "tipfs-manager");  // for top -H and perf
    ThreadLoop();
  });
}

void TipManager::Stop() {
  if (!thread_.joinable()) return;
  stopping_.store(true);
  pending_.store(true);
  pending_.notify_one();
  thread_.join();
}

void TipManager::Wake() {
  // Dekker-style with the sleeper (all seq_cst): either this sees `sleeping_` and wakes it, or
  // the manager, having set `sleeping_`, sees `pending_` and does not sleep.
  if (!pending_.exchange(true) && sleeping_.load()) {
    wakeups_.fetch_add(1, std::memory_order_relaxed);
    pending_.notify_one();
  }
}

void TipManager::WakeIfUseful(bool over_capacity, int64_t now) {
  // Every unhinted read and completion comes here: with nothing to prefetch this is one atomic
  // load and no wake (an empty round cost two futex hand-offs per 4 KiB miss: bench/fast).
  if (over_capacity) return Wake();
  if (!has_work_.load(std::memory_order_acquire) &&
      readahead_wanted_.load(std::memory_order_acquire) == 0) {
    return;
  }
  if (buffers_->AnyDiskHasRoom() || now >= retire_due_ns_.load(std::memory_order_relaxed)) {
    Wake();
  }
}

void TipManager::PublishWork() {
  has_work_.store(!streams_.empty() || !warmups_.empty(), std::memory_order_release);
  retire_due_ns_.store(streams_.empty() ? std::numeric_limits<int64_t>::max()
                                        : last_idle_check_ns_ + kNanosPerSecond,
                       std::memory_order_relaxed);
}

void TipManager::ThreadLoop() {
  while (!stopping_.load()) {
    if (!pending_.exchange(false)) {
      sleeping_.store(true);
      if (!pending_.load()) pending_.wait(false);
      sleeping_.store(false);
      continue;
    }
    RunRound();
  }
}

void TipManager::RunIfInline() {
  if (threaded_) return;
  // A round's own submissions may complete inline and wake the manager again: the loop below
  // runs that round instead of recursing.
  thread_local bool running = false;
  if (running) return;
  running = true;
  while (pending_.exchange(false)) RunRound();
  running = false;
}

void TipManager::RunRound() {
  PerfSection decide(Subsystem::kHintProcessing);
  rounds_.fetch_add(1, std::memory_order_relaxed);
  {
    MutexLock lock(&mu_);
    MutexLock table_lock(buffers_->mu());
    const int64_t now = clock_->NowNanos();
    if (now - last_idle_check_ns_ >= kNanosPerSecond) {
      last_idle_check_ns_ = now;
      RetireIdleStreams(now);
    }
    EnforceCapacity(now);
    RunReadahead(now);
  }
  // One decision per hold of the locks, so a read's consumption waits for one at most.
  for (int decision = 0; decision < kMaxDecisionsPerRound; ++decision) {
    MutexLock lock(&mu_);
    MutexLock table_lock(buffers_->mu());
    if (!DecideOnce()) break;
  }
  {
    MutexLock lock(&mu_);
    MutexLock table_lock(buffers_->mu());
    if (!options_.hints_ignored) RunWarmups(clock_->NowNanos());
    PublishWork();
  }
  buffers_->DrainIssues();
}

// ---- Estimates ----------------------------------------------------------------------------

double TipManager::AppNanos(const HintStream* s) const {
  if (const std::optional<double> shared = SharedAppNanos(s)) {
    return std::max(kMinAppNanos, *shared);
  }
  return std::max(kMinAppNanos,
                  events_.CpuNanos(s->owner()) + events_.HitNanos() + events_.DriverNanos());
}

int64_t TipManager::LastStartNanos(const HintStream* s) const {
  int64_t last = events_.LastStartNanos(s->owner());
  if (IsShared(s->id())) {
    for (uint32_t c : ConsumersOf(s->id())) {
      last = std::max(last, events_.LastStartNanos(c));
    }
  }
  return last;
}

double TipManager::AccessRate(const HintStream* s, int64_t now) const {
  double interval = AppNanos(s);
  // A shared stream is read by its consumers, not its owner (a loader's workers).
  const bool measured = events_.HasCpuSample(s->owner()) || SharedAppNanos(s).has_value();
  const int64_t last = std::max(s->last_activity_ns(), LastStartNanos(s));
  // A hinter that has not read yet is valued as a reader that stalls on every block would run
  // (one access per T_disk + T_app): enough to fill free buffers for it, not enough to evict
  // what proven readers hit until its own reads show its pace.
  const double unstalled = interval;
  if (!measured) interval += events_.MeanDiskNanos();
  const double idle = static_cast<double>(std::max<int64_t>(0, now - last));
  const double grace = std::max(static_cast<double>(kIdleGraceNanos), 4 * interval);
  if (idle > grace || !measured || s->blocks_consumed == 0) {
    return 1e9 / (idle > grace ? idle : interval);
  }
  // One currency with the LRU side, which is valued at the hits per second it measures (issue
  // 16, item 2): a stream that is reading its hints is worth what it consumes now, not the rate
  // it would have without stalls. A reader the disks hold back (P beyond what the array serves)
  // consumes at the array's pace, so its deep prefetches, which cannot make it faster, stop
  // outbidding a re-reader's working set; its shallow ones, worth T_disk / (x (x - 1)) each, still
  // win and keep every disk busy. Bounded below by a reader that stalls on every block (a stream
  // starved of buffers still bids for them) and above by the unstalled rate. Measured in
  // tip_competition_test: valued at the unstalled rate instead, a re-reader beside a disk-bound
  // hinter took 1.6x as long with its working set (232 blocks) plus the horizon over the cache.
  const double stalling = 1e9 / (unstalled + events_.MeanDiskNanos());
  return std::clamp(s->consumption.Rate(now), stalling, 1e9 / unstalled);
}

bool TipManager::ArrayIsTheBottleneck(double horizon) const {
  // The reader consumes faster than the array delivers with every disk's prefetch queue full
  // (P > disks x prefetches per disk): every second a disk idles is lost. Below that the reader
  // is the bottleneck, imbalance costs nothing, and an extra fetch beyond the horizon would only
  // delay the next useful one on its disk (measured: 20% more stall for two readers sharing 4
  // buffers with P = 5).
  return options_.prefetch_idle_disks &&
         horizon >= static_cast<double>(disk_count_) * options_.max_prefetches_per_disk;
}

double TipManager::QueueDistance(size_t index, uint32_t disk) const {
  const double x = static_cast<double>(index + 1);
  if (!options_.queue_aware_horizon) return x;
  // Fetches on one disk are served one after another: with q queued ahead, a fetch issued now
  // completes after about (q + 1) T_disk, so it is due when x T_app <= (q + 1) T_disk, i.e. when
  // x / (q + 1) <= P (CacheOptions::queue_aware_horizon). Reads of one stream that fall unevenly
  // on the disks thus go deeper exactly where they queue.
  return x / static_cast<double>(buffers_->PrefetchesInFlight(disk) + 1);
}

double TipManager::Benefit(HintStream* s, size_t index, int64_t now, bool* beyond_horizon) const {
  const HintedAccess& a = s->at(index);
  const uint32_t disk = buffers_->DiskOf(a.ino, a.block);
  const double t_disk = events_.DiskNanos(disk);
  const double t_app = AppNanos(s);
  double benefit = PrefetchBenefit(t_disk, t_app, index + 1);
  *beyond_horizon = benefit == 0;
  const double horizon = PrefetchHorizon(t_disk, t_app);
  // Past the paper's horizon but due because its disk is queued (QueueDistance): valued as below
  // for an idle disk, and given spare buffers only (DecideOnce). Valuing it at its queue distance
  // instead would rank it, and the accesses inside the horizon, above other streams' held blocks
  // in a contested cache (measured: two hinters in 4 buffers, 39 ejections instead of 5 and 1.5x
  // the stall).
  const bool queued_due =
      benefit == 0 && options_.queue_aware_horizon && QueueDistance(index, disk) <= horizon;
  // Only hints that will most likely be read go beyond the horizon on an idle disk. That disk is
  // idle now, but the array is the bottleneck (ArrayIsTheBottleneck): a block fetched for a hint
  // nobody reads keeps the disk busy for a T_disk in which the next access inside some horizon
  // may come due on it, and holds a buffer up to 256 accesses ahead. Inside the horizon a wrong
  // guess costs in proportion to the accuracy discount below; beyond it nothing weighs it, since
  // spare buffers are taken at any positive benefit. So tainted speculative hints (guesses made
  // on data the child did not get) and sources below kBeyondHorizonAccuracy stop at P.
  const bool may_go_beyond = a.source != HintSource::kSpeculativeTainted &&
                             Accuracy(s->owner(), a.source) >= kBeyondHorizonAccuracy;
  if (queued_due || (benefit == 0 && may_go_beyond && buffers_->PrefetchesInFlight(disk) == 0 &&
                     ArrayIsTheBottleneck(horizon))) {
    // Beyond the horizon, on a disk that would otherwise idle (beyond the paper, for arrays):
    // the reads of one stream fall unevenly on the disks, so a disk that is locally ahead will be
    // the one stalling the reader later. Its idle time costs nothing, only the buffer does, so
    // the access is valued as the deepest useful prefetch, the smallest benefit inside the
    // horizon, and gets only a spare buffer (DecideOnce): free, evict-first or an LRU tail
    // without hits, and only while hints hold less than half the cache (never another hinted
    // block, nor the last buffers of a small cache: with few buffers that churns, each ejected
    // block is fetched again).
    benefit =
        PrefetchBenefit(t_disk, t_app, static_cast<uint64_t>(std::max(2.0, std::floor(horizon))));
  }
  return benefit * Accuracy(s->owner(), a.source) * AccessRate(s, now);
}

double TipManager::LruCostRate(int64_t now) const {
  if (buffers_->lru_blocks() == 0) return kInfinity;
  // (H(n) - H(n-1)) * (T_miss - T_hit) per LRU access, times LRU accesses per second, is the
  // marginal hits per second times T_driver + T_disk.
  const double hits_per_second = events_.LruMarginalHitsPerSecond(now, buffers_->lru_tail_count(),
                                                                  buffers_->lru_tail_window());
  return hits_per_second * (events_.DriverNanos() + events_.MeanDiskNanos());
}

double TipManager::LruGrowthCostRate(int64_t now) const {
  // The ghost half of LruCostRate: the hits per second one more LRU buffer would add.
  const double hits_per_second =
      events_.LruMarginalHitsPerSecond(now, 0, buffers_->lru_tail_window());
  return hits_per_second * (events_.DriverNanos() + events_.MeanDiskNanos());
}

TipManager::Ejection TipManager::CheapestEjection(const HintStream* exclude, int64_t now) const {
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
      const Block* b = buffers_->FindBlock(a.ino, a.block);
      if (b == nullptr || b->id != a.block_id || !b->valid() || b->hint_refs != 1) continue;
      // The block needed furthest ahead is the stream's cheapest: cost falls with y.
      const double cost =
          EjectCost(events_.DiskNanos(b->disk), AppNanos(s), events_.DriverNanos(), i + 1) *
          Accuracy(s->owner(), a.source) * AccessRate(s, now);
      if (cost < best.cost) best = Ejection{s, i, cost};
      break;
    }
  }
  return best;
}

// ---- Buffers ------------------------------------------------------------------------------

std::pair<uint32_t, uint32_t> TipManager::BytesInBlock(const HintStream& s, size_t i) const {
  const HintedAccess& a = s.at(i);
  uint64_t begin = a.begin;
  uint64_t end = a.end;
  // A reader that hints each of its reads (a speculating child, 4 KiB at a time) names a block
  // in several accesses in a row: one fetch brings them all.
  for (size_t j = i + 1; j < s.expanded() && j < i + kBlockRunLookahead; ++j) {
    const HintedAccess& next = s.at(j);
    if (next.ino != a.ino || next.block != a.block) break;
    begin = std::min(begin, next.begin);
    end = std::max(end, next.end);
  }
  const uint64_t start = a.block * block_size_;
  return {static_cast<uint32_t>(begin - start), static_cast<uint32_t>(end - start)};
}

void TipManager::Hold(HintedAccess* a, Block* b) {
  a->state = HintedAccess::State::kHeld;
  a->block_id = b->id;
  buffers_->AddHintRef(b);
}

void TipManager::ReleaseHold(const HintedAccess& a, Release how) {
  if (a.state != HintedAccess::State::kHeld) return;
  Block* b = buffers_->FindBlock(a.ino, a.block);
  if (b == nullptr || b->id != a.block_id || b->hint_refs == 0) return;
  if (--b->hint_refs > 0) return;
  if (how != Release::kConsumed && b->origin == BlockOrigin::kHinted && !b->used) {
    b->evict_first = true;  // fetched for a hint nobody will read: first in line to go
  }
  // Beyond TIP, which puts a consumed block at the LRU's warm end: a block fetched for a hint
  // and now read by it, with no other hint holding it, is done as far as anyone has disclosed (a
  // disclosed reuse inside the window holds it still). At the warm end a hinted reader's stream
  // of used-once blocks would push a re-reader's working set out of the LRU, which the exchange
  // never weighs (measured: tip_competition_test, L's hits 0.70 with the working set plus the
  // horizon inside the cache). In the evict-first queue it goes before any LRU block, and a hit
  // by anyone moves it to the LRU like any other. Warm-up blocks are for whoever reads later.
  if (how == Release::kConsumed && b->origin == BlockOrigin::kHinted &&
      a.source != HintSource::kWarmup) {
    b->evict_first = true;
  }
  if (b->valid()) buffers_->PlaceUnheld(b);
}

void TipManager::Eject(const Ejection& e) {
  if (e.kept) {
    auto it = e.stream->kept.find(e.key);
    if (it == e.stream->kept.end()) return;
    const uint64_t block_id = it->second.block_id;
    e.stream->kept_by_reuse.erase({it->second.reuse_at, e.key});
    e.stream->kept.erase(it);
    ++counters_.hinted_ejected;
    Block* b = buffers_->FindBlock(e.key.first, e.key.second);
    if (b != nullptr && b->id == block_id && b->hint_refs > 0 && --b->hint_refs == 0) {
      buffers_->EvictBlock(b);
    }
    return;
  }
  HintedAccess& a = e.stream->at(e.index);
  Block* b = buffers_->FindBlock(a.ino, a.block);
  a.state = HintedAccess::State::kPending;
  a.block_id = 0;
  e.stream->RewindCursor(e.index);
  ++counters_.hinted_ejected;
  if (b != nullptr && b->hint_refs > 0 && --b->hint_refs == 0) buffers_->EvictBlock(b);
}

bool TipManager::FreeOneBuffer(const HintStream* exclude, int64_t now) {
  if (Block* b = buffers_->EvictFirstColdest(); b != nullptr) {
    buffers_->EvictBlock(b);
  } else if (Block* lru = buffers_->LruColdest(); lru != nullptr) {
    // A block kept for a reuse far ahead may be worth less than the LRU's coldest (TIP compares
    // the two); a hinted block inside a window stays behind the LRU, as before.
    if (Ejection kept = CheapestKept(now); kept.stream != nullptr && kept.cost < LruCostRate(now)) {
      Eject(kept);
    } else {
      buffers_->EvictBlock(lru);
    }
  } else if (Ejection e = CheapestOf(CheapestEjection(exclude, now), CheapestKept(now));
             e.stream != nullptr) {
    Eject(e);
  } else {
    return false;  // the rest is in flight
  }
  return true;
}

void TipManager::EnforceCapacity(int64_t now) {
  while (buffers_->cached_blocks() > buffers_->capacity_blocks() && FreeOneBuffer(nullptr, now)) {
  }
}

bool TipManager::MakeRoomForPrefetch(double benefit, const HintStream* requester, int64_t now,
                                     bool spare_only) {
  while (buffers_->cached_blocks() >= buffers_->capacity_blocks()) {
    // The comparison policy takes a buffer inside the horizon whatever it is worth elsewhere.
    if (options_.always_prefetch_hinted && !spare_only) {
      if (!FreeOneBuffer(requester, now)) return false;
      continue;
    }
    if (Block* b = buffers_->EvictFirstColdest(); b != nullptr) {
      // Nobody wants this block, but the buffer is wanted where the LRU would grow into it:
      // its ghost hits (blocks it evicted and was asked for again) price one more buffer there.
      // Otherwise a hinted stream recycles the blocks it consumes into ever deeper prefetches
      // while a re-reader next to it misses (tip_competition_test).
      // (The comparison policy takes it beyond the horizon too.)
      if (!options_.always_prefetch_hinted) {
        const double growth = LruGrowthCostRate(now);
        if (spare_only ? growth > 0 : !(benefit > growth)) return false;
      }
      buffers_->EvictBlock(b);
      continue;
    }
    const double lru_cost = LruCostRate(now);
    if (spare_only) {
      if (lru_cost > 0) return false;  // LRU tail without hits, or nothing (infinite when empty)
      buffers_->EvictBlock(buffers_->LruColdest());
      continue;
    }
    // A stream may give up its own kept blocks (read again beyond its window) for a nearer
    // prefetch, not the blocks inside its window, which it prefetched in order.
    const Ejection e = CheapestOf(CheapestEjection(requester, now), CheapestKept(now));
    if (!(benefit > std::min(lru_cost, e.cost))) return false;
    if (e.stream != nullptr && e.cost < lru_cost) {
      Eject(e);
    } else {
      buffers_->EvictBlock(buffers_->LruColdest());
    }
  }
  return true;
}

// ---- Candidates and decisions -------------------------------------------------------------

uint64_t TipManager::ExpansionBudget() const {
  return std::max<uint64_t>(4 * buffers_->capacity_blocks(), 1 << 16);
}

void TipManager::ExpandStream(HintStream* s, size_t count) {
  // Past the budget a stream works with what it has expanded until reads or cancels free some.
  if (count <= s->expanded() || expanded_accesses_ >= ExpansionBudget()) return;
  const size_t before = s->expanded();
  s->Expand(std::min<uint64_t>(count, before + ExpansionBudget() - expanded_accesses_));
  expanded_accesses_ += s->expanded() - before;
}

size_t TipManager::NextCandidate(HintStream* s, int64_t now) {
  s->AdvanceCursor();
  // A stream never holds more than the whole cache.
  if (s->cursor() >= buffers_->capacity_blocks()) return kNone;
  const double slowest_disk = events_.SlowestDiskNanos();
  // Index i is the access x = i + 1 ahead; PrefetchBenefit is 0 for x > P.
  const double horizon = std::min(PrefetchHorizon(slowest_disk, AppNanos(s)),
                                  static_cast<double>(s->cursor() + kMaxPrefetchLookahead));
  const size_t reach = static_cast<size_t>(horizon);
  const size_t end =
      std::clamp(reach, s->cursor() + kMinPrefetchLookahead, s->cursor() + kMaxPrefetchLookahead);
  // Past the horizon only idle disks are served (see Benefit), and only when there is one.
  bool any_disk_idle = false;
  if (ArrayIsTheBottleneck(PrefetchHorizon(slowest_disk, AppNanos(s)))) {
    for (uint32_t disk = 0; disk < disk_count_; ++disk) {
      any_disk_idle = any_disk_idle || buffers_->PrefetchesInFlight(disk) == 0;
    }
  }
  // Queued disks extend the horizon (QueueDistance): up to (max_prefetches_per_disk + 1) P.
  const size_t queued_reach =
      std::min(s->cursor() + kMaxPrefetchLookahead,
               options_.queue_aware_horizon
                   ? static_cast<size_t>(PrefetchHorizon(slowest_disk, AppNanos(s)) *
                                         (options_.max_prefetches_per_disk + 1.0))
                   : 0);
  const size_t far =
      any_disk_idle ? s->cursor() + kMaxPrefetchLookahead : std::max(end, queued_reach);
  ExpandStream(s, far);
  const size_t limit = std::min(far, s->expanded());
  const double t_app = AppNanos(s);
  // The first access whose fetch is due now (inside its queue-aware horizon); failing that, the
  // first one its disk has room for, which Benefit values as beyond the horizon.
  size_t first_beyond = kNone;
  for (size_t i = s->cursor(); i < limit; ++i) {
    HintedAccess& a = s->at(i);
    const uint32_t disk = buffers_->DiskOf(a.ino, a.block);
    const bool due = QueueDistance(i, disk) <= PrefetchHorizon(events_.DiskNanos(disk), t_app);
    if (i >= end && !due && buffers_->PrefetchesInFlight(disk) != 0) continue;
    if (a.state != HintedAccess::State::kPending) continue;
    if (a.block * block_size_ >= a.file_size) {
      a.state = HintedAccess::State::kDone;
      continue;
    }
    if (Block* b = buffers_->FindBlock(a.ino, a.block); b != nullptr) {
      // Cached or on its way already: no buffer to decide about, and I/O only for the hinted
      // bytes a partly cached block lacks (waiting, like a new block, for its disk's room).
      const auto [lo, hi] = BytesInBlock(*s, i);
      if (buffers_->PrefetchMissing(b, lo, hi, a.file_size, now) == CacheBuffers::Fill::kLater) {
        continue;
      }
      Hold(&a, b);
      HandOverKept(s, a, b);
      continue;
    }
    if (!buffers_->DiskHasRoom(disk)) continue;
    if (due || !options_.queue_aware_horizon) {  // without it, exactly the first, as before
      s->AdvanceCursor();
      return i;
    }
    if (first_beyond == kNone) first_beyond = i;
  }
  s->AdvanceCursor();
  return first_beyond;
}

bool TipManager::DecideOnce() {
  if (options_.hints_ignored) return false;
  // Nothing can be issued while every disk has its share of prefetches: the next completion
  // wakes the manager again.
  if (!buffers_->AnyDiskHasRoom()) {
    ++counters_.prefetch_stops_disks_full;
    return false;
  }
  const int64_t now = clock_->NowNanos();
  HintStream* best = nullptr;
  size_t best_index = 0;
  double best_benefit = 0;
  bool best_beyond_horizon = false;
  for (auto& [id, stream] : streams_) {
    const size_t index = NextCandidate(stream.get(), now);
    if (index == kNone) continue;
    bool beyond_horizon = false;
    const double benefit = Benefit(stream.get(), index, now, &beyond_horizon);
    // An access inside its paper horizon goes before any beyond it (queued or idle-disk depth
    // takes only what the horizons leave).
    const bool better = best == nullptr || (!beyond_horizon && best_beyond_horizon) ||
                        (beyond_horizon == best_beyond_horizon && benefit > best_benefit);
    if (benefit > 0 && better) {
      best = stream.get();
      best_index = index;
      best_benefit = benefit;
      best_beyond_horizon = beyond_horizon;
    }
  }
  if (best == nullptr) {
    ++counters_.prefetch_stops_no_candidate;
    return false;
  }
  // Beyond the horizon only while buffers held for hints or in flight stay under half the
  // cache, and leave room for every stream's horizon: a small cache needs every buffer inside
  // the horizons (a block fetched beyond one and ejected again cost its disk a fetch).
  if (best_beyond_horizon) {
    const uint64_t hinted =
        buffers_->cached_blocks() - buffers_->lru_blocks() - buffers_->evict_first_blocks() + 1;
    const double capacity = static_cast<double>(buffers_->capacity_blocks());
    double horizons = 0;
    for (const auto& [id, stream] : streams_) {
      horizons +=
          std::min(capacity, PrefetchHorizon(events_.SlowestDiskNanos(), AppNanos(stream.get())));
    }
    if (2 * hinted > buffers_->capacity_blocks() ||
        static_cast<double>(hinted) + horizons > capacity) {
      ++counters_.prefetch_stops_beyond_horizon;
      return false;
    }
  }
  if (!MakeRoomForPrefetch(best_benefit, best, now, best_beyond_horizon)) {
    ++counters_.prefetch_stops_no_buffer;
    return false;
  }
  HintedAccess& a = best->at(best_index);
  const auto [lo, hi] = BytesInBlock(*best, best_index);
  Block* b = buffers_->IssuePrefetch(a.ino, a.block, CacheBuffers::Purpose::kHinted, a.file_size,
                                     now, lo, hi);
  if (b == nullptr) return false;
  b->hint_source = static_cast<uint8_t>(a.source);
  Hold(&a, b);
  ++best->blocks_prefetched;
  best->AdvanceCursor();
  return true;
}

// ---- Read-ahead ---------------------------------------------------------------------------

void TipManager::RunReadahead(int64_t now) {
  // Cleared before the shards are read: a run that comes to want blocks after its shard was read
  // sets its bit again (TrackRun), so none waits with its bit clear.
  uint64_t shards = readahead_wanted_.exchange(0);
  if (!options_.readahead) return;
  for (; shards != 0; shards &= shards - 1) {
    const size_t shard_index = static_cast<size_t>(std::countr_zero(shards));
    ReadaheadShard& shard = readahead_shards_[shard_index];
    // The wanted runs are copied out and decided on without the shard's lock: a read of the
    // shard's processes never waits for a decision (issue 11).
    wanted_runs_.clear();
    {
      MutexLock lock(&shard.mu);
      for (const auto& [tgid, reader] : shard.readers) {
        for (size_t i = 0; i < reader.run_count; ++i) {
          if (reader.runs[i].wanted) wanted_runs_.push_back(WantedRun{tgid, i, reader.runs[i]});
        }
      }
    }
    if (wanted_runs_.empty()) continue;
    for (WantedRun& w : wanted_runs_) {
      const ReadaheadState::Run* run = &w.run;
      // The paper's baseline: read ahead as many blocks as have been read sequentially, up to 64.
      const uint64_t window =
          std::min<uint64_t>(run->seq_bytes / block_size_, options_.max_readahead_blocks);
      const uint64_t target =
          std::min(run->last_block + window, (run->file_size - 1) / block_size_);
      uint64_t index = std::max(run->ra_next, run->last_block + 1);
      for (; index <= target; ++index) {
        if (buffers_->FindBlock(run->ino, index) != nullptr) continue;
        const uint32_t disk = buffers_->DiskOf(run->ino, index);
        if (!buffers_->DiskHasRoom(disk)) break;
        // Read-ahead is one more estimator of future accesses (TIP2): the block index - last
        // ahead is valued as a hinted one that far ahead, discounted by how often read-ahead
        // blocks were read, and bought like one (MakeRoomForPrefetch); past the reader's
        // horizon it takes spare buffers only. Taking the LRU's coldest block whatever it was
        // worth, read-ahead pushed a re-reader's working set out (ReadaheadCompetesWithTheLru).
        const double benefit = ReadaheadBenefit(w.tgid, disk, index - run->last_block);
        if (!MakeRoomForPrefetch(benefit, nullptr, now, /*spare_only=*/benefit == 0)) break;
        if (buffers_->IssuePrefetch(run->ino, index, CacheBuffers::Purpose::kReadahead,
                                    run->file_size, now, 0, block_size_) == nullptr) {
          break;
        }
      }
      w.next = index;
      w.target = target;
    }
    // Written back to the runs read meanwhile too, unless they started over (a new serial): a
    // run its reader moved on keeps the `wanted` that read gave it, for the next round.
    bool still_wanted = false;
    {
      MutexLock lock(&shard.mu);
      for (const WantedRun& w : wanted_runs_) {
        auto reader = shard.readers.find(w.tgid);
        if (reader == shard.readers.end() || w.slot >= reader->second.run_count) continue;
        ReadaheadState::Run* run = &reader->second.runs[w.slot];
        if (run->serial != w.run.serial) continue;
        run->ra_next = w.next;
        if (run->version == w.run.version) run->wanted = w.next <= w.target;
        still_wanted = still_wanted || run->wanted;
      }
    }
    if (still_wanted) readahead_wanted_.fetch_or(uint64_t{1} << shard_index);
  }
}

double TipManager::ReadaheadBenefit(uint32_t tgid, uint32_t disk, uint64_t x) const {
  const double t_app =
      std::max(kMinAppNanos, events_.CpuNanos(tgid) + events_.HitNanos() + events_.DriverNanos());
  // Read-ahead's accuracy: its blocks read over those issued, from a prior of 8 read ones.
  const double accuracy = (static_cast<double>(buffers_->readahead_hits()) + 8.0) /
                          (static_cast<double>(buffers_->readahead_issued()) + 8.0);
  // The reader's rate: as a hinter before its consumption is measured, one that stalls on every
  // block would run (AccessRate), so read-ahead never outbids what a proven reader hits.
  const double rate = 1e9 / (t_app + events_.MeanDiskNanos());
  return PrefetchBenefit(events_.DiskNanos(disk), t_app, x) * std::min(1.0, accuracy) * rate;
}

// ---- Options and statistics ---------------------------------------------------------------

void TipManager::SetOptions(const CacheOptions& options) {
  MutexLock lock(&mu_);
  MutexLock table_lock(buffers_->mu());
  const bool drop_hints = options.hints_ignored && !options_.hints_ignored;
  options_ = options;
  readahead_enabled_.store(options.readahead, std::memory_order_relaxed);
  if (drop_hints) {
    std::vector<std::pair<uint64_t, bool>> all;
    for (const auto& [id, s] : streams_) all.emplace_back(id, false);
    for (const auto& [id, s] : warmups_) all.emplace_back(id, true);
    for (const auto& [id, warmup] : all) DeleteStream(id, warmup, Release::kCancelled);
  }
}

void TipManager::FillStats(CacheStats* stats) const {
  MutexLock lock(&mu_);
  MutexLock table_lock(buffers_->mu());
  const int64_t now = clock_->NowNanos();
  stats->hint_calls = counters_.hint_calls;
  stats->hints_refused = counters_.hints_refused;
  stats->bytes_hinted = counters_.bytes_hinted;
  stats->blocks_consumed = counters_.blocks_consumed;
  stats->hinted_cancelled = counters_.hinted_cancelled;
  stats->hinted_skipped = counters_.hinted_skipped;
  stats->hinted_ejected = counters_.hinted_ejected;
  stats->hinted_kept_for_reuse = counters_.hinted_kept_for_reuse;
  stats->shared_consumed = counters_.shared_consumed;
  stats->prefetch_stops_disks_full = counters_.prefetch_stops_disks_full;
  stats->prefetch_stops_no_candidate = counters_.prefetch_stops_no_candidate;
  stats->prefetch_stops_beyond_horizon = counters_.prefetch_stops_beyond_horizon;
  stats->prefetch_stops_no_buffer = counters_.prefetch_stops_no_buffer;
  stats->spec_redundant_bytes = counters_.spec_redundant_bytes;
  stats->streams_retired = counters_.streams_retired;
  for (size_t i = 0; i < kHintSourceCount; ++i) stats->accuracy[i] = accuracy_[i].accuracy();
  stats->streams_active = streams_.size() + warmups_.size();
  stats->outstanding_hinted_bytes = global_hinted_bytes_;
  stats->outstanding_tainted_bytes = global_tainted_bytes_;
  stats->tainted_trimmed_bytes = counters_.tainted_trimmed_bytes;
  stats->tainted_outstanding_max_bytes = counters_.tainted_outstanding_max_bytes;
  stats->expanded_hint_accesses = expanded_accesses_;
  stats->manager_rounds = rounds_.load(std::memory_order_relaxed);
  stats->manager_wakeups = wakeups_.load(std::memory_order_relaxed);
  stats->t_hit_nanos = events_.HitNanos();
  stats->t_driver_nanos = events_.DriverNanos();
  stats->t_disk_nanos = events_.AllDiskNanos();
  const double mean_disk = events_.MeanDiskNanos();
  // The busiest stream is the one with the least application time per access.
  double t_app = stats->t_hit_nanos + stats->t_driver_nanos;
  if (!streams_.empty()) {
    t_app = kInfinity;
    for (const auto& [id, s] : streams_) t_app = std::min(t_app, AppNanos(s.get()));
  }
  const double capacity = static_cast<double>(buffers_->capacity_blocks());
  stats->prefetch_horizon = std::min(PrefetchHorizon(mean_disk, t_app), capacity);
  for (const DiskServiceEstimator& d : events_.DiskEstimators()) {
    CacheStats::DiskEstimate e;
    e.t_disk_nanos = d.nanos();
    e.idle_nanos = d.idle_nanos();
    e.queued_nanos = d.queued_nanos();
    e.idle_samples = d.idle_samples();
    e.queued_samples = d.queued_samples();
    e.in_flight = d.in_flight();
    e.horizon = std::min(PrefetchHorizon(d.nanos(), t_app), capacity);
    stats->disk_estimates.push_back(e);
  }
  stats->lru_marginal_hit_ratio =
      events_.LruMarginalHitRatio(now, buffers_->lru_tail_count(), buffers_->lru_tail_window());
}

}  // namespace tipfs::cache
