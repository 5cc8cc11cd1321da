#include "fusefs/process_ids.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tipfs::fusefs {
namespace {

constexpr size_t kSlots = 4096;
// Each slot packs (tid << 32 | tgid) so one atomic load answers without a lock.
std::atomic<uint64_t> slots[kSlots];

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

}  // namespace

uint32_t ProcessOf(uint32_t tid) {
  std::atomic<uint64_t>& slot = slots[tid % kSlots];
  uint64_t packed = slot.load(std::memory_order_relaxed);
  if (packed >> 32 == tid && packed != 0) return static_cast<uint32_t>(packed);
  uint32_t tgid = StatusField(tid, "\nTgid:", tid);
  slot.store((uint64_t{tid} << 32) | tgid, std::memory_order_relaxed);
  return tgid;
}

uint32_t ParentOf(uint32_t tgid) { return StatusField(tgid, "\nPPid:", 0); }

}  // namespace tipfs::fusefs
