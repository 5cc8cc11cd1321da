// The picture of a run: one row per disk showing when it had requests outstanding and for what
// (demand, read-ahead, hinted prefetch, speculative prefetch, writes), a row of the program's
// stalls, a time axis and a legend; plain SVG written here, no plotting program needed. Also the
// figures the picture shows (each disk's busy share, how many disks worked at once), for a line
// of text beside it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/timeline.h"

namespace tipfs::cli {

struct TimelineSummary {
  double seconds = 0;             // the window
  std::vector<double> disk_busy;  // share of the window each disk was busy
  double disks_at_once = 0;       // mean disks busy while any was
  double stall_seconds = 0;       // union of the program's stalls
  uint64_t events = 0;            // inside the window
};

// Events overlapping [start_ns, end_ns], clipped to it (stalls of every reading process).
TimelineSummary SummarizeTimeline(const TimelineData& data, int64_t start_ns, int64_t end_ns);

// The SVG document. `title` names the run (the command line).
std::string RenderTimelineSvg(const TimelineData& data, int64_t start_ns, int64_t end_ns,
                              const std::string& title);

// One line for the terminal: "4 disks busy 71% 69% 70% 72%, 3.6 at once; stalls 0.42 s of 3.1 s".
std::string DescribeTimeline(const TimelineSummary& summary);

}  // namespace tipfs::cli
