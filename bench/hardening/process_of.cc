// Cost of mapping a FUSE request's thread id to its process (fusefs/process_ids.cc), which every
// read does: the remembered answer, the kernel check (tgkill(tgid, tid, 0)) a remembered answer
// gets every 100 ms, and the /proc/<tid>/status read of an answer not remembered yet.
// usage: tipfs-bench-process-of [--calls N] [--repeats R]   (prints a table of medians)
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "fusefs/process_ids.h"

namespace {

double NanosPerCall(long calls, const std::function<void()>& call) {
  timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < calls; ++i) call();
  clock_gettime(CLOCK_MONOTONIC, &b);
  return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / static_cast<double>(calls);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  long calls = 1'000'000;
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--calls") == 0 && i + 1 < argc) {
      calls = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else {
      std::printf(
          "usage: %s [--calls N] [--repeats R]\n"
          "ns per call, median of R runs of N calls: ProcessOf (remembered), tgkill(0)\n"
          "(the confirmation every 100 ms), a /proc/<tid>/status read (not remembered)\n",
          argv[0]);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  if (calls <= 0 || repeats <= 0) return 2;
  const uint32_t tid = static_cast<uint32_t>(gettid());
  const pid_t pid = getpid();
  volatile uint32_t sink = tipfs::fusefs::ProcessOf(tid);
  std::vector<double> remembered, confirmed, proc;
  for (int r = 0; r < repeats; ++r) {
    remembered.push_back(NanosPerCall(calls, [&] { sink = tipfs::fusefs::ProcessOf(tid); }));
    confirmed.push_back(NanosPerCall(calls / 10, [&] { syscall(SYS_tgkill, pid, tid, 0); }));
    proc.push_back(NanosPerCall(calls / 100, [&] {
      char path[64];
      std::snprintf(path, sizeof(path), "/proc/%u/status", tid);
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      char buffer[1024];
      sink = static_cast<uint32_t>(read(fd, buffer, sizeof(buffer)));
      close(fd);
    }));
  }
  (void)sink;
  std::printf("%-34s %10s\n", "lookup", "ns/call");
  std::printf("%-34s %10.1f\n", "ProcessOf, remembered", Median(remembered));
  std::printf("%-34s %10.1f\n", "tgkill(tgid, tid, 0) confirmation", Median(confirmed));
  std::printf("%-34s %10.1f\n", "/proc/<tid>/status read", Median(proc));
  std::printf("# %ld calls x %d, load average %s", calls, repeats, [] {
    static char load[64] = "?\n";
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
      if (std::fgets(load, sizeof(load), f) == nullptr) std::strcpy(load, "?\n");
      std::fclose(f);
    }
    return load;
  }());
  return 0;
}
