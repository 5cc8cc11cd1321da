#include "fusefs/process_ids.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tipfs::fusefs {
namespace {

constexpr size_t kSlots = 4096;
// Each slot packs (tid << 32 | tgid) so one atomic load answers without a lock; `checked` holds
// when the kernel last confirmed it (coarse monotonic milliseconds, wrapping).
std::atomic<uint64_t> slots[kSlots];
std::atomic<uint32_t> checked[kSlots];

// How long a confirmed answer is given without asking the kernel again. A thread id comes back
// only after the kernel's cyclic allocator has handed out every other id below pid_max (at least
// 32768 - 300 by default): some 30,000 process or thread creations, which take far longer than
// this on any machine. (A process with CAP_SYS_ADMIN can pick an id with clone3's set_tid; such a
// caller is root already.)
constexpr uint32_t kTrustMillis = 100;

uint32_t NowMillis() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);  // vDSO: no system call
  return static_cast<uint32_t>(ts.tv_sec * 1000 + ts.tv_nsec / 1'000'000);
}

// A numeric field ("\nTgid:", "\nPPid:") of /proc/<pid>/status; `fallback` when absent.
uint32_t StatusField(uint32_t pid, const char* field, uint32_t fallback) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%u/status", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fallback;
  char buffer[1024];
  ssize_t n = read(fd, buffer, sizeof(buffer) - 1);
  close(fd);
  if (n <= 0) return fallback;
  buffer[n] = '\0';
  const char* line = std::strstr(buffer, field);
  if (line == nullptr) return fallback;
  return static_cast<uint32_t>(std::strtoul(line + std::strlen(field), nullptr, 10));
}

// True when thread `tid` belongs to thread group `tgid` now. tgkill with signal 0 delivers
// nothing: the kernel looks the thread up and answers ESRCH unless its group is `tgid` (EPERM
// means found, but ours may not signal it).
bool StillInGroup(uint32_t tid, uint32_t tgid) {
  return syscall(SYS_tgkill, static_cast<pid_t>(tgid), static_cast<pid_t>(tid), 0) == 0 ||
         errno == EPERM;
}

}  // namespace

uint32_t ProcessOf(uint32_t tid) {
  const size_t index = tid % kSlots;
  const uint32_t now = NowMillis();
  const uint32_t confirmed = checked[index].load(std::memory_order_acquire);
  const uint64_t packed = slots[index].load(std::memory_order_relaxed);
  if (packed >> 32 == tid && packed != 0) {
    const uint32_t tgid = static_cast<uint32_t>(packed);
    // Recently confirmed, or confirmed now: the caller's thread is blocked in its FUSE request
    // while we answer it, so its id cannot change hands before the reply.
    if (now - confirmed < kTrustMillis) return tgid;
    if (StillInGroup(tid, tgid)) {
      checked[index].store(now, std::memory_order_release);
      return tgid;
    }
  }
  const uint32_t tgid = StatusField(tid, "\nTgid:", tid);
  slots[index].store((uint64_t{tid} << 32) | tgid, std::memory_order_relaxed);
  checked[index].store(now, std::memory_order_release);
  return tgid;
}

uint32_t ParentOf(uint32_t tgid) { return StatusField(tgid, "\nPPid:", 0); }

}  // namespace tipfs::fusefs
