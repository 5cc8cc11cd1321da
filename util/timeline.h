// TimelineRecorder: what each disk did and when programs waited, as intervals in time, for the
// pictures of `tipfs run --timeline` and `tipfs stats --timeline`. Off unless someone records:
// Start() turns it on (recordings nest; the events are kept from the first Start until the last
// Stop), and every Record while it is off costs one relaxed atomic load. While on, each event is
// appended under a mutex, up to kMaxEvents (later ones are counted as dropped, so memory stays
// bounded).
//
// Times are CLOCK_MONOTONIC nanoseconds (SystemClock's), which another process on the machine
// reads too: `tipfs run` brackets its program with its own clock readings.
//
// One process-wide recorder (Global), as PerfCounters: the disks (stripe/) and the cache record
// into it without being handed a pointer. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "util/mutex.h"

namespace tipfs {

// What an interval on a disk row was for. Reads carry their purpose; writes and syncs their kind.
enum class TimelineActivity : uint8_t {
  kDemand = 0,   // a program waits for it
  kReadahead,    // sequential read-ahead
  kHinted,       // prefetch for a hint a program disclosed (manual, or `tipfs hint` warm-up)
  kSpeculative,  // prefetch for a hint a speculating copy of the program made (`tipfs run`)
  kWrite,        // writes and syncs
  kStall,        // not a disk's: a program's read waiting for data
};
constexpr int kTimelineActivityCount = 6;
const char* TimelineActivityName(TimelineActivity activity);  // "demand", "read-ahead", ...

struct TimelineEvent {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t bytes = 0;
  uint32_t who = 0;  // disk index; for kStall the waiting process (tgid)
  TimelineActivity activity = TimelineActivity::kDemand;
};

class TimelineRecorder {
 public:
  static constexpr size_t kMaxEvents = 1 << 20;

  static TimelineRecorder* Global();

  void Start();
  void Stop();
  bool recording() const { return recording_.load(std::memory_order_relaxed) > 0; }
  void Record(const TimelineEvent& event) {
    if (recording()) Append(event);
  }

  // The events so far, and how many did not fit.
  std::vector<TimelineEvent> Events(uint64_t* dropped = nullptr) const;
  // The text form `.tipfs/timeline` serves: a header line, then one line per event
  // ("<activity> <who> <start_ns> <end_ns> <bytes>"); ParseTimeline reads it back.
  std::string Text(uint32_t disks) const;

 private:
  void Append(const TimelineEvent& event);

  std::atomic<int> recording_{0};
  mutable Mutex mu_;
  std::vector<TimelineEvent> events_ GUARDED_BY(mu_);
  uint64_t dropped_ GUARDED_BY(mu_) = 0;
};

struct TimelineData {
  uint32_t disks = 0;
  uint64_t dropped = 0;
  bool recording = false;
  std::vector<TimelineEvent> events;
};
// Parses TimelineRecorder::Text; false (and *error) on a malformed line.
bool ParseTimeline(const std::string& text, TimelineData* out, std::string* error);

}  // namespace tipfs
