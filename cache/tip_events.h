// TipEvents: what the cache's data path measures for the TIP manager, and the estimators those
// measurements feed (T_cpu per reader, T_hit, T_driver, T_disk per disk, the LRU queue's marginal
// hits). The data path records; the manager reads. Recording never takes a lock the manager
// holds across a decision, and a read (ReadStarted, RecordLru, RecordHit) takes no lock that
// every reader of the volume takes (issue 11): its process's shard of the reader timings, its
// thread's shard of the LRU events, atomic adds. The manager folds the shards when it reads.
// Locks: `mu_` (disks, the folded estimators), then an LruShard's `mu` (the fold takes them
// under mu_); a ReaderShard's `mu` alone. Leaves: nothing else is locked under any of them.
//
// Thread-safety: every method may be called from any thread, under any cache lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "cache/tip_model.h"
#include "util/mutex.h"

namespace tipfs::cache {

// Per reading process (tgid): the gap between the end of one of its reads and the start of the
// next is its compute time (TIP's T_cpu, per block access). A read in flight holds a shared
// pointer and stamps its end without any lock.
struct ReaderTiming {
  uint32_t tgid = 0;
  // Changed only under the mutex of its TipEvents::ReaderShard (a lock the analysis cannot name
  // from here).
  Ewma cpu_per_access{0.125, 0};  // nanoseconds per block access
  int64_t last_start_ns = 0;
  std::atomic<int64_t> last_end_ns{0};
};

// What one read did to the LRU queue: the LRU accesses it made (hits on LRU blocks and misses),
// how many of the hits fell in the queue's tail window, and how many misses were ghost hits.
struct LruEvents {
  uint32_t accesses = 0;
  uint32_t tail_hits = 0;
  uint32_t ghost_hits = 0;
};

class TipEvents {
 public:
  TipEvents(uint32_t disk_count, double initial_disk_nanos);
  TipEvents(const TipEvents&) = delete;
  TipEvents& operator=(const TipEvents&) = delete;

  // ---- Recorded by the data path ----
  // A demand read by `tgid` starting at `now` that touches `accesses` blocks. Returns the
  // reader's timing, for ReadFinished.
  std::shared_ptr<ReaderTiming> ReadStarted(uint32_t tgid, int64_t now, uint64_t accesses);
  static void ReadFinished(ReaderTiming* reader, int64_t end_ns) {
    if (reader != nullptr) reader->last_end_ns.store(end_ns, std::memory_order_relaxed);
  }
  void RecordLru(int64_t now, const LruEvents& events);
  // A read served from memory: `nanos` of service for `blocks` block accesses (T_hit).
  void RecordHit(int64_t nanos, uint64_t blocks) {
    hit_nanos_sum_.fetch_add(nanos, std::memory_order_relaxed);
    hit_blocks_sum_.fetch_add(blocks, std::memory_order_relaxed);
  }
  // CPU time spent on sampled disk reads (T_driver): `nanos` of one stage of a read (allocation,
  // submission, completion), `fetches` = 1 with the last stage of each.
  void RecordDriver(int64_t nanos, uint64_t fetches) {
    driver_nanos_sum_.fetch_add(nanos, std::memory_order_relaxed);
    if (fetches > 0) driver_count_.fetch_add(fetches, std::memory_order_relaxed);
  }
  // A read is submitted to `disk`: returns whether it found the disk idle (for RecordFetchDone).
  bool RecordSubmit(uint32_t disk);
  // That read, submitted at `submit_ns`, finished at `complete_ns` (`ok`: successfully).
  void RecordFetchDone(uint32_t disk, int64_t submit_ns, int64_t complete_ns, bool found_idle,
                       bool ok);

  // ---- Read by the manager ----
  // T_cpu of `tgid` (0 when it never read), whether it was measured, its last read's start.
  double CpuNanos(uint32_t tgid) const;
  bool HasCpuSample(uint32_t tgid) const;
  int64_t LastStartNanos(uint32_t tgid) const;
  double HitNanos() const;
  double DriverNanos() const;
  double DiskNanos(uint32_t disk) const;
  double MeanDiskNanos() const;
  double SlowestDiskNanos() const;
  std::vector<double> AllDiskNanos() const;
  // Every disk's estimator, for the statistics.
  std::vector<DiskServiceEstimator> DiskEstimators() const;
  double LruMarginalHitsPerSecond(int64_t now, uint64_t tail_buffers, uint64_t ghost_slots) const;
  double LruMarginalHitRatio(int64_t now, uint64_t tail_buffers, uint64_t ghost_slots) const;

 private:
  // Reader timings by tgid. Sharded so that a read takes a lock only readers of processes with
  // the same tgid % kReaderShards share (64 consecutive pids never do), not one every reader takes:
  // with one map under mu_, every hit of every process met on mu_.
  static constexpr size_t kReaderShards = 64;
  struct alignas(64) ReaderShard {
    Mutex mu;  // a leaf
    std::unordered_map<uint32_t, std::shared_ptr<ReaderTiming>> readers GUARDED_BY(mu);
  };
  ReaderShard& ShardOf(uint32_t tgid) const { return reader_shards_[tgid % kReaderShards]; }
  // LRU events not yet folded into lru_marginal_, per recording thread (threads take shards in
  // turn; RecordLru is not told the reader). Each kind is a decaying sum like the estimator's
  // own (same half-life, LruMarginalEstimator's default), so folding a shard's sums at `now`
  // into the estimator gives what recording each event there would have given.
  static constexpr size_t kLruShards = 64;
  struct alignas(64) LruShard {
    Mutex mu;  // a leaf
    DecayingRate accesses GUARDED_BY(mu);
    DecayingRate tail_hits GUARDED_BY(mu);
    DecayingRate ghost_hits GUARDED_BY(mu);
    bool any GUARDED_BY(mu) = false;
  };
  void FoldCpuSamples() const REQUIRES(mu_);
  void FoldLru(int64_t now) const REQUIRES(mu_);

  const uint32_t disk_count_;

  mutable std::array<ReaderShard, kReaderShards> reader_shards_;
  mutable std::array<LruShard, kLruShards> lru_shards_;
  // Set after an event is recorded in a shard, cleared by the fold before it reads the shards:
  // a fold with nothing to fold takes no shard lock.
  mutable std::atomic<bool> lru_pending_{false};

  mutable Mutex mu_;  // a leaf: nothing is locked under it
  std::vector<DiskServiceEstimator> disks_ GUARDED_BY(mu_);
  mutable LruMarginalEstimator lru_marginal_ GUARDED_BY(mu_);  // folded from lru_shards_
  // Folded from the sums below whenever they are read.
  mutable Ewma t_hit_ GUARDED_BY(mu_){0.125, 0};
  mutable Ewma t_driver_ GUARDED_BY(mu_){0.125, 0};

  mutable std::atomic<int64_t> hit_nanos_sum_{0};
  mutable std::atomic<uint64_t> hit_blocks_sum_{0};
  mutable std::atomic<int64_t> driver_nanos_sum_{0};
  mutable std::atomic<uint64_t> driver_count_{0};
};

}  // namespace tipfs::cache
