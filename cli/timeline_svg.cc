#include "cli/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace tipfs::cli {
namespace {

using Interval = std::pair<int64_t, int64_t>;

// Sorted, overlapping intervals merged.
std::vector<Interval> Union(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (!out.empty() && i.first <= out.back().second) {
      out.back().second = std::max(out.back().second, i.second);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

int64_t Length(const std::vector<Interval>& v) {
  int64_t total = 0;
  for (const Interval& i : v) total += i.second - i.first;
  return total;
}

bool Clip(const TimelineEvent& e, int64_t start, int64_t end, Interval* out) {
  if (e.end_ns < start || e.start_ns > end) return false;
  *out = {std::max(e.start_ns, start), std::min(e.end_ns, end)};
  return true;
}

// Lanes of a disk row, top to bottom.
constexpr TimelineActivity kLanes[] = {TimelineActivity::kDemand, TimelineActivity::kReadahead,
                                       TimelineActivity::kHinted, TimelineActivity::kSpeculative,
                                       TimelineActivity::kWrite};
const char* ColorOf(TimelineActivity a) {
  switch (a) {
    case TimelineActivity::kDemand:
      return "#d62728";  // red: a program waits for it
    case TimelineActivity::kReadahead:
      return "#7f7f7f";
    case TimelineActivity::kHinted:
      return "#1f77b4";
    case TimelineActivity::kSpeculative:
      return "#2ca02c";
    case TimelineActivity::kWrite:
      return "#ff7f0e";
    case TimelineActivity::kStall:
      return "#000000";
  }
  return "#000000";
}

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '&') {
      out += "&amp;";
    } else if (c == '"') {
      out += "&quot;";
    } else if (static_cast<unsigned char>(c) >= 0x20) {
      out += c;
    }
  }
  return out;
}

// A round step for about `target` ticks over `span` seconds (1, 2 or 5 times a power of ten).
double TickStep(double span, int target) {
  const double raw = span / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * power) return m * power;
  }
  return 10 * power;
}

}  // namespace

TimelineSummary SummarizeTimeline(const TimelineData& data, int64_t start_ns, int64_t end_ns) {
  TimelineSummary s;
  s.seconds = static_cast<double>(end_ns - start_ns) / 1e9;
  std::vector<std::vector<Interval>> per_disk(data.disks);
  std::vector<Interval> stalls;
  for (const TimelineEvent& e : data.events) {
    Interval i;
    if (!Clip(e, start_ns, end_ns, &i)) continue;
    ++s.events;
    if (e.activity == TimelineActivity::kStall) {
      stalls.push_back(i);
    } else if (e.who < data.disks) {
      per_disk[e.who].push_back(i);
    }
  }
  // Disks busy at once: sweep the union of each disk's intervals.
  std::vector<std::pair<int64_t, int>> edges;
  for (std::vector<Interval>& d : per_disk) {
    d = Union(std::move(d));
    s.disk_busy.push_back(end_ns > start_ns ? double(Length(d)) / double(end_ns - start_ns) : 0);
    for (const Interval& i : d) {
      edges.push_back({i.first, +1});
      edges.push_back({i.second, -1});
    }
  }
  std::sort(edges.begin(), edges.end());
  double weighted = 0, any = 0;
  int busy = 0;
  for (size_t k = 0; k < edges.size(); ++k) {
    busy += edges[k].second;
    if (k + 1 < edges.size() && busy > 0) {
      const double dt = double(edges[k + 1].first - edges[k].first);
      weighted += dt * busy;
      any += dt;
    }
  }
  s.disks_at_once = any > 0 ? weighted / any : 0;
  s.stall_seconds = double(Length(Union(std::move(stalls)))) / 1e9;
  return s;
}

std::string DescribeTimeline(const TimelineSummary& s) {
  char text[64];
  std::string out = std::to_string(s.disk_busy.size()) + " disks busy";
  for (double b : s.disk_busy) {
    std::snprintf(text, sizeof(text), " %.0f%%", 100 * b);
    out += text;
  }
  std::snprintf(text, sizeof(text), ", %.1f at once; stalls %.2f s of %.2f s", s.disks_at_once,
                s.stall_seconds, s.seconds);
  return out + text;
}

