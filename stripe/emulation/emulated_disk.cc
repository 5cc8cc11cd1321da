#include "stripe/emulation/emulated_disk.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <deque>

#include "util/mutex.h"

namespace tipfs::stripe {

void BurnCpuNanos(int64_t nanos) {
  if (nanos <= 0) return;
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const int64_t end = int64_t{ts.tv_sec} * kNanosPerSecond + ts.tv_nsec + nanos;
  int64_t now;
  do {
    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = int64_t{ts.tv_sec} * kNanosPerSecond + ts.tv_nsec;
  } while (now < end);
}

namespace {

// The model's starts of one locked step: filled and read under mu_ only (no callback runs in
// between), so one vector per thread serves every call without a heap allocation each.
std::vector<ModelStart>& ScratchStarts() {
  thread_local std::vector<ModelStart> starts;
  starts.clear();
  return starts;
}

}  // namespace

// The completions one call delivers, in a vector of this thread's that keeps its capacity: a
// completion's callback may submit again on this thread (a reply that starts the next fetch),
// so each nesting level has its own.
struct DiskEmulator::ScratchReady {
  ScratchReady() : ready(Take()) {}
  ~ScratchReady() {
    ready.clear();  // a request's `done` keeps nothing it needs once delivered
    --Depth();
  }
  ScratchReady(const ScratchReady&) = delete;
  ScratchReady& operator=(const ScratchReady&) = delete;

  Ready& ready;

