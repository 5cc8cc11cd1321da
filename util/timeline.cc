#include "util/timeline.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace tipfs {
namespace {

constexpr const char* kNames[kTimelineActivityCount] = {"demand",      "read-ahead", "hinted",
                                                        "speculative", "write",      "stall"};
constexpr char kHeader[] = "# tipfs timeline v1";

}  // namespace

const char* TimelineActivityName(TimelineActivity activity) {
  return kNames[static_cast<int>(activity)];
}

TimelineRecorder* TimelineRecorder::Global() {
  static TimelineRecorder recorder;
  return &recorder;
}

void TimelineRecorder::Start() {
  MutexLock lock(&mu_);
  if (recording_.fetch_add(1, std::memory_order_relaxed) == 0) {
    events_.clear();
    dropped_ = 0;
  }
}

void TimelineRecorder::Stop() {
  MutexLock lock(&mu_);
  if (recording_.load(std::memory_order_relaxed) > 0) {
    recording_.fetch_sub(1, std::memory_order_relaxed);
  }
}

void TimelineRecorder::Append(const TimelineEvent& event) {
  MutexLock lock(&mu_);
  if (events_.size() >= kMaxEvents) {
    ++dropped_;
    return;
  }
  events_.push_back(event);
}

std::vector<TimelineEvent> TimelineRecorder::Events(uint64_t* dropped) const {
  MutexLock lock(&mu_);
  if (dropped != nullptr) *dropped = dropped_;
  return events_;
}

std::string TimelineRecorder::Text(uint32_t disks) const {
  uint64_t dropped = 0;
  std::vector<TimelineEvent> events = Events(&dropped);
  std::string out;
  out.reserve(64 + events.size() * 48);
  char line[128];
  std::snprintf(line, sizeof(line), "%s disks=%u recording=%d dropped=%" PRIu64 "\n", kHeader,
                disks, recording() ? 1 : 0, dropped);
  out += line;
  for (const TimelineEvent& e : events) {
    std::snprintf(line, sizeof(line), "%s %u %" PRId64 " %" PRId64 " %u\n",
                  TimelineActivityName(e.activity), e.who, e.start_ns, e.end_ns, e.bytes);
    out += line;
  }
  return out;
}

bool ParseTimeline(const std::string& text, TimelineData* out, std::string* error) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line.compare(0, sizeof(kHeader) - 1, kHeader) != 0) {
    *error = "not a tipfs timeline (no '" + std::string(kHeader) + "' header)";
    return false;
  }
  int recording = 0;
  unsigned long long dropped = 0;
  if (std::sscanf(line.c_str() + sizeof(kHeader) - 1, " disks=%u recording=%d dropped=%llu",
                  &out->disks, &recording, &dropped) != 3) {
    *error = "bad timeline header: " + line;
    return false;
  }
  out->recording = recording != 0;
  out->dropped = dropped;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    char name[32];
    TimelineEvent e;
    long long start = 0, end = 0;
    unsigned who = 0, bytes = 0;
    if (std::sscanf(line.c_str(), "%31s %u %lld %lld %u", name, &who, &start, &end, &bytes) != 5) {
      *error = "bad timeline line " + std::to_string(number) + ": " + line;
      return false;
    }
    int activity = -1;
    for (int i = 0; i < kTimelineActivityCount; ++i) {
      if (std::strcmp(name, kNames[i]) == 0) activity = i;
    }
    if (activity < 0 || end < start) {
      *error = "bad timeline line " + std::to_string(number) + ": " + line;
      return false;
    }
    e.activity = static_cast<TimelineActivity>(activity);
    e.who = who;
    e.start_ns = start;
    e.end_ns = end;
    e.bytes = bytes;
    out->events.push_back(e);
  }
  return true;
}

}  // namespace tipfs
