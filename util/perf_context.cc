#include "util/perf_context.h"

#include <time.h>

#include <algorithm>
#include <cstdio>

#include "util/clock.h"

namespace tipfs {
namespace {

// The innermost open section of this thread; sections link to their parent.
thread_local PerfSection* current_section = nullptr;

constexpr const char* kNames[kSubsystemCount] = {
    "fuse_dispatch", "metadata", "cache_lookup", "disk_wait", "data_copy", "hint_processing",
};
constexpr const char* kLabels[kSubsystemCount] = {
    "FUSE dispatch", "metadata", "cache lookup", "disk wait", "data copy", "hint processing",
};

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * kNanosPerSecond + ts.tv_nsec;
}

std::string HumanNanos(int64_t nanos) {
  char buf[32];
  if (nanos >= kNanosPerSecond) {
    std::snprintf(buf, sizeof(buf), "%.3g s", static_cast<double>(nanos) / kNanosPerSecond);
  } else if (nanos >= kNanosPerMilli) {
    std::snprintf(buf, sizeof(buf), "%.3g ms", static_cast<double>(nanos) / kNanosPerMilli);
  } else if (nanos >= kNanosPerMicro) {
    std::snprintf(buf, sizeof(buf), "%.3g us", static_cast<double>(nanos) / kNanosPerMicro);
  } else {
    std::snprintf(buf, sizeof(buf), "%lld ns", static_cast<long long>(nanos));
  }
  return buf;
}

}  // namespace

const char* SubsystemName(Subsystem subsystem) { return kNames[static_cast<size_t>(subsystem)]; }
const char* SubsystemLabel(Subsystem subsystem) { return kLabels[static_cast<size_t>(subsystem)]; }

int64_t PerfSnapshot::total_nanos() const {
  int64_t total = 0;
  for (int64_t n : nanos) total += n;
  return total;
}

PerfSnapshot PerfSnapshot::Since(const PerfSnapshot& earlier) const {
  PerfSnapshot delta;
  for (size_t i = 0; i < kSubsystemCount; ++i) {
    delta.nanos[i] = nanos[i] - earlier.nanos[i];
    delta.sections[i] = sections[i] - earlier.sections[i];
  }
  return delta;
}

PerfCounters* PerfCounters::Global() {
  static PerfCounters* counters = new PerfCounters();  // never destroyed: used until exit
  return counters;
}

void PerfCounters::Add(Subsystem subsystem, int64_t nanos) {
  if (!enabled()) return;
  size_t i = static_cast<size_t>(subsystem);
  nanos_[i].fetch_add(nanos, std::memory_order_relaxed);
  sections_[i].fetch_add(1, std::memory_order_relaxed);
}

PerfSnapshot PerfCounters::Snapshot() const {
  PerfSnapshot snapshot;
  for (size_t i = 0; i < kSubsystemCount; ++i) {
    snapshot.nanos[i] = nanos_[i].load(std::memory_order_relaxed);
    snapshot.sections[i] = sections_[i].load(std::memory_order_relaxed);
  }
  return snapshot;
}

void PerfCounters::Reset() {
  for (size_t i = 0; i < kSubsystemCount; ++i) {
    nanos_[i].store(0, std::memory_order_relaxed);
    sections_[i].store(0, std::memory_order_relaxed);
  }
}

PerfSection::PerfSection(Subsystem subsystem, const Clock* clock, PerfCounters* counters)
    : counters_(counters != nullptr && counters->enabled() ? counters : nullptr),
      clock_(clock),
      subsystem_(subsystem) {
  if (counters_ == nullptr) return;
  parent_ = current_section;
  current_section = this;
  start_ = Now();
}

PerfSection::~PerfSection() {
  if (counters_ == nullptr) return;
  int64_t elapsed = Now() - start_;
  // Exclusive time: what nested sections claimed is theirs, not ours.
  counters_->Add(subsystem_, std::max<int64_t>(0, elapsed - child_nanos_));
  if (parent_ != nullptr) parent_->child_nanos_ += elapsed;
  current_section = parent_;
}

int64_t PerfSection::Now() const {
  return clock_ != nullptr ? clock_->NowNanos() : MonotonicNanos();
}

PerfBreakdown ComputeBreakdown(const PerfSnapshot& interval, int64_t capacity_nanos,
                               uint64_t operations) {
  PerfBreakdown b;
  b.capacity_nanos = capacity_nanos;
  b.operations = operations;
  b.nanos = interval.nanos;
  b.accounted_nanos = interval.total_nanos();
  b.idle_nanos = std::max<int64_t>(0, capacity_nanos - b.accounted_nanos);
  const int64_t whole = b.accounted_nanos + b.idle_nanos;
  if (whole > 0) {
    for (size_t i = 0; i < kSubsystemCount; ++i) {
      b.share[i] = static_cast<double>(interval.nanos[i]) / static_cast<double>(whole);
    }
    b.idle_share = static_cast<double>(b.idle_nanos) / static_cast<double>(whole);
  }
  if (operations > 0) b.nanos_per_operation = static_cast<double>(whole) / operations;
  return b;
}

std::string FormatBreakdown(const PerfBreakdown& b) {
  std::string out;
  char line[96];
  auto row = [&](const char* label, double share, int64_t nanos) {
    std::snprintf(line, sizeof(line), "  %-16s %6.1f%%  %s\n", label, share * 100.0,
                  HumanNanos(nanos).c_str());
    out += line;
  };
  for (size_t i = 0; i < kSubsystemCount; ++i) row(kLabels[i], b.share[i], b.nanos[i]);
  row("idle", b.idle_share, b.idle_nanos);
  if (b.operations > 0) {
    std::snprintf(line, sizeof(line), "  %llu operations, %s per operation\n",
                  static_cast<unsigned long long>(b.operations),
                  HumanNanos(static_cast<int64_t>(b.nanos_per_operation)).c_str());
    out += line;
  }
  return out;
}

std::string BreakdownJson(const PerfBreakdown& b) {
  std::string out = "{";
  char item[512];  // the tail line grows past 128 characters on long runs
  for (size_t i = 0; i < kSubsystemCount; ++i) {
    std::snprintf(item, sizeof(item), "\"%s\":{\"share\":%.6f,\"nanos\":%lld},", kNames[i],
                  b.share[i], static_cast<long long>(b.nanos[i]));
    out += item;
  }
  std::snprintf(item, sizeof(item),
                "\"idle\":{\"share\":%.6f,\"nanos\":%lld},\"capacity_nanos\":%lld,"
                "\"operations\":%llu,\"nanos_per_operation\":%.1f}",
                b.idle_share, static_cast<long long>(b.idle_nanos),
                static_cast<long long>(b.capacity_nanos),
                static_cast<unsigned long long>(b.operations), b.nanos_per_operation);
  out += item;
  return out;
}

}  // namespace tipfs
