#include "cache/tip_model.h"

#include <algorithm>
#include <cmath>

namespace tipfs::cache {

double PrefetchHorizon(double t_disk, double t_app) {
  return t_disk / std::max(t_app, kMinAppNanos);
}

double PrefetchBenefit(double t_disk, double t_app, uint64_t x) {
  if (x == 0) return 0;
  const double app = std::max(t_app, kMinAppNanos);
  const double first = std::min(app, t_disk);
  const double horizon = PrefetchHorizon(t_disk, t_app);
  if (horizon < 2) return x == 1 ? first : 0;
  const double second = t_disk / 2;
  if (x <= 2) return std::max(first, (first + second) / 2);
  const double depth = static_cast<double>(x);
  if (depth > horizon) return 0;
  return t_disk / (depth * (depth - 1.0));
}

double EjectCost(double t_disk, double t_app, double t_driver, uint64_t y) {
  const double horizon = PrefetchHorizon(t_disk, t_app);
  const double ahead = static_cast<double>(y);
  const double stall = std::max(0.0, t_disk - ahead * std::max(t_app, kMinAppNanos));
  return (t_driver + stall) / std::max(1.0, ahead - horizon);
}

double LruShrinkCost(double marginal_hit_ratio, double t_miss_minus_hit) {
  return marginal_hit_ratio * t_miss_minus_hit;
}

double DecayingRate::Decayed(int64_t now_ns) const {
  if (sum_ == 0 || now_ns <= last_ns_) return sum_;
  const double halvings = static_cast<double>(now_ns - last_ns_) / half_life_ns_;
  return sum_ * std::exp2(-halvings);
}

void DecayingRate::Add(int64_t now_ns, double events) {
  sum_ = Decayed(now_ns) + events;
  last_ns_ = std::max(last_ns_, now_ns);
}

double DecayingRate::Sum(int64_t now_ns) const { return Decayed(now_ns); }

double DecayingRate::Rate(int64_t now_ns) const {
  return Decayed(now_ns) * std::log(2.0) * 1e9 / static_cast<double>(half_life_ns_);
}

void DiskServiceEstimator::RecordCompletion(int64_t submit_ns, int64_t complete_ns, bool found_idle,
                                            bool ok) {
  if (in_flight_ > 0) --in_flight_;
  const int64_t start = std::max(submit_ns, last_completion_ns_);
  last_completion_ns_ = std::max(last_completion_ns_, complete_ns);
  if (!ok) return;
  if (found_idle) {
    idle_.Add(static_cast<double>(std::max<int64_t>(0, complete_ns - submit_ns)));
    ++idle_samples_;
    since_idle_sample_ = 0;
  } else {
    queued_.Add(static_cast<double>(std::max<int64_t>(0, complete_ns - start)));
    ++queued_samples_;
    ++since_idle_sample_;
  }
}

double DiskServiceEstimator::nanos() const {
  if (since_idle_sample_ >= kStaleCompletions || (idle_samples_ == 0 && queued_samples_ > 0)) {
    return queued_.value();
  }
  return idle_.value();
}

double LruMarginalEstimator::MarginalHitsPerSecond(int64_t now_ns, uint64_t tail_buffers,
                                                   uint64_t ghost_slots) const {
  double per_buffer = 0;
  int parts = 0;
  if (tail_buffers > 0) {
    per_buffer += tail_hits_.Rate(now_ns) / static_cast<double>(tail_buffers);
    ++parts;
  }
  if (ghost_slots > 0) {
    per_buffer += ghost_hits_.Rate(now_ns) / static_cast<double>(ghost_slots);
    ++parts;
  }
  return parts == 0 ? 0 : per_buffer / parts;
}

double LruMarginalEstimator::MarginalHitRatio(int64_t now_ns, uint64_t tail_buffers,
                                              uint64_t ghost_slots) const {
  const double accesses = accesses_.Rate(now_ns);
  if (accesses <= 0) return 0;
  return MarginalHitsPerSecond(now_ns, tail_buffers, ghost_slots) / accesses;
}

void AccuracyEstimator::Add(double used, double unused) {
  used_ += used;
  unused_ += unused;
  if (used_ + unused_ > window_) {
    used_ /= 2;
    unused_ /= 2;
  }
}

}  // namespace tipfs::cache
