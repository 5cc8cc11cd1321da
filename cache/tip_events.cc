#include "cache/tip_events.h"

#include <algorithm>

namespace tipfs::cache {

namespace {

constexpr size_t kMaxReaders = 4096;
// A T_cpu sample counts for at most this many times the reader's current estimate.
constexpr double kCpuOutlierRatio = 4.0;

}  // namespace

TipEvents::TipEvents(uint32_t disk_count, double initial_disk_nanos)
    : disk_count_(disk_count), disks_(disk_count, DiskServiceEstimator(initial_disk_nanos)) {}

std::shared_ptr<ReaderTiming> TipEvents::ReadStarted(uint32_t tgid, int64_t now,
                                                     uint64_t accesses) {
  ReaderShard& shard = ShardOf(tgid);
  MutexLock lock(&shard.mu);
  auto it = shard.readers.find(tgid);
  if (it == shard.readers.end()) {
    // Bounded per shard (kMaxReaders in all): the longest idle reader of the shard goes.
    if (shard.readers.size() >= kMaxReaders / kReaderShards) {
      auto oldest = shard.readers.begin();
      for (auto r = shard.readers.begin(); r != shard.readers.end(); ++r) {
        if (r->second->last_start_ns < oldest->second->last_start_ns) oldest = r;
      }
      shard.readers.erase(oldest);
    }
    auto state = std::make_shared<ReaderTiming>();
    state->tgid = tgid;
    it = shard.readers.emplace(tgid, std::move(state)).first;
  }
  ReaderTiming* r = it->second.get();
  // T_cpu per block access: the gap before this read, spread over the blocks it touches (at
  // least one; hinted accesses are whole blocks or a file's only block).
  const int64_t last_end = r->last_end_ns.load(std::memory_order_relaxed);
  if (r->last_start_ns > 0 && last_end >= r->last_start_ns && now >= last_end) {
    // Clipped: one long gap (the reader preempted, or busy elsewhere once) must not collapse the
    // horizon for the next dozens of reads; a reader that really slows down still moves the
    // estimate up by 1 + 3/8 per read.
    r->cpu_per_access.AddClipped(
        static_cast<double>(now - last_end) / static_cast<double>(std::max<uint64_t>(1, accesses)),
        kCpuOutlierRatio);
  }
  r->last_start_ns = now;
  return it->second;
}

void TipEvents::RecordLru(int64_t now, const LruEvents& events) {
  if (events.accesses == 0 && events.tail_hits == 0 && events.ghost_hits == 0) return;
  // The thread's own shard: FUSE workers each get one while there are no more than kLruShards.
  static std::atomic<size_t> next_shard{0};
  thread_local const size_t mine = next_shard.fetch_add(1, std::memory_order_relaxed) % kLruShards;
  LruShard& shard = lru_shards_[mine];
  {
    MutexLock lock(&shard.mu);
    if (events.accesses > 0) shard.accesses.Add(now, events.accesses);
    if (events.tail_hits > 0) shard.tail_hits.Add(now, events.tail_hits);
    if (events.ghost_hits > 0) shard.ghost_hits.Add(now, events.ghost_hits);
    shard.any = true;
  }
  // After the shard's lock: a fold that cleared the flag before taking that lock either saw the
  // events or leaves the flag set here for the next fold. Loaded first so that readers do not
  // write the shared line while it is set.
  if (!lru_pending_.load(std::memory_order_relaxed)) lru_pending_.store(true);
}

void TipEvents::FoldLru(int64_t now) const {
  if (!lru_pending_.exchange(false)) return;
  for (LruShard& shard : lru_shards_) {
    MutexLock lock(&shard.mu);
    if (!shard.any) continue;
    // Decaying sums are linear: the shard's sum decayed to `now`, added at `now`, is the sum of
    // its events each decayed from its own time.
    lru_marginal_.RecordAccess(now, shard.accesses.Sum(now));
    lru_marginal_.RecordTailHit(now, shard.tail_hits.Sum(now));
    lru_marginal_.RecordGhostHit(now, shard.ghost_hits.Sum(now));
    shard.accesses = DecayingRate();
    shard.tail_hits = DecayingRate();
    shard.ghost_hits = DecayingRate();
    shard.any = false;
  }
}

bool TipEvents::RecordSubmit(uint32_t disk) {
  if (disk >= disk_count_) return false;
  MutexLock lock(&mu_);
  return disks_[disk].RecordSubmit();
}

void TipEvents::RecordFetchDone(uint32_t disk, int64_t submit_ns, int64_t complete_ns,
                                bool found_idle, bool ok) {
  if (disk >= disk_count_) return;
  MutexLock lock(&mu_);
  disks_[disk].RecordCompletion(submit_ns, complete_ns, found_idle, ok);
}

void TipEvents::FoldCpuSamples() const {
  // T_hit is per block access, as the manager counts accesses: a read of a few bytes is one
  // access like a read of the whole block (scaling by bytes made small reads look as costly as
  // a disk read and shrank the horizon to nothing).
  const int64_t hit_nanos = hit_nanos_sum_.exchange(0, std::memory_order_relaxed);
  const uint64_t hit_blocks = hit_blocks_sum_.exchange(0, std::memory_order_relaxed);
  if (hit_blocks > 0) {
    t_hit_.Add(static_cast<double>(hit_nanos) / static_cast<double>(hit_blocks));
  }
  // A fetch's stages arrive apart (its completion last, with the count): the time of stages of
  // fetches still in flight waits for a count, and is averaged in with the next.
  const uint64_t drivers = driver_count_.exchange(0, std::memory_order_relaxed);
  if (drivers > 0) {
    const int64_t driver_nanos = driver_nanos_sum_.exchange(0, std::memory_order_relaxed);
    t_driver_.Add(static_cast<double>(driver_nanos) / static_cast<double>(drivers));
  }
}

double TipEvents::CpuNanos(uint32_t tgid) const {
  ReaderShard& shard = ShardOf(tgid);
  MutexLock lock(&shard.mu);
  auto it = shard.readers.find(tgid);
  return it == shard.readers.end() ? 0 : it->second->cpu_per_access.value();
}

bool TipEvents::HasCpuSample(uint32_t tgid) const {
  ReaderShard& shard = ShardOf(tgid);
  MutexLock lock(&shard.mu);
  auto it = shard.readers.find(tgid);
  return it != shard.readers.end() && it->second->cpu_per_access.has_sample();
}

int64_t TipEvents::LastStartNanos(uint32_t tgid) const {
  ReaderShard& shard = ShardOf(tgid);
  MutexLock lock(&shard.mu);
  auto it = shard.readers.find(tgid);
  return it == shard.readers.end() ? 0 : it->second->last_start_ns;
}

double TipEvents::HitNanos() const {
  MutexLock lock(&mu_);
  FoldCpuSamples();
  return t_hit_.value();
}

double TipEvents::DriverNanos() const {
  MutexLock lock(&mu_);
  FoldCpuSamples();
  return t_driver_.value();
}

double TipEvents::DiskNanos(uint32_t disk) const {
  MutexLock lock(&mu_);
  return disk < disk_count_ ? disks_[disk].nanos() : 0;
}

double TipEvents::MeanDiskNanos() const {
  MutexLock lock(&mu_);
  double sum = 0;
  for (const DiskServiceEstimator& d : disks_) sum += d.nanos();
  return disks_.empty() ? 0 : sum / static_cast<double>(disks_.size());
}

double TipEvents::SlowestDiskNanos() const {
  MutexLock lock(&mu_);
  double slowest = 0;
  for (const DiskServiceEstimator& d : disks_) slowest = std::max(slowest, d.nanos());
  return slowest;
}

std::vector<double> TipEvents::AllDiskNanos() const {
  MutexLock lock(&mu_);
  std::vector<double> out;
  for (const DiskServiceEstimator& d : disks_) out.push_back(d.nanos());
  return out;
}

std::vector<DiskServiceEstimator> TipEvents::DiskEstimators() const {
  MutexLock lock(&mu_);
  return disks_;
}

double TipEvents::LruMarginalHitsPerSecond(int64_t now, uint64_t tail_buffers,
                                           uint64_t ghost_slots) const {
  MutexLock lock(&mu_);
  FoldLru(now);
  return lru_marginal_.MarginalHitsPerSecond(now, tail_buffers, ghost_slots);
}

double TipEvents::LruMarginalHitRatio(int64_t now, uint64_t tail_buffers,
                                      uint64_t ghost_slots) const {
  MutexLock lock(&mu_);
  FoldLru(now);
  return lru_marginal_.MarginalHitRatio(now, tail_buffers, ghost_slots);
}

}  // namespace tipfs::cache
