// tipfs-tip-file-reader: reads a list of files in order, each whole in 64 KiB read() calls, with
// the future disclosed in one of three ways, to compare what disclosing costs in CPU:
//   plain    no disclosure (the original program)
//   fadvise  the kernel's own help: before reading, every file is opened, given
//            posix_fadvise(POSIX_FADV_WILLNEED) over its whole length, and closed (the page
//            cache starts reading them all); then the files are read in order
//   hint     tipfs path hints of every file, in order (TIPFS_IOC_HINT_PATHS through the C
//            helpers, issued on the directory given by --mount), then the files are read
// CPU is this process's user + sys time (getrusage), split into the disclosure phase and the
// whole run; with --daemon-pid also the tipfs daemon's user + sys time over the same two spans
// (from /proc/PID/stat, in clock ticks of 10 ms).
//
// Output (one line on stdout):
//   file_reader mode=.. files=.. bytes=.. elapsed=..s ahead_elapsed=..s user=..s sys=..s
//   ahead_user=..s ahead_sys=..s daemon=..s daemon_ahead=..s checksum=..
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "tipfs/hint.h"

namespace {

double CpuSeconds(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; }

struct Cpu {
  double user = 0, sys = 0;
};

Cpu Now() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return Cpu{CpuSeconds(usage.ru_utime), CpuSeconds(usage.ru_stime)};
}

// user + sys seconds of process `pid` so far (0 without a pid or when unreadable).
double ProcessCpu(int pid) {
  if (pid <= 0) return 0;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {  // fields 14 and 15 of proc(5)
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Read files in order, disclosed ahead by fadvise or tipfs hints (bench/tip)"};
  std::string list, mode = "plain", mount;
  size_t chunk = 64 * 1024;
  int daemon_pid = 0;
  app.add_option("--list", list, "File with one absolute path per line, in read order")->required();
  app.add_option("--mode", mode, "plain | fadvise | hint")
      ->check(CLI::IsMember({"plain", "fadvise", "hint"}));
  app.add_option("--mount", mount, "A directory of the tipfs mount (for --mode hint)");
  app.add_option("--chunk", chunk, "Bytes per read() (default 65536)");
  app.add_option("--daemon-pid", daemon_pid, "Also report this process's CPU (the tipfs daemon)");
  CLI11_PARSE(app, argc, argv);

  std::vector<std::string> files;
  {
    std::ifstream in(list);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) files.push_back(line);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "file_reader: no files in %s\n", list.c_str());
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  const double daemon0 = ProcessCpu(daemon_pid);
  const Cpu cpu0 = Now();
  if (mode == "fadvise") {
    for (const std::string& f : files) {
      const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        std::fprintf(stderr, "file_reader: %s: %s\n", f.c_str(), std::strerror(errno));
        return 1;
      }
      (void)posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
      close(fd);
    }
  } else if (mode == "hint") {
    const int dir = open(mount.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    std::vector<const char*> paths;
    for (const std::string& f : files) paths.push_back(f.c_str());
    if (dir < 0 || tipfs_hint_files(dir, paths.data(), paths.size(), TIPFS_SOURCE_MANUAL) != 0) {
      std::fprintf(stderr, "file_reader: hints failed on %s: %s\n", mount.c_str(),
                   std::strerror(errno));
      return 1;
    }
    close(dir);
  }
  const Cpu cpu_ahead = Now();
  const double daemon_ahead = ProcessCpu(daemon_pid);
  const double ahead_elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<char> buffer(chunk);
  uint64_t bytes = 0, checksum = 0;
  for (const std::string& f : files) {
    const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      std::fprintf(stderr, "file_reader: %s: %s\n", f.c_str(), std::strerror(errno));
      return 1;
    }
    ssize_t n;
    while ((n = read(fd, buffer.data(), buffer.size())) > 0) {
      bytes += static_cast<uint64_t>(n);
      for (ssize_t i = 0; i < n; i += 4096)
        checksum = checksum * 31 + static_cast<unsigned char>(buffer[i]);
    }
    close(fd);
    if (n < 0) {
      std::fprintf(stderr, "file_reader: read %s: %s\n", f.c_str(), std::strerror(errno));
      return 1;
    }
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const Cpu cpu1 = Now();
  const double daemon1 = ProcessCpu(daemon_pid);
  std::printf(
      "file_reader mode=%s files=%zu bytes=%" PRIu64
      " elapsed=%.4fs ahead_elapsed=%.4fs "
      "user=%.4fs sys=%.4fs ahead_user=%.4fs ahead_sys=%.4fs daemon=%.2fs daemon_ahead=%.2fs "
      "checksum=%016" PRIx64 "\n",
      mode.c_str(), files.size(), bytes, elapsed, ahead_elapsed, cpu1.user - cpu0.user,
      cpu1.sys - cpu0.sys, cpu_ahead.user - cpu0.user, cpu_ahead.sys - cpu0.sys, daemon1 - daemon0,
      daemon_ahead - daemon0, checksum);
  return 0;
}
