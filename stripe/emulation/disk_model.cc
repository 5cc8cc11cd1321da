#include "stripe/emulation/disk_model.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <tuple>

namespace tipfs::stripe {

DiskModel::DiskModel(const DiskModelConfig& config, int64_t now)
    : config_(config), now_(now), stats_since_(now) {}

void DiskModel::AccrueTo(int64_t t) {
  if (t <= now_) return;
  depth_area_ += static_cast<double>(depth()) * static_cast<double>(t - now_);
  now_ = t;
}

void DiskModel::Submit(const ModelRequest& request, int64_t arrival,
                       std::vector<ModelStart>* started) {
  AdvanceTo(arrival, started);  // afterwards now_ >= arrival; a late arrival counts from now_
  const uint64_t seq = next_seq_++;
  switch (request.kind) {
    case DiskRequest::Kind::kSync:
      ++stats_.syncs;
      syncs_.push_back(PendingSync{request, now_, seq});
      ReleaseSyncs(started);
      return;
    case DiskRequest::Kind::kRead:
      ++stats_.reads;
      stats_.bytes_read += request.length;
      break;
    case DiskRequest::Kind::kWrite:
      ++stats_.writes;
      stats_.bytes_written += request.length;
      break;
  }
  queue_.push_back(Queued{request, now_, seq});
  stats_.max_queue_depth = std::max(stats_.max_queue_depth, depth());
  AdvanceTo(now_, started);
}

void DiskModel::AdvanceTo(int64_t t, std::vector<ModelStart>* started) {
  while (true) {
    if (busy_ && in_service_.finish <= t) {
      AccrueTo(in_service_.finish);
      busy_ = false;
      ReleaseSyncs(started);
      continue;
    }
    if (!busy_ && !queue_.empty()) {
      int64_t start = now_;
      if (has_started_) start = std::max(start, last_start_ + config_.gap_ns);
      if (start <= t) {
        AccrueTo(start);
        StartNext(start, started);
        continue;
      }
    }
    break;
  }
  AccrueTo(t);
}

int64_t DiskModel::NextEventTime() const {
  if (busy_) return in_service_.finish;
  if (queue_.empty()) return -1;
  return has_started_ ? std::max(now_, last_start_ + config_.gap_ns) : now_;
}

size_t DiskModel::PickNext() const {
  bool demand_only = false;
  if (config_.demand_first) {
    demand_only = std::any_of(queue_.begin(), queue_.end(), [](const Queued& q) {
      return q.request.priority == DiskRequest::Priority::kDemand;
    });
  }
  auto eligible = [demand_only](const Queued& q) {
    return !demand_only || q.request.priority == DiskRequest::Priority::kDemand;
  };
  size_t best = queue_.size();
  if (config_.queue == QueuePolicy::kFifo) {
    // queue_ is kept in arrival order.
    for (size_t i = 0; i < queue_.size(); ++i) {
      if (eligible(queue_[i])) return i;
    }
    return best;
  }
  // C-LOOK: the lowest position at or beyond the head; when none is left ahead, wrap to the lowest.
  auto key = [](const Queued& q) {
    return std::make_tuple(q.request.object, q.request.offset, q.seq);
  };
  size_t lowest = queue_.size();
  for (size_t i = 0; i < queue_.size(); ++i) {
    const Queued& q = queue_[i];
    if (!eligible(q)) continue;
    if (lowest == queue_.size() || key(q) < key(queue_[lowest])) lowest = i;
    bool ahead = !has_head_ || std::make_pair(q.request.object, q.request.offset) >=
                                   std::make_pair(head_object_, head_offset_);
    if (ahead && (best == queue_.size() || key(q) < key(queue_[best]))) best = i;
  }
  return best != queue_.size() ? best : lowest;
}

void DiskModel::StartNext(int64_t start, std::vector<ModelStart>* started) {
  const size_t index = PickNext();
  const Queued q = queue_[index];
  queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(index));

  const ModelRequest& r = q.request;
  const bool sequential = has_head_ && r.object == head_object_ && r.offset == head_offset_;
  const int64_t positioning =
      sequential ? 0
                 : std::llround(config_.slowdown * static_cast<double>(config_.PositioningNanos()));
  const int64_t transfer =
      std::llround(config_.slowdown * static_cast<double>(config_.TransferNanos(r.length)));
  const int64_t finish = start + positioning + transfer;

  busy_ = true;
  in_service_ = InService{q.seq, finish};
  has_head_ = true;
  head_object_ = r.object;
  head_offset_ = r.offset + r.length;
  has_started_ = true;
  last_start_ = start;

  ++stats_.started;
  ++(sequential ? stats_.sequential : stats_.positioned);
  stats_.busy_ns += finish - start;
  stats_.queue_wait_ns += start - q.arrival;

  started->push_back(ModelStart{r.id, q.arrival, start, finish, finish + config_.latency_ns,
                                positioning, transfer, sequential});
}

void DiskModel::ReleaseSyncs(std::vector<ModelStart>* started) {
  if (syncs_.empty()) return;
  uint64_t oldest_outstanding = UINT64_MAX;
  if (busy_) oldest_outstanding = in_service_.seq;
  for (const Queued& q : queue_) oldest_outstanding = std::min(oldest_outstanding, q.seq);
  auto cleared = [&](const PendingSync& s) { return s.seq < oldest_outstanding; };
  for (const PendingSync& s : syncs_) {
    if (!cleared(s)) continue;
    started->push_back(ModelStart{s.request.id, s.arrival, now_, now_, now_ + config_.latency_ns, 0,
                                  0, false, true});
  }
  std::erase_if(syncs_, cleared);
}

DiskStats DiskModel::Stats(int64_t now) const {
  DiskStats s = stats_;
  const int64_t end = std::max(now, now_);
  const double area = depth_area_ + static_cast<double>(depth()) * static_cast<double>(end - now_);
  s.queue_depth = depth();
  s.elapsed_ns = end - stats_since_;
  s.avg_queue_depth = s.elapsed_ns > 0 ? area / static_cast<double>(s.elapsed_ns) : 0;
  return s;
}

void DiskModel::ResetStats() {
  stats_ = DiskStats{};
  stats_.max_queue_depth = depth();
  stats_since_ = now_;
  depth_area_ = 0;
}

}  // namespace tipfs::stripe
