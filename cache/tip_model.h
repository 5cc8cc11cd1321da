// TIP model: the cost-benefit formulas of informed prefetching and caching and the online
// estimators that feed them. Pure values and arithmetic; no locks (their owners lock around
// every use). Times are nanoseconds, as doubles where they enter formulas.
//
// Source: R. H. Patterson, G. A. Gibson, E. Ginting, D. Stodolsky, J. Zelenka, "Informed
// Prefetching and Caching", SOSP 1995, section 4 (the cost-benefit model); several processes:
// A. Tomkins, R. H. Patterson, G. Gibson, "Informed Multi-Process Prefetching and Caching",
// SIGMETRICS 1997 (TIP2). The symbols follow the paper:
//   T_hit    CPU time to serve one block access from the cache
//   T_driver CPU time to issue one disk read
//   T_disk   disk access time of one block read
//   T_cpu    application compute time between block accesses
//   T_miss   = T_hit + T_driver + T_disk, the cost of a demand miss
// Units of a decision: every benefit and cost is "time per access" in the paper; with several
// consumers (TIP2) it is multiplied by the access rate of the consumer it concerns, giving
// "nanoseconds saved (or lost) per second", which is comparable across streams and the LRU queue.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>

namespace tipfs::cache {

// Floors that keep the horizon finite when a clock measures nothing (a FakeClock reads the same
// time before and after a hit) — a real T_hit + T_driver is never below a microsecond.
constexpr double kMinAppNanos = 1000.0;

// Prefetch horizon P = T_disk / (T_cpu + T_hit + T_driver) (Patterson 1995, §4.1): prefetching
// deeper than P accesses ahead cannot reduce stall further, because a prefetch issued P accesses
// ahead completes before it is needed.
double PrefetchHorizon(double t_disk, double t_app);

// Benefit of a buffer used to prefetch the hinted block needed x accesses ahead, per access
// (Patterson 1995, §4.1). The stall per access when prefetching x deep is
// T_stall(x) = max(0, T_disk/x - T_app), and without prefetching (x = 0) a read stalls for T_disk.
// So the first buffer saves T_stall(0) - T_stall(1) = min(T_app, T_disk): it only overlaps one
// access's computation with the disk. Deepening from x-1 to x saves T_disk/(x(x-1)) for
// 1 < x <= P, and nothing beyond P.
// That curve is not concave: for P > 2 the second buffer (T_disk/2) is worth more than the first
// (T_app). The exchange is greedy and offers a stream's accesses in order, so the first buffer
// would be refused wherever one LRU buffer is worth more than T_app, and the stream would never
// reach the second. The two are therefore valued together, each at their mean
// (T_app + T_disk/2) / 2, the concave envelope of the curve: a greedy allocation over concave
// benefits is optimal, and the pair's total is exactly the paper's. x = 0 is worth 0.
double PrefetchBenefit(double t_disk, double t_app, uint64_t x);

// Cost of ejecting a hinted block needed y accesses ahead, per access (Patterson 1995, §4.3):
// re-fetching it later costs T_driver plus, when y <= P, the stall T_disk - y*T_app that a
// prefetch issued now would still leave; the buffer is freed for the y - P accesses until the
// block must be prefetched again, so the cost is spread over them (at least one).
double EjectCost(double t_disk, double t_app, double t_driver, uint64_t y);

// Cost of shrinking the LRU queue by one buffer, per access (Patterson 1995, §4.2):
// (H(n) - H(n-1)) * (T_miss - T_hit), with the marginal hit ratio H(n) - H(n-1) given.
double LruShrinkCost(double marginal_hit_ratio, double t_miss_minus_hit);

// Exponentially weighted moving average; the first sample is taken as is.
class Ewma {
 public:
  explicit Ewma(double alpha = 0.125, double initial = 0) : alpha_(alpha), value_(initial) {}
  void Add(double sample) {
    value_ = has_sample_ ? value_ + alpha_ * (sample - value_) : sample;
    has_sample_ = true;
  }
  // Adds `sample` clipped to `max_ratio` times the current value (once there is one): a lone
  // outlier, such as a thread preempted on a busy machine, moves the average by at most
  // alpha * (max_ratio - 1) of itself, while a lasting change still gets through in a few
  // samples (a factor of 1 + alpha * (max_ratio - 1) per sample).
  void AddClipped(double sample, double max_ratio) {
    if (has_sample_ && value_ > 0 && sample > max_ratio * value_) sample = max_ratio * value_;
    Add(sample);
  }
  double value() const { return value_; }
  bool has_sample() const { return has_sample_; }

