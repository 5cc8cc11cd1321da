// FileCache's stream sharing: a hinter lets its descendants' reads consume one of its streams
// (fusefs decides who is a descendant of the same user; see docs/DESIGN.md "Which reads consume
// which hints"). A loader discloses its epoch's order on a shared stream and its worker
// processes, each reading its own batches at once, consume it in any order. Runs under mu_
// (REQUIRES: mu_ held) except the public entry points, which take it.
#include "cache/file_cache.h"
#include "cache/file_cache_internal.h"
#include "util/mutex.h"

namespace tipfs::cache {

namespace {
// As many as a process may have streams: each may be shared.
constexpr size_t kMaxSharedPerOwner = 64;
}  // namespace

Status FileCache::ShareStream(uint64_t stream, uint32_t owner, bool shared) {
  MutexLock lock(&mu_);
  if (!shared) {
    shared_streams_.erase(stream);
    return Status::OK();
  }
  if (shared_streams_.contains(stream)) return Status::OK();
  size_t marks = 0;
  for (const auto& [id, by] : shared_streams_) marks += by == owner;
  if (marks >= kMaxSharedPerOwner) {
    return Status::FromErrno(EDQUOT, "a process may share at most " +
                                         std::to_string(kMaxSharedPerOwner) + " hint streams");
  }
  shared_streams_.emplace(stream, owner);
  return Status::OK();
}

void FileCache::ForgetSharer(uint32_t owner) {
  {
    MutexLock lock(&mu_);
    std::erase_if(shared_streams_, [owner](const auto& entry) { return entry.second == owner; });
  }
  CancelProcess(owner);
}

bool FileCache::MatchSharedStreams(const ReadContext& ctx, uint64_t ino, uint64_t offset,
                                   uint64_t length, int64_t now) {
  if (shared_streams_.empty()) return false;
  const uint32_t reader = static_cast<uint32_t>(ctx.stream);
  const uint32_t owners[2] = {reader, ctx.shared_owner != reader ? ctx.shared_owner : 0};
  // A re-read of a block another shared stream consumed last (a stream from an earlier epoch)
  // must not hide the stream that hints the read: only a match ends the search.
  bool neutral = false;
  for (uint32_t owner : owners) {
    auto owner_it = owners_.find(owner);
    if (owner == 0 || owner_it == owners_.end()) continue;
    const std::vector<uint64_t> streams = owner_it->second.streams;  // retiring changes the list
    for (uint64_t id : streams) {
      if (!IsShared(id)) continue;
      HintStream* s = streams_.at(id).get();
      HintStream::MatchResult result = HintStream::MatchResult::kMismatch;
      uint64_t consumed = 0;
      MutateStreamWith(s, Release::kDropped, [&](StreamRelease* r) {
        result = s->MatchAnyOrder(ino, offset, length, now, r);
        consumed = r->consumed.size();
      });
      if (owner != reader) counters_.shared_consumed += consumed;
      if (result == HintStream::MatchResult::kMatched) return true;
      neutral |= result == HintStream::MatchResult::kNeutral;
      if (s->retire_due()) {
        DeleteStream(id, /*warmup=*/false, Release::kCancelled);
        ++counters_.streams_retired;
      }
    }
  }
  return neutral;
}

}  // namespace tipfs::cache
