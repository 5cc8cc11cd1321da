// EmulatedDisk: a Disk that behaves, in time, like the disk its model describes. It wraps the real
// disk (which still stores every byte) and delivers each completion when the disk model says the
// request would finish, or when the real disk finishes, whichever is later:
//
//   submitted -> o burned in the submitting thread (CPU overhead, the one knob that costs CPU)
//             -> arrives at the model queue, and at the same moment goes to the real disk
//             -> model: queued -> in service -> finish (+ L) = model deadline
//             -> real:  in service at the backing store -> real completion
//             -> done(result) at max(model deadline, real completion), from a Clock timer
//
// The real request is issued on arrival rather than when the model starts it, so the real disk's
// own latency overlaps the modelled queueing; if the real disk is slower than the model (a fast
// profile over a slow directory) its completion decides and the request counts as `late`. Waiting
// is a Clock::RunAt timer, not a spin of its own: speculation needs the idle CPU (SystemClock spins
// only the few microseconds its sleeps overrun, within a budget). Under the `none` profile
// (no modelled service) the real disk is the service: `slowdown` stretches the measured real
// service time, exactly as seed 000's striping pseudodevice delayed the notification of real
// completions, and L is added after it (real + L, e.g. a modelled network in front of a RADOS
// cluster's own round trip), where with a modelled service the real one only overlaps.
//
// Truncate, Remove, Stat, ListObjects, Usage and SyncAll go straight to the real disk, untimed
// (they are metadata operations of the backing file system, not requests of the modelled disk).
//
// Thread-safety: all methods may be called from any thread. The model state lives in a shared
// DiskEmulator that timer callbacks keep alive, so destroying the disk with timers pending is
// safe; destroying it with requests in flight is not (REQUIRES: every done has run).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "stripe/disk_wrapper.h"
#include "stripe/emulation/disk_model.h"
#include "stripe/emulation/disk_model_config.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/statistics.h"

namespace tipfs::stripe {

struct EmulatedDiskOptions {
  DiskModelConfig model;  // changeable while mounted (DiskEmulator::SetModel)
  // Burn `o` as CPU in Submit, as the seed 002 apparatus charged CPU time with a busy loop. Tests
  // on a FakeClock turn it off: `o` is then only accounted (arrival = submit time + o). Fixed.
  bool burn_overhead = true;
  Statistics* statistics = nullptr;  // DISK_* tickers; null records nothing. Fixed.
};

// Spins on CLOCK_MONOTONIC for `nanos`: the CPU overhead `o`.
void BurnCpuNanos(int64_t nanos);

// The model side of one emulated disk: the DiskModel, requests in flight, statistics.
class DiskEmulator : public std::enable_shared_from_this<DiskEmulator> {
 public:
  DiskEmulator(Clock* clock, const EmulatedDiskOptions& options);
  DiskEmulator(const DiskEmulator&) = delete;
  DiskEmulator& operator=(const DiskEmulator&) = delete;

  // Applies to requests that start service after the call (queued ones included).
  void SetModel(const DiskModelConfig& config);
  DiskModelConfig model() const;
  // Statistics up to now. Counts and times are exact; the queue-depth average is taken from the
  // model's last event, so it lags by at most one timer's lateness, plus L for a lone request
  // (nothing behind it sets a timer at its finish; its completion's comes L later).
  DiskStats Stats() const;
  void ResetStats();

  // Used by EmulatedDisk::Submit: charges o, enters the request in the model and returns the id
  // under which the real completion must be reported to OnRealDone.
  uint64_t Enter(DiskRequest* request);
  void OnRealDone(uint64_t id, Result<uint64_t> result);

 private:
  struct InFlight {
    std::function<void(Result<uint64_t>)> done;
    int64_t submitted = 0;
    int64_t arrival = 0;
    int64_t model_deadline = -1;  // known once the model starts the request
    int64_t real_target = -1;     // known once the real disk completes (stretched under `none`)
    Result<uint64_t> result = uint64_t{0};
  };
  using Ready = std::vector<std::pair<std::function<void(Result<uint64_t>)>, Result<uint64_t>>>;
  struct ScratchReady;  // this thread's Ready for one call (emulated_disk.cc)

  void PumpLocked(int64_t now, Ready* ready) REQUIRES(mu_);
  void HandleStartsLocked(const std::vector<ModelStart>& starts, int64_t now, Ready* ready)
      REQUIRES(mu_);
  // Delivers `id` now if both deadlines are known and due, else sets a timer for the later one.
  void SettleLocked(uint64_t id, int64_t now, Ready* ready) REQUIRES(mu_);
  void ScheduleLocked(int64_t when, uint64_t id) REQUIRES(mu_);  // id 0: a pure model wake-up
  void RearmLocked() REQUIRES(mu_);
  void OnTimer(int64_t when, uint64_t id);
  static void Run(Ready* ready);

  // Constant after construction.
  Clock* const clock_;
  const bool burn_overhead_;
  Statistics* const statistics_;
  // The model's o, for Enter to charge before it takes mu_ (SetModel updates it).
  std::atomic<int64_t> overhead_ns_;

  mutable Mutex mu_;
  DiskModel model_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, InFlight> flight_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;                // 0 means "no request"
  std::multiset<int64_t> timer_times_ GUARDED_BY(mu_);  // timers that will pump
  DiskStats extra_ GUARDED_BY(mu_);                     // the EmulatedDisk fields of DiskStats
};

class EmulatedDisk : public DiskWrapper {
 public:
  EmulatedDisk(std::unique_ptr<Disk> inner, Clock* clock, const EmulatedDiskOptions& options);

  void Submit(DiskRequest request) override;

  DiskEmulator* emulator() const { return emulator_.get(); }
  // A handle that stays valid after the disk is gone (for EmulatedArray).
  std::shared_ptr<DiskEmulator> shared_emulator() const { return emulator_; }

 private:
  const std::shared_ptr<DiskEmulator> emulator_;
};

}  // namespace tipfs::stripe