 private:
  double alpha_;
  double value_;
  bool has_sample_ = false;
};

// Events per second with exponential time decay: each event adds one; the sum decays with a
// half-life. In steady state the sum is rate * half_life / ln 2, so Rate() returns
// sum * ln 2 / half_life.
class DecayingRate {
 public:
  explicit DecayingRate(int64_t half_life_ns = 1'000'000'000) : half_life_ns_(half_life_ns) {}
  void Add(int64_t now_ns, double events = 1.0);
  double Rate(int64_t now_ns) const;  // events per second
  double Sum(int64_t now_ns) const;   // the decayed sum

 private:
  double Decayed(int64_t now_ns) const;
  int64_t half_life_ns_;
  double sum_ = 0;
  int64_t last_ns_ = 0;
};

// T_disk of one disk: the paper's disk access time, the latency of one read that did not wait
// for another (Patterson 1995, §4: T_disk is what a demand miss stalls for beyond T_hit and
// T_driver on an idle disk). Measured on the reads that found the disk with none of the cache's
// reads in flight: their latency is the access time whether the disk serves one request at a
// time or several at once. The former estimate, completion minus the later of submission and the
// previous completion, is exact for a disk serving one request at a time, but reads low (near
// zero for all but the first) on one serving several at once, such as an SSD or an OSD; it is
// kept as the queued estimate, shown in the statistics, and used only when the disk has not been
// idle for kStaleCompletions completions (a disk that never drains its queue still tracks a
// change of speed).
class DiskServiceEstimator {
 public:
  static constexpr uint64_t kStaleCompletions = 256;
  explicit DiskServiceEstimator(double initial_nanos)
      : idle_(0.125, initial_nanos), queued_(0.125, initial_nanos) {}
  // A read is submitted: returns whether it found the disk idle (pass it to RecordCompletion).
  bool RecordSubmit() { return in_flight_++ == 0; }
  // The read submitted at `submit_ns` finished at `complete_ns`; `ok` false: it failed, and
  // its timing says nothing about the disk.
  void RecordCompletion(int64_t submit_ns, int64_t complete_ns, bool found_idle, bool ok = true);
  double nanos() const;
  double idle_nanos() const { return idle_.value(); }
  double queued_nanos() const { return queued_.value(); }
  uint64_t samples() const { return idle_samples_ + queued_samples_; }
  uint64_t idle_samples() const { return idle_samples_; }
  uint64_t queued_samples() const { return queued_samples_; }
  uint32_t in_flight() const { return in_flight_; }

 private:
  Ewma idle_;
  Ewma queued_;
  int64_t last_completion_ns_ = 0;
  uint64_t idle_samples_ = 0;
  uint64_t queued_samples_ = 0;
  uint64_t since_idle_sample_ = 0;  // completions since the last idle sample
  uint32_t in_flight_ = 0;
};

// H(n) - H(n-1), the LRU queue's marginal hit ratio, estimated from hits near its end:
// hits on the last k buffers of the queue (positions n-k+1..n) and on ghost entries, the keys of
// the last k buffers evicted from it (positions n+1..n+k). Their rates per buffer, averaged,
// estimate the hits per second that one buffer at position n earns; divided by the rate of LRU
// accesses it is the marginal hit ratio. The rate form is what TIP2 compares across consumers.
class LruMarginalEstimator {
 public:
  explicit LruMarginalEstimator(int64_t half_life_ns = 1'000'000'000)
      : tail_hits_(half_life_ns), ghost_hits_(half_life_ns), accesses_(half_life_ns) {}

  void RecordAccess(int64_t now_ns, double n = 1) { accesses_.Add(now_ns, n); }
  void RecordTailHit(int64_t now_ns, double n = 1) { tail_hits_.Add(now_ns, n); }
  void RecordGhostHit(int64_t now_ns, double n = 1) { ghost_hits_.Add(now_ns, n); }

  // Hits per second one more (or one fewer) buffer at the end of the queue is worth, with
  // `tail_buffers` the buffers in the tail window (min(k, queue length)) and `ghost_slots` = k.
  double MarginalHitsPerSecond(int64_t now_ns, uint64_t tail_buffers, uint64_t ghost_slots) const;
  // H(n) - H(n-1): the above divided by LRU accesses per second (0 without accesses).
  double MarginalHitRatio(int64_t now_ns, uint64_t tail_buffers, uint64_t ghost_slots) const;

 private:
  DecayingRate tail_hits_;
  DecayingRate ghost_hits_;
  DecayingRate accesses_;
};

// Accuracy of one hint source: hinted block accesses consumed by a matching read, over those
// consumed plus those dropped unread (cancelled, skipped, retired). Starts from a prior of
// `prior_weight` accurate accesses so one early miss does not zero a source; counts are halved
// every `window` outcomes so the measure follows recent behaviour.
class AccuracyEstimator {
 public:
  explicit AccuracyEstimator(double prior_weight = 8, double window = 4096)
      : prior_(prior_weight), window_(window) {}
  void RecordUsed(double n = 1) { Add(n, 0); }
  void RecordUnused(double n = 1) { Add(0, n); }
  double accuracy() const { return WithPrior(1.0); }
  // The same with the prior's accesses accurate at `prior_accuracy` instead of all accurate: a
  // narrower estimator (one process's) that starts from a wider one's figure (its source's).
  double WithPrior(double prior_accuracy) const {
    return (used_ + prior_ * prior_accuracy) / (used_ + unused_ + prior_);
  }

 private:
  void Add(double used, double unused);
  double prior_;
  double window_;
  double used_ = 0;
  double unused_ = 0;
};

}  // namespace tipfs::cache