 private:
  static size_t& Depth() {
    thread_local size_t depth = 0;
    return depth;
  }
  static Ready& Take() {
    thread_local std::deque<Ready> levels;  // a deque: earlier levels stay where they are
    size_t& depth = Depth();
    if (levels.size() <= depth) levels.emplace_back();
    return levels[depth++];
  }
};

DiskEmulator::DiskEmulator(Clock* clock, const EmulatedDiskOptions& options)
    : clock_(clock),
      burn_overhead_(options.burn_overhead),
      statistics_(options.statistics),
      overhead_ns_(options.model.overhead_ns),
      model_(options.model, clock->NowNanos()) {}

void DiskEmulator::SetModel(const DiskModelConfig& config) {
  Ready ready;
  {
    MutexLock lock(&mu_);
    // Bring the model to the present under the old values, so the new ones start from now.
    const int64_t now = clock_->NowNanos();
    PumpLocked(now, &ready);
    const bool released = model_.config().hold && !config.hold;
    model_.SetConfig(config);
    overhead_ns_.store(config.overhead_ns, std::memory_order_relaxed);
    if (released) {
      // What the hold kept back is delivered now (or at its deadline, if that is still ahead).
      std::vector<uint64_t> held;
      for (const auto& [id, f] : flight_) held.push_back(id);
      for (uint64_t id : held) SettleLocked(id, now, &ready);
    }
    RearmLocked();  // a new g may move the next start
  }
  Run(&ready);
}

DiskModelConfig DiskEmulator::model() const {
  MutexLock lock(&mu_);
  return model_.config();
}

DiskStats DiskEmulator::Stats() const {
  MutexLock lock(&mu_);
  DiskStats s = model_.Stats(clock_->NowNanos());
  s.completed = extra_.completed;
  s.response_ns = extra_.response_ns;
  s.late = extra_.late;
  s.late_ns = extra_.late_ns;
  s.overhead_ns = extra_.overhead_ns;
  s.errors = extra_.errors;
  s.in_flight = static_cast<uint32_t>(flight_.size());
  return s;
}

void DiskEmulator::ResetStats() {
  Ready ready;
  {
    MutexLock lock(&mu_);
    PumpLocked(clock_->NowNanos(), &ready);
    model_.ResetStats();
    extra_ = DiskStats{};
  }
  Run(&ready);
}

uint64_t DiskEmulator::Enter(DiskRequest* request) {
  const int64_t submitted = clock_->NowNanos();
  // A copy of the model's o, so a request takes mu_ once (SetModel keeps it current; a request
  // racing a change may be charged the old value, as one submitted just before it would be).
  const int64_t overhead = overhead_ns_.load(std::memory_order_relaxed);
  // o is spent outside the lock, in the submitting thread: it costs that thread's CPU only.
  if (burn_overhead_) BurnCpuNanos(overhead);

  ScratchReady scratch;
  Ready& ready = scratch.ready;
  uint64_t id;
  {
    MutexLock lock(&mu_);
    id = next_id_++;
    InFlight& f = flight_[id];
    f.done = std::move(request->done);
    f.submitted = submitted;
    f.arrival = submitted + overhead;
    extra_.overhead_ns += overhead;

    ModelRequest m{
        id, request->kind, request->priority, request->object, request->offset, request->length};
    std::vector<ModelStart>& starts = ScratchStarts();
    model_.Submit(m, f.arrival, &starts);
    HandleStartsLocked(starts, clock_->NowNanos(), &ready);
    RearmLocked();
  }
  RecordTick(statistics_, DISK_OVERHEAD_NANOS, static_cast<uint64_t>(overhead));
  switch (request->kind) {
    case DiskRequest::Kind::kRead:
      RecordTick(statistics_, DISK_READ_OPS);
      RecordTick(statistics_, DISK_READ_BYTES, request->length);
      break;
    case DiskRequest::Kind::kWrite:
      RecordTick(statistics_, DISK_WRITE_OPS);
      RecordTick(statistics_, DISK_WRITE_BYTES, request->length);
      break;
    case DiskRequest::Kind::kSync:
      RecordTick(statistics_, DISK_SYNC_OPS);
      break;
  }
  Run(&ready);  // other requests the pump completed; never this one (not yet issued)
  return id;
}

void DiskEmulator::OnRealDone(uint64_t id, Result<uint64_t> result) {
  ScratchReady scratch;
  Ready& ready = scratch.ready;
  {
    MutexLock lock(&mu_);
    const int64_t now = clock_->NowNanos();
    auto it = flight_.find(id);
    if (it == flight_.end()) return;  // cannot happen: the real disk reports each request once
    InFlight& f = it->second;
    f.result = std::move(result);
    f.real_target = now;
    const DiskModelConfig& config = model_.config();
    if (!config.ModelsService()) {
      if (config.slowdown != 1.0) {
        // Seed 000: delay the notification so the real service time appears K times as long.
        const int64_t real_service = std::max<int64_t>(0, now - f.arrival);
        f.real_target =
            std::max(now, f.arrival + static_cast<int64_t>(std::llround(
                                          config.slowdown * static_cast<double>(real_service))));
      }
      // The real disk is the service here, so L goes on top of it, as seed 002's apparatus
      // delayed every message on top of the real network's time (not hidden under it).
      f.real_target += config.latency_ns;
    }
    if (f.model_deadline >= 0 && now > f.model_deadline && config.ModelsService()) {
      ++extra_.late;
      extra_.late_ns += now - f.model_deadline;
      RecordTick(statistics_, DISK_LATE_COMPLETIONS);
    }
    PumpLocked(now, &ready);
    if (flight_.count(id)) SettleLocked(id, now, &ready);
    RearmLocked();
  }
  Run(&ready);
}

void DiskEmulator::PumpLocked(int64_t now, Ready* ready) {
  std::vector<ModelStart>& starts = ScratchStarts();
  model_.AdvanceTo(now, &starts);
  HandleStartsLocked(starts, now, ready);
}

void DiskEmulator::HandleStartsLocked(const std::vector<ModelStart>& starts, int64_t now,
                                      Ready* ready) {
  for (const ModelStart& s : starts) {
    auto it = flight_.find(s.id);
    if (it == flight_.end()) continue;
    it->second.model_deadline = s.deadline;
    if (!s.sync) {
      RecordTick(statistics_, s.sequential ? DISK_SEQUENTIAL_OPS : DISK_POSITIONED_OPS);
      RecordTick(statistics_, DISK_BUSY_NANOS, static_cast<uint64_t>(s.finish - s.start));
      RecordTick(statistics_, DISK_QUEUE_WAIT_NANOS, static_cast<uint64_t>(s.start - s.arrival));
    }
    if (it->second.real_target >= 0) SettleLocked(s.id, now, ready);
  }
}

void DiskEmulator::SettleLocked(uint64_t id, int64_t now, Ready* ready) {
  auto it = flight_.find(id);
  InFlight& f = it->second;
  if (f.model_deadline < 0 || f.real_target < 0) return;  // the other side will settle it
  if (model_.config().hold) return;                       // SetModel settles it when the hold ends
  const int64_t due = std::max(f.model_deadline, f.real_target);
  if (due > now) {
    ScheduleLocked(due, id);
    return;
  }
  ++extra_.completed;
  extra_.response_ns += now - f.submitted;
  if (!f.result.ok()) ++extra_.errors;
  ready->emplace_back(std::move(f.done), std::move(f.result));
  flight_.erase(it);
}

void DiskEmulator::ScheduleLocked(int64_t when, uint64_t id) {
  timer_times_.insert(when);
  std::shared_ptr<DiskEmulator> self = shared_from_this();
  clock_->RunAt(when, [self, when, id] { self->OnTimer(when, id); });
}

void DiskEmulator::RearmLocked() {
  // Nothing behind the request in service: its own settling (a timer at its deadline, or the
  // thread that reports its real completion) advances the model past its finish, so a pump timer
  // at the finish would be one more RunAt and timer wake-up per request for nothing (issue 11).
  if (!model_.HasWaiting()) return;
  const int64_t next = model_.NextEventTime();
  if (next < 0) return;
  // Some timer at or before `next` will pump the model; only add one when none will.
  if (!timer_times_.empty() && *timer_times_.begin() <= next) return;
  ScheduleLocked(next, 0);
}

void DiskEmulator::OnTimer(int64_t when, uint64_t id) {
  ScratchReady scratch;
  Ready& ready = scratch.ready;
  {
    MutexLock lock(&mu_);
    auto t = timer_times_.find(when);
    if (t != timer_times_.end()) timer_times_.erase(t);
    const int64_t now = clock_->NowNanos();
    PumpLocked(now, &ready);
    if (id != 0 && flight_.count(id)) SettleLocked(id, now, &ready);
    RearmLocked();
  }
  Run(&ready);
}

void DiskEmulator::Run(Ready* ready) {
  for (auto& [done, result] : *ready) done(std::move(result));
  ready->clear();
}

EmulatedDisk::EmulatedDisk(std::unique_ptr<Disk> inner, Clock* clock,
                           const EmulatedDiskOptions& options)
    : DiskWrapper(std::move(inner)), emulator_(std::make_shared<DiskEmulator>(clock, options)) {}

void EmulatedDisk::Submit(DiskRequest request) {
  const uint64_t id = emulator_->Enter(&request);
  // A plain pointer (with the id, 16 bytes: std::function keeps it without a heap allocation):
  // the request is not done before its real completion has been reported, and the disk (with
  // its emulator) outlives every request it has not finished (the header's REQUIRES).
  DiskEmulator* emulator = emulator_.get();
  request.done = [emulator, id](Result<uint64_t> result) {
    emulator->OnRealDone(id, std::move(result));
  };
  inner_->Submit(std::move(request));
}

}  // namespace tipfs::stripe
