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
  MutexLock lock(&mu_);
  auto it = readers_.find(tgid);
  if (it == readers_.end()) {
    if (readers_.size() >= kMaxReaders) {
      auto oldest = readers_.begin();
      for (auto r = readers_.begin(); r != readers_.end(); ++r) {
        if (r->second->last_start_ns < oldest->second->last_start_ns) oldest = r;
      }
      readers_.erase(oldest);
    }
    auto state = std::make_shared<ReaderTiming>();
    state->tgid = tgid;
    it = readers_.emplace(tgid, std::move(state)).first;
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
  MutexLock lock(&mu_);
  if (events.accesses > 0) lru_marginal_.RecordAccess(now, events.accesses);
  if (events.tail_hits > 0) lru_marginal_.RecordTailHit(now, events.tail_hits);
  if (events.ghost_hits > 0) lru_marginal_.RecordGhostHit(now, events.ghost_hits);
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
  MutexLock lock(&mu_);
  auto it = readers_.find(tgid);
  return it == readers_.end() ? 0 : it->second->cpu_per_access.value();
}

bool TipEvents::HasCpuSample(uint32_t tgid) const {
  MutexLock lock(&mu_);
  auto it = readers_.find(tgid);
  return it != readers_.end() && it->second->cpu_per_access.has_sample();
}

int64_t TipEvents::LastStartNanos(uint32_t tgid) const {
  MutexLock lock(&mu_);
  auto it = readers_.find(tgid);
  return it == readers_.end() ? 0 : it->second->last_start_ns;
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
  return lru_marginal_.MarginalHitsPerSecond(now, tail_buffers, ghost_slots);
}

double TipEvents::LruMarginalHitRatio(int64_t now, uint64_t tail_buffers,
                                      uint64_t ghost_slots) const {
  MutexLock lock(&mu_);
  return lru_marginal_.MarginalHitRatio(now, tail_buffers, ghost_slots);
}

}  // namespace tipfs::cache