std::string RenderTimelineSvg(const TimelineData& data, int64_t start_ns, int64_t end_ns,
                              const std::string& title) {
  constexpr int kLeft = 120, kPlot = 1000, kRight = 20, kTop = 64, kLane = 7, kLaneGap = 1;
  constexpr int kRowGap = 10, kStallRow = 14;
  const int lanes = static_cast<int>(std::size(kLanes));
  const int row = lanes * (kLane + kLaneGap);
  const int disks = static_cast<int>(data.disks);
  const int stall_top = kTop + disks * (row + kRowGap);
  const int axis_y = stall_top + kStallRow + 8;
  const int height = axis_y + 70;
  const int width = kLeft + kPlot + kRight;
  const double span = std::max<double>(1.0, double(end_ns - start_ns));
  auto x_of = [&](int64_t t) { return kLeft + double(t - start_ns) / span * kPlot; };
  const TimelineSummary summary = SummarizeTimeline(data, start_ns, end_ns);

  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
                "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
                width, height, width, height, width, height);
  out += buf;
  out += "<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">" + Escape(title) +
         "</text>\n";
  out += "<text x=\"10\" y=\"38\">" + Escape(DescribeTimeline(summary)) + "</text>\n";
  // Legend.
  int lx = kLeft;
  out += "<g class=\"legend\">\n";
  for (TimelineActivity a :
       {TimelineActivity::kDemand, TimelineActivity::kReadahead, TimelineActivity::kHinted,
        TimelineActivity::kSpeculative, TimelineActivity::kWrite, TimelineActivity::kStall}) {
    const char* name = a == TimelineActivity::kStall ? "program stalled" : TimelineActivityName(a);
    std::snprintf(buf, sizeof(buf),
                  "<rect x=\"%d\" y=\"46\" width=\"12\" height=\"8\" fill=\"%s\"/>"
                  "<text x=\"%d\" y=\"54\">%s</text>\n",
                  lx, ColorOf(a), lx + 16, name);
    out += buf;
    lx += 30 + 7 * static_cast<int>(std::string(name).size());
  }
  out += "</g>\n";

  // Disk rows: per lane, the union of that activity's intervals, merged at pixel resolution.
  auto draw = [&](const std::vector<Interval>& intervals, double y, double h, const char* color) {
    double run_start = -1, run_end = -1;
    auto flush = [&] {
      if (run_start < 0) return;
      std::snprintf(buf, sizeof(buf),
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                    run_start, y, std::max(0.5, run_end - run_start), h, color);
      out += buf;
    };
    for (const Interval& i : Union(intervals)) {
      const double a = x_of(i.first), b = x_of(i.second);
      if (run_start >= 0 && a <= run_end + 0.5) {
        run_end = std::max(run_end, b);
        continue;
      }
      flush();
      run_start = a;
      run_end = b;
    }
    flush();
  };
  std::vector<std::vector<std::vector<Interval>>> lanes_of(
      disks, std::vector<std::vector<Interval>>(lanes));
  std::vector<Interval> stalls;
  for (const TimelineEvent& e : data.events) {
    Interval i;
    if (!Clip(e, start_ns, end_ns, &i)) continue;
    if (e.activity == TimelineActivity::kStall) {
      stalls.push_back(i);
      continue;
    }
    if (e.who >= data.disks) continue;
    for (int l = 0; l < lanes; ++l) {
      if (kLanes[l] == e.activity) lanes_of[e.who][l].push_back(i);
    }
  }
  for (int d = 0; d < disks; ++d) {
    const int y = kTop + d * (row + kRowGap);
    std::snprintf(buf, sizeof(buf),
                  "<g class=\"disk\" data-disk=\"%d\">\n"
                  "<text x=\"10\" y=\"%d\">disk %d  %.0f%% busy</text>\n"
                  "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f4f4f4\"/>\n",
                  d, y + row / 2 + 4, d, 100 * summary.disk_busy[d], kLeft, y, kPlot, row);
    out += buf;
    for (int l = 0; l < lanes; ++l) {
      draw(lanes_of[d][l], y + l * (kLane + kLaneGap), kLane, ColorOf(kLanes[l]));
    }
    out += "</g>\n";
  }
  std::snprintf(buf, sizeof(buf),
                "<g class=\"stalls\">\n<text x=\"10\" y=\"%d\">program stalled</text>\n"
                "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f4f4f4\"/>\n",
                stall_top + 11, kLeft, stall_top, kPlot, kStallRow);
  out += buf;
  draw(stalls, stall_top, kStallRow, ColorOf(TimelineActivity::kStall));
  out += "</g>\n";

  // Time axis.
  const double seconds = span / 1e9;
  const double step = TickStep(seconds, 10);
  std::snprintf(buf, sizeof(buf),
                "<g class=\"axis\">\n<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
                "stroke=\"black\"/>\n",
                kLeft, axis_y, kLeft + kPlot, axis_y);
  out += buf;
  for (double t = 0; t <= seconds + 1e-9; t += step) {
    const double x = kLeft + t / seconds * kPlot;
    std::snprintf(buf, sizeof(buf),
                  "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>"
                  "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g s</text>\n",
                  x, axis_y, x, axis_y + 5, x, axis_y + 18, t);
    out += buf;
  }
  std::snprintf(buf, sizeof(buf),
                "<text x=\"%d\" y=\"%d\">Each disk row: when it had requests outstanding, one "
                "lane per purpose (top to bottom: demand, read-ahead, hinted, speculative, "
                "write).%s</text>\n</g>\n</svg>\n",
                kLeft, axis_y + 40,
                data.dropped > 0 ? " Some events were dropped (the recording was full)." : "");
  out += buf;
  return out;
}

}  // namespace tipfs::cli
