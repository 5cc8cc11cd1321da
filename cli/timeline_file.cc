// Recording a timeline on a mount and writing its picture: what `tipfs run --timeline` and
// `tipfs stats --timeline` share. The daemon records while asked (.tipfs/timeline: write
// "start"/"stop", read the events); the picture is drawn here (timeline_svg.h).
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/timeline_svg.h"

namespace tipfs::cli {
namespace {

Status WriteControl(const std::string& mountpoint, const char* command) {
  const std::string path = mountpoint + "/.tipfs/timeline";
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + path);
  const ssize_t n = write(fd, command, std::strlen(command));
  const int err = errno;
  close(fd);
  if (n < 0) return ErrnoStatus("write '" + std::string(command) + "' to " + path, err);
  return Status::OK();
}

}  // namespace

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

Status CheckTimelinePath(const std::string& svg_path) {
  // Before the run: a picture that cannot be written should not cost a whole run.
  const int fd = open(svg_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("--timeline " + svg_path);
  close(fd);
  return Status::OK();
}

Status StartTimeline(const std::string& mountpoint) { return WriteControl(mountpoint, "start"); }

Result<std::string> FinishTimeline(const std::string& mountpoint, int64_t start_ns, int64_t end_ns,
                                   const std::string& svg_path, const std::string& title) {
  const std::string path = mountpoint + "/.tipfs/timeline";
  std::ifstream in(path);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  const bool read_ok = static_cast<bool>(in);
  (void)WriteControl(mountpoint, "stop");
  if (!read_ok) return ErrnoStatus("read " + path);
  TimelineData data;
  std::string error;
  if (!ParseTimeline(text.str(), &data, &error)) return Status::IOError(path + ": " + error);
  const std::string svg = RenderTimelineSvg(data, start_ns, end_ns, title);
  const std::string tmp = svg_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << svg;
    if (!out.flush()) return ErrnoStatus("write " + tmp);
  }
  if (rename(tmp.c_str(), svg_path.c_str()) != 0) return ErrnoStatus("rename to " + svg_path);
  return DescribeTimeline(SummarizeTimeline(data, start_ns, end_ns));
}

}  // namespace tipfs::cli
