// TipManager's informed caching beyond the lookahead window (issue 16, item 1; TIP, Patterson et
// al., SOSP 1995, section 4.3: a hinted block stays in the cache until something worth more than
// the cost of ejecting it at its distance wants the buffer).
//
// The prefetcher holds the blocks of the accesses inside a stream's lookahead window,
// clamp(P, 32, 256) accesses. A block that the stream's reader has just read, and that no hint
// holds any longer, went to the evict-first queue even when the stream discloses that it reads the
// block again further on: a hinted loop over a working set larger than the window but smaller
// than the cache fetched every block on every pass. Such a block is now kept (HintStream::kept):
// it holds a hint_ref, so no queue gives it up, and it is ejected only through the exchange, at
// EjectCost(T_disk, T_app, T_driver, y) x accuracy x access rate with y its reuse distance, like a
// hinted block inside the window. When the window reaches the reuse, the window's hold replaces
// the keeping (HandOverKept); a read of it, a drop of the reuse or of the stream ends it.
#include <algorithm>
#include <limits>

#include "cache/tip_manager.h"

namespace tipfs::cache {

namespace {

// How far ahead a reuse is looked for (and kept), in accesses, beyond the cache's own size: a
// block read again further ahead than the cache has buffers costs T_driver / (y - P) or less to
// give up, so nothing but idle buffers would keep it. Also bounds the walk of IndexOf per read.
constexpr size_t kMaxReuseDistance = 4096;

}  // namespace

void TipManager::KeepForReuse(HintStream* s, const HintedAccess& a) {
  if (a.source == HintSource::kWarmup) return;  // warm-ups prefetch for whoever reads later
  Block* b = buffers_->FindBlock(a.ino, a.block);
  if (b == nullptr || b->hint_refs > 0) return;  // gone, or another hint holds it
  const HintStream::BlockKeyPair key{a.ino, a.block};
  if (s->kept.contains(key) || !s->HoldsBlock(a.ino, a.block)) return;
  const size_t limit = std::min<size_t>(buffers_->capacity_blocks(), kMaxReuseDistance);
  const size_t index = s->IndexOf(a.ino, a.block, limit);
  if (index == HintStream::kNotFound) return;
  const uint64_t reuse_at = s->popped() + index;
  s->kept.emplace(key, HintStream::KeptBlock{b->id, reuse_at, a.source});
  s->kept_by_reuse.emplace(reuse_at, key);
  buffers_->AddHintRef(b);  // hint_refs was 0: off its queue, as Hold does
  ++counters_.hinted_kept_for_reuse;
}

void TipManager::HandOverKept(HintStream* s, const HintedAccess& a, const Block* b) {
  if (s->kept.empty()) return;
  const HintStream::BlockKeyPair key{a.ino, a.block};
  auto it = s->kept.find(key);
  if (it == s->kept.end()) return;
  Block* kept = buffers_->FindBlock(a.ino, a.block);
  // The window's Hold took a ref of its own: give back the keeping's (never the last one).
  if (kept == b && kept->id == it->second.block_id && kept->hint_refs > 1) --kept->hint_refs;
  s->kept_by_reuse.erase({it->second.reuse_at, key});
  s->kept.erase(it);
}

void TipManager::ReleaseKept(HintStream* s, const HintStream::BlockKeyPair& key) {
  auto it = s->kept.find(key);
  if (it == s->kept.end()) return;
  const uint64_t block_id = it->second.block_id;
  s->kept_by_reuse.erase({it->second.reuse_at, key});
  s->kept.erase(it);
  Block* b = buffers_->FindBlock(key.first, key.second);
  if (b == nullptr || b->id != block_id || b->hint_refs == 0) return;  // the data path dropped it
  if (--b->hint_refs > 0) return;
  // Read as far as anyone disclosed: first in line, as a consumed hinted block (ReleaseHold).
  b->evict_first = b->origin == BlockOrigin::kHinted;
  if (b->valid()) buffers_->PlaceUnheld(b);
}

void TipManager::ReviewKept(HintStream* s, const StreamRelease& release, bool all) {
  if (s->kept.empty()) return;
  // A consumed access was the reuse its block was kept for (the read came before the window).
  for (const HintedAccess& a : release.consumed) ReleaseKept(s, {a.ino, a.block});
  if (all) {
    std::vector<HintStream::BlockKeyPair> gone;
    for (const auto& [key, kept] : s->kept) {
      if (!s->HoldsBlock(key.first, key.second)) gone.push_back(key);
    }
    for (const auto& key : gone) ReleaseKept(s, key);
    return;
  }
  for (const HintedAccess& a : release.dropped) {
    if (!s->HoldsBlock(a.ino, a.block)) ReleaseKept(s, {a.ino, a.block});
  }
}

TipManager::Ejection TipManager::CheapestKept(int64_t now) {
  Ejection best;
  best.cost = std::numeric_limits<double>::infinity();
  for (auto& [id, stream] : streams_) {
    HintStream* s = stream.get();
    // The block read again furthest ahead is the stream's cheapest: the cost falls with y.
    while (!s->kept_by_reuse.empty()) {
      const auto& [reuse_at, key] = *s->kept_by_reuse.rbegin();
      auto it = s->kept.find(key);
      const Block* b = buffers_->FindBlock(key.first, key.second);
      if (it == s->kept.end() || b == nullptr || b->id != it->second.block_id) {
        // The data path dropped the block (a write, a truncation, a failed fetch): forget it.
        if (it != s->kept.end()) s->kept.erase(it);
        s->kept_by_reuse.erase(std::prev(s->kept_by_reuse.end()));
        continue;
      }
      const HintStream::KeptBlock& kept = it->second;
      if (!b->valid() || b->hint_refs != 1) break;  // in flight, or held by another hint too
      const uint64_t y = reuse_at > s->popped() ? reuse_at - s->popped() + 1 : 1;
      const double cost =
          EjectCost(events_.DiskNanos(b->disk), AppNanos(s), events_.DriverNanos(), y) *
          Accuracy(s->owner(), kept.source) * AccessRate(s, now);
      if (cost < best.cost) {
        best = Ejection{s, 0, cost, true, key};
      }
      break;
    }
  }
  return best;
}

}  // namespace tipfs::cache
