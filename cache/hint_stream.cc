#include "cache/hint_stream.h"

#include <algorithm>

namespace tipfs::cache {

const char* HintSourceName(HintSource source) {
  switch (source) {
    case HintSource::kManual:
      return "manual";
    case HintSource::kSpeculative:
      return "speculative";
    case HintSource::kWarmup:
      return "warmup";
    case HintSource::kHistory:
      return "history";
    case HintSource::kSpeculativeTainted:
      return "speculative_tainted";
  }
  return "unknown";
}

uint64_t StreamRelease::dropped_accesses() const {
  uint64_t n = dropped.size();
  for (uint64_t c : unexpanded_dropped) n += c;
  return n;
}

void StreamRelease::Clear() {
  consumed.clear();
  dropped.clear();
  unexpanded_dropped.fill(0);
}

HintStream::HintStream(uint64_t id, uint32_t owner, uint32_t block_size, int64_t now_ns)
    : id_(id),
      owner_(owner),
      block_size_(block_size),
      created_ns_(now_ns),
      last_activity_ns_(now_ns) {}

uint64_t HintStream::BlocksOf(const HintSegment& s, uint32_t block_size) {
  if (s.length == 0) return 0;
  return (s.offset + s.length - 1) / block_size - s.offset / block_size + 1;
}

void HintStream::Append(const HintSegment& segment) {
  if (segment.length == 0) return;
  pending_.push_back(segment);
  IndexSegment(segment.ino, segment.offset, segment.offset + segment.length, +1);
  AddOutstanding(segment.source, static_cast<int64_t>(segment.length));
  last_appended_ = segment;
}

bool HintStream::LastAppendedCovers(uint64_t ino, uint64_t offset, uint64_t length) const {
  if (last_appended_.length == 0 || outstanding_bytes_ == 0 || last_appended_.ino != ino) {
    return false;
  }
  return offset >= last_appended_.offset &&
         offset + length <= last_appended_.offset + last_appended_.length;
}

bool HintStream::HoldsBlock(uint64_t ino, uint64_t block) const {
  if (!indexed_) {
    indexed_ = true;
    RebuildIndexes();
  }
  if (expanded_blocks_.contains({ino, block})) return true;
  auto file = pending_by_ino_.find(ino);
  if (file == pending_by_ino_.end()) return false;
  const uint64_t begin = block * block_size_;
  const uint64_t end = begin + block_size_;
  // A range that ends after `begin` starts after begin - longest.
  const uint64_t from = begin > file->second.longest ? begin - file->second.longest : 0;
  const auto& ranges = file->second.ranges;
  for (auto it = ranges.lower_bound({from, 0}); it != ranges.end() && it->first < end; ++it) {
    if (it->second > begin) return true;
  }
  return false;
}

size_t HintStream::IndexOf(uint64_t ino, uint64_t block, size_t limit) const {
  size_t index = 0;
  for (; index < accesses_.size() && index < limit; ++index) {
    if (accesses_[index].ino == ino && accesses_[index].block == block) return index;
  }
  size_t steps = 0;
  for (const HintSegment& s : pending_) {
    if (index >= limit || steps++ >= limit) break;
    const uint64_t first = s.offset / block_size_;
    const uint64_t blocks = BlocksOf(s, block_size_);
    if (s.ino == ino && block >= first && block < first + blocks) {
      index += block - first;
      return index < limit ? index : kNotFound;
    }
    index += blocks;
  }
  return kNotFound;
}

void HintStream::IndexAccess(const HintedAccess& a, int sign) const {
  if (!indexed_) return;
  if (sign > 0) {
    ++expanded_blocks_[{a.ino, a.block}];
    return;
  }
  auto it = expanded_blocks_.find({a.ino, a.block});
  if (it != expanded_blocks_.end() && --it->second == 0) expanded_blocks_.erase(it);
}

void HintStream::IndexSegment(uint64_t ino, uint64_t offset, uint64_t end, int sign) const {
  if (!indexed_) return;
  if (sign > 0) {
    PendingIndex& file = pending_by_ino_[ino];
    file.ranges.emplace(offset, end);
    file.longest = std::max(file.longest, end - offset);
    return;
  }
  auto file = pending_by_ino_.find(ino);
  if (file == pending_by_ino_.end()) return;
  auto it = file->second.ranges.find({offset, end});
  if (it != file->second.ranges.end()) file->second.ranges.erase(it);
  if (file->second.ranges.empty()) pending_by_ino_.erase(file);
}

void HintStream::RebuildIndexes() const {
  if (!indexed_) return;
  expanded_blocks_.clear();
  pending_by_ino_.clear();
  for (const HintedAccess& a : accesses_) IndexAccess(a, +1);
  for (const HintSegment& s : pending_) IndexSegment(s.ino, s.offset, s.offset + s.length, +1);
}

void HintStream::AddOutstanding(HintSource source, int64_t bytes) {
  outstanding_bytes_ += bytes;
  outstanding_by_source_[static_cast<size_t>(source)] += bytes;
}

void HintStream::Expand(size_t count) {
  while (accesses_.size() < count && !pending_.empty()) {
    HintSegment& s = pending_.front();
    const uint64_t ino = s.ino;
    const uint64_t unexpanded_from = s.offset;
    const uint64_t segment_end = s.offset + s.length;
    const uint64_t block = s.offset / block_size_;
    const uint64_t block_end = (block + 1) * block_size_;
    const uint64_t end = std::min(s.offset + s.length, block_end);
    HintedAccess a;
    a.ino = s.ino;
    a.block = block;
    a.begin = s.offset;
    a.end = end;
    a.file_size = s.file_size;
    a.epoch = s.epoch;
    a.source = s.source;
    s.length -= end - s.offset;
    s.offset = end;
    a.last_of_segment = s.length == 0;
    IndexSegment(ino, unexpanded_from, segment_end, -1);
    if (a.last_of_segment) {
      ++expanded_segment_ends_;
      pending_.pop_front();
    } else {
      IndexSegment(ino, end, segment_end, +1);
    }
    accesses_.push_back(a);
    IndexAccess(a, +1);
  }
}

void HintStream::Account(const HintedAccess& a, int sign) {
  // Removing an access: its unread bytes leave the outstanding total, its segment end the count.
  if (sign < 0) {
    AddOutstanding(a.source, -static_cast<int64_t>(a.end - a.begin));
    if (a.last_of_segment) --expanded_segment_ends_;
  }
}

void HintStream::PopFront(bool consumed, StreamRelease* release) {
  HintedAccess a = accesses_.front();
  accesses_.pop_front();
  ++popped_;
  IndexAccess(a, -1);
  if (cursor_ > 0) --cursor_;
  Account(a, -1);
  if (consumed) {
    ++blocks_consumed;
    release->consumed.push_back(a);
  } else {
    release->dropped.push_back(a);
  }
}

void HintStream::ConsumeAt(size_t index, StreamRelease* release) {
  HintedAccess a = accesses_[index];
  accesses_.erase(accesses_.begin() + static_cast<std::ptrdiff_t>(index));
  ++popped_;
  IndexAccess(a, -1);
  if (cursor_ > index) --cursor_;
  Account(a, -1);
  ++blocks_consumed;
  release->consumed.push_back(a);
}

void HintStream::ConsumeFrom(size_t index, uint64_t ino, uint64_t offset, uint64_t end,
                             int64_t now_ns, StreamRelease* release) {
  while (true) {
    if (index >= accesses_.size()) Expand(index + 1);
    if (index >= accesses_.size()) break;
    HintedAccess& a = accesses_[index];
    if (a.ino != ino || offset >= a.end || end <= a.begin) break;
    a.consumed_any = true;
    has_last_ = true;
    last_ino_ = ino;
    last_block_ = a.block;
    if (end >= a.end) {
      ConsumeAt(index, release);
    } else {
      // Partly read: the block stays hinted until its last hinted byte has been read.
      AddOutstanding(a.source, -static_cast<int64_t>(end - a.begin));
      a.begin = end;
      break;
    }
  }
  mismatches_ = 0;
  last_activity_ns_ = now_ns;
}

bool HintStream::IsReread(uint64_t ino, uint64_t offset, uint64_t end) const {
  return has_last_ && last_ino_ == ino && offset / block_size_ <= last_block_ &&
         (end - 1) / block_size_ >= last_block_;
}

HintStream::MatchResult HintStream::Match(uint64_t ino, uint64_t offset, uint64_t length,
                                          int64_t now_ns, StreamRelease* release) {
  const uint64_t end = offset + length;
  Expand(kMatchLookahead);
  size_t found = accesses_.size();
  for (size_t i = 0; i < std::min(accesses_.size(), kMatchLookahead); ++i) {
    const HintedAccess& a = accesses_[i];
    if (a.ino == ino && offset < a.end && end > a.begin) {
      found = i;
      break;
    }
  }
  if (found == accesses_.size()) {
    if (IsReread(ino, offset, end)) return MatchResult::kNeutral;
    ++mismatches_;
    return MatchResult::kMismatch;
  }
  for (size_t i = 0; i < found; ++i) PopFront(/*consumed=*/false, release);
  ConsumeFrom(0, ino, offset, end, now_ns, release);
  return MatchResult::kMatched;
}

HintStream::MatchResult HintStream::MatchAnyOrder(uint64_t ino, uint64_t offset, uint64_t length,
                                                  int64_t now_ns, StreamRelease* release) {
  const uint64_t end = offset + length;
  Expand(kSharedMatchWindow);
  const size_t window = std::min(accesses_.size(), kSharedMatchWindow);
  for (size_t i = 0; i < window; ++i) {
    const HintedAccess& a = accesses_[i];
    if (a.ino == ino && offset < a.end && end > a.begin) {
      ConsumeFrom(i, ino, offset, end, now_ns, release);
      return MatchResult::kMatched;
    }
  }
  if (IsReread(ino, offset, end)) return MatchResult::kNeutral;
  ++mismatches_;
  return MatchResult::kMismatch;
}

template <typename Pred>
void HintStream::DropIf(Pred pred, StreamRelease* release) {
  std::deque<HintedAccess> kept;
  for (HintedAccess& a : accesses_) {
    if (pred(a.ino, a.epoch, a.source)) {
      Account(a, -1);
      ++popped_;
      release->dropped.push_back(a);
    } else {
      kept.push_back(a);
    }
  }
  accesses_.swap(kept);
  std::deque<HintSegment> kept_segments;
  for (HintSegment& s : pending_) {
    if (pred(s.ino, s.epoch, s.source)) {
      AddOutstanding(s.source, -static_cast<int64_t>(s.length));
      release->unexpanded_dropped[static_cast<size_t>(s.source)] += BlocksOf(s, block_size_);
    } else {
      kept_segments.push_back(s);
    }
  }
  pending_.swap(kept_segments);
  RebuildIndexes();
  last_appended_.length = 0;  // it may be among the dropped
  cursor_ = 0;
  AdvanceCursor();
}

void HintStream::CancelAll(StreamRelease* release) {
  DropIf([](uint64_t, uint32_t, HintSource) { return true; }, release);
}

void HintStream::CancelEpoch(uint32_t epoch, bool tainted_only, StreamRelease* release) {
  DropIf(
      [epoch, tainted_only](uint64_t, uint32_t e, HintSource source) {
        return e == epoch && (!tainted_only || source == HintSource::kSpeculativeTainted);
      },
      release);
}

void HintStream::RemoveInode(uint64_t ino, StreamRelease* release) {
  DropIf([ino](uint64_t i, uint32_t, HintSource) { return i == ino; }, release);
  if (has_last_ && last_ino_ == ino) has_last_ = false;
}

void HintStream::PopDoneFront(StreamRelease* release) {
  while (!accesses_.empty() && accesses_.front().state == HintedAccess::State::kDone) {
    PopFront(/*consumed=*/true, release);
  }
}

void HintStream::AdvanceCursor() {
  while (cursor_ < accesses_.size() && accesses_[cursor_].state != HintedAccess::State::kPending) {
    ++cursor_;
  }
}

}  // namespace tipfs::cache
