// TipManager's stream sharing: a hinter lets its descendants' reads consume one of its streams
// (fusefs decides who is a descendant of the same user; see docs/DESIGN.md "Which reads consume
// which hints"). A loader discloses its epoch's order on a shared stream and its worker
// processes, each reading its own batches at once, consume it in any order. Runs under mu_ and
// FileCache::mu_ (REQUIRES: both held) except the public entry points, which take them.
#include <algorithm>

#include "cache/tip_manager.h"

namespace tipfs::cache {

namespace {
// As many as a process may have streams: each may be shared.
constexpr size_t kMaxSharedPerOwner = 64;
}  // namespace

Status TipManager::ShareStream(uint64_t stream, uint32_t owner, bool shared) {
  MutexLock lock(&mu_);
  if (!shared) {
    shared_streams_.erase(stream);
    return Status::OK();
  }
  if (shared_streams_.contains(stream)) return Status::OK();
  size_t marks = 0;
  for (const auto& [id, by] : shared_streams_) marks += by.owner == owner;
  if (marks >= kMaxSharedPerOwner) {
    return Status::FromErrno(EDQUOT, "a process may share at most " +
                                         std::to_string(kMaxSharedPerOwner) + " hint streams");
  }
  shared_streams_.emplace(stream, SharedStream{owner, {}});
  return Status::OK();
}

void TipManager::ForgetSharer(uint32_t owner) {
  {
    MutexLock lock(&mu_);
    std::erase_if(shared_streams_,
                  [owner](const auto& entry) { return entry.second.owner == owner; });
  }
  CancelProcess(owner);
}

bool TipManager::MatchSharedStreams(const ReadContext& ctx, uint64_t ino, uint64_t offset,
                                    uint64_t length, int64_t now) {
  if (shared_streams_.empty()) return false;
  const uint32_t reader = static_cast<uint32_t>(ctx.stream);
  const uint32_t owners[2] = {reader, ctx.shared_owner != reader ? ctx.shared_owner : 0};
  // A re-read of a block another shared stream consumed last (a stream from an earlier epoch)
  // must not hide the stream that hints the read: only a match ends the search.
  bool neutral = false;
  std::vector<uint64_t> retire;
  struct Match {
    HintStream* stream;
    uint64_t ino, offset, length;
    int64_t now;
    HintStream::MatchResult result;
    uint64_t consumed;
  } m{nullptr, ino, offset, length, now, HintStream::MatchResult::kMismatch, 0};
  for (uint32_t owner : owners) {
    auto owner_it = owners_.find(owner);
    if (owner == 0 || owner_it == owners_.end()) continue;
    for (uint64_t id : owner_it->second.streams) {
      if (!IsShared(id)) continue;
      m.stream = ListedStream(id);
      // One pointer captured: std::function keeps it inline (no allocation per read).
      MutateStreamWith(m.stream, Release::kDropped, [p = &m](StreamRelease* r) {
        p->result = p->stream->MatchAnyOrder(p->ino, p->offset, p->length, p->now, r);
        p->consumed = r->consumed.size();
      });
      if (owner != reader) counters_.shared_consumed += m.consumed;
      if (m.consumed > 0) NoteConsumer(id, reader);
      if (m.result == HintStream::MatchResult::kMatched) break;
      neutral |= m.result == HintStream::MatchResult::kNeutral;
      if (m.stream->retire_due()) retire.push_back(id);
    }
    if (m.result == HintStream::MatchResult::kMatched) break;
  }
  for (uint64_t id : retire) {
    DeleteStream(id, /*warmup=*/false, Release::kCancelled);
    ++counters_.streams_retired;
  }
  return neutral || m.result == HintStream::MatchResult::kMatched;
}

void TipManager::NoteConsumer(uint64_t stream, uint32_t reader) {
  auto it = shared_streams_.find(stream);
  if (it == shared_streams_.end()) return;
  std::vector<uint32_t>& consumers = it->second.consumers;
  if (consumers.size() < kMaxConsumers &&
      std::find(consumers.begin(), consumers.end(), reader) == consumers.end()) {
    consumers.push_back(reader);
  }
}

std::optional<double> TipManager::SharedAppNanos(const HintStream* s) const {
  if (!IsShared(s->id())) return std::nullopt;
  const std::vector<uint32_t>& consumers = ConsumersOf(s->id());
  // The consumers that read within the idle grace of the latest one work side by side (a
  // DataLoader's workers): each spends T_cpu + T_hit + T_driver per access, so together they
  // consume one access per that divided by their number.
  int64_t latest = 0;
  for (uint32_t c : consumers) latest = std::max(latest, events_.LastStartNanos(c));
  double per_access = 0;
  int active = 0;
  for (uint32_t c : consumers) {
    if (!events_.HasCpuSample(c) || latest - events_.LastStartNanos(c) > kIdleGraceNanos) continue;
    per_access += events_.CpuNanos(c) + events_.HitNanos() + events_.DriverNanos();
    ++active;
  }
  if (active == 0) return std::nullopt;
  return per_access / active / active;
}

}  // namespace tipfs::cache
