// PerfContext: where the time of each request goes, by subsystem, in the manner of seed 002's
// Figure 5.9 (Martin et al.: the share of time per NFS operation spent in each kernel subsystem
// near peak load, idle included). tipfs's subsystems are FUSE dispatch, metadata (RocksDB), cache
// lookup, disk wait, data copy and hint processing; idle is what the reporter's capacity (wall time
// x worker threads) leaves over.
//
// Record with a scoped timer on the stack: `PerfSection s(Subsystem::kMetadata);`. Sections nest
// per thread: an inner section's time is subtracted from the enclosing one, so each nanosecond is
// counted once and the shares sum to the total. Wrap a whole FUSE handler in kFuseDispatch and it
// gets exactly the time its inner sections do not claim. Time spent asynchronously (a disk request
// from submit to completion) goes in with PerfCounters::Add.
//
// Cost: two clock reads (clock_gettime(CLOCK_MONOTONIC) is a vDSO call, ~20 ns) and two relaxed
// atomic adds per section; a disabled PerfCounters costs one relaxed load.
//
// Thread-safety: PerfCounters is safe from any thread. A PerfSection belongs to the thread that
// made it and must be destroyed on it, in reverse order of creation (it is a scope guard).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tipfs {

class Clock;

enum class Subsystem : uint8_t {
  kFuseDispatch = 0,  // FUSE request decoding, inode/handle tables, replying
  kMetadata,          // RocksDB reads and write batches
  kCacheLookup,       // block cache and hint-stream matching on the read path
  kDiskWait,          // waiting for disk requests
  kDataCopy,          // copying file data between buffers
  kHintProcessing,    // hint ioctls, cost-benefit decisions, prefetch issue
};
constexpr size_t kSubsystemCount = 6;

// "fuse_dispatch", "metadata", ... (for JSON keys and Prometheus labels).
const char* SubsystemName(Subsystem subsystem);
// "FUSE dispatch", "metadata", ... (for people).
const char* SubsystemLabel(Subsystem subsystem);

struct PerfSnapshot {
  std::array<int64_t, kSubsystemCount> nanos{};      // exclusive time per subsystem
  std::array<uint64_t, kSubsystemCount> sections{};  // sections (or Add calls) recorded

  int64_t total_nanos() const;
  int64_t operator[](Subsystem s) const { return nanos[static_cast<size_t>(s)]; }
  // Per-subsystem difference (this - earlier): the breakdown of an interval.
  PerfSnapshot Since(const PerfSnapshot& earlier) const;
};

// The accumulator: per-subsystem exclusive nanoseconds. One process-wide instance (Global) is what
// `tipfs stats --breakdown` reads; tests make their own.
class PerfCounters {
 public:
  PerfCounters() = default;
  PerfCounters(const PerfCounters&) = delete;
  PerfCounters& operator=(const PerfCounters&) = delete;

  static PerfCounters* Global();

  // Adds time spent outside any scoped section (e.g. a disk request from submit to completion).
  void Add(Subsystem subsystem, int64_t nanos);
  PerfSnapshot Snapshot() const;
  void Reset();

  // Disabled counters record nothing (sections made while disabled stay inert). Default: enabled.
  void set_enabled(bool enabled) { enabled_.store(enabled, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> enabled_{true};
  std::array<std::atomic<int64_t>, kSubsystemCount> nanos_{};
  std::array<std::atomic<uint64_t>, kSubsystemCount> sections_{};
};

// Scoped timer. `clock` = nullptr reads CLOCK_MONOTONIC directly (the cheap default); tests pass a
// FakeClock to get exact, deterministic breakdowns.
class PerfSection {
 public:
  explicit PerfSection(Subsystem subsystem, const Clock* clock = nullptr,
                       PerfCounters* counters = PerfCounters::Global());
  ~PerfSection();
  PerfSection(const PerfSection&) = delete;
  PerfSection& operator=(const PerfSection&) = delete;

 private:
  int64_t Now() const;

  PerfCounters* counters_;  // nullptr when the counters were disabled at entry
  const Clock* clock_;
  Subsystem subsystem_;
  int64_t start_ = 0;
  int64_t child_nanos_ = 0;  // time claimed by sections nested inside this one
  PerfSection* parent_ = nullptr;
};

// Shares of a capacity, as Figure 5.9 draws them. `capacity_nanos` is the time available in the
// interval (wall time x threads that serve requests); idle = capacity - accounted, never negative.
// When the sections account for more than the capacity (more threads than the reporter assumed),
// shares are of the accounted time and idle is 0.
struct PerfBreakdown {
  std::array<double, kSubsystemCount> share{};   // 0..1
  std::array<int64_t, kSubsystemCount> nanos{};  // exclusive time per subsystem
  double idle_share = 0;
  int64_t accounted_nanos = 0;
  int64_t idle_nanos = 0;
  int64_t capacity_nanos = 0;
  uint64_t operations = 0;         // requests served in the interval (0: unknown)
  double nanos_per_operation = 0;  // (accounted + idle) / operations; the "area" of Figure 5.9
};
PerfBreakdown ComputeBreakdown(const PerfSnapshot& interval, int64_t capacity_nanos,
                               uint64_t operations = 0);
// A table, one line per subsystem then idle: "  disk wait        41.3%   12.5 ms".
std::string FormatBreakdown(const PerfBreakdown& breakdown);
// {"fuse_dispatch":{"share":0.12,"nanos":123},...,"idle":{...},"capacity_nanos":...}
std::string BreakdownJson(const PerfBreakdown& breakdown);

}  // namespace tipfs
