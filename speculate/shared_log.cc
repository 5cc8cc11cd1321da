#include "speculate/shared_log.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>

#include "speculate/raw_syscall.h"

namespace tipfs::spec {

const char* EndReasonName(EndReason reason) {
  switch (reason) {
    case EndReason::kNone:
      return "none";
    case EndReason::kProgramExit:
      return "program_exit";
    case EndReason::kForbiddenSyscall:
      return "forbidden_syscall";
    case EndReason::kStreamRead:
      return "stream_read";
    case EndReason::kSharedMemoryWrite:
      return "shared_memory_write";
    case EndReason::kSignalToOther:
      return "signal_to_other";
    case EndReason::kParentGone:
      return "parent_gone";
    case EndReason::kStartupFailed:
      return "startup_failed";
    case EndReason::kCount:
      break;
  }
  return "unknown";
}

void SharedLog::Reset(uint32_t max_hints, uint64_t max_bytes, uint64_t max_tainted) {
  max_ahead_hints = max_hints == 0 ? 1 : (max_hints >= kCapacity ? kCapacity - 1 : max_hints);
  max_ahead_bytes = max_bytes;
  max_tainted_bytes = max_tainted;
  without_data_at.store(0);
  without_data_site.store(0);
  exit_status.store(0);
  clean_bytes.store(0);
  tainted_appended.store(0);
  waits_at_sites.store(0);
  reads_predicted.store(0);
  reads_predicted_whole.store(0);
  ended.store(0);
  end_reason.store(0);
  end_syscall.store(0);
  appended_seq.store(0);
  consumed_seq.store(0);
  parent_waiting.store(0);
  child_waiting.store(0);
  appended.store(0);
  consumed.store(0);
  bytes_appended.store(0);
  bytes_consumed.store(0);
  reads_without_data.store(0);
  reads_done.store(0);
  reads_done_seq.store(0);
}

bool SharedLog::HasRoom() const {
  uint64_t done = consumed.load(std::memory_order_acquire);
  uint64_t written = appended.load(std::memory_order_relaxed);
  if (written == done) return true;
  if (written - done >= max_ahead_hints) return false;
  const uint64_t appended_bytes = bytes_appended.load(std::memory_order_relaxed);
  const uint64_t consumed_bytes = bytes_consumed.load(std::memory_order_acquire);
  if (appended_bytes - consumed_bytes >= max_ahead_bytes) return false;
  if (!tainted()) return true;
  // Tainted bytes ahead: logged after the first tainted entry and not yet consumed.
  const uint64_t clean = clean_bytes.load(std::memory_order_relaxed);
  const uint64_t tainted_start = consumed_bytes > clean ? consumed_bytes : clean;
  return appended_bytes - tainted_start < max_tainted_bytes;
}

void SharedLog::MarkTainted(uint64_t index, uint64_t site, uint64_t clean_logged) {
  clean_bytes.store(clean_logged, std::memory_order_relaxed);
  without_data_site.store(site, std::memory_order_relaxed);
  without_data_at.store(index + 1, std::memory_order_release);
}

void SharedLog::Append(const LogEntry& entry) {
  uint64_t index = appended.load(std::memory_order_relaxed);
  entries[index % kCapacity] = entry;
  answers[index % kCapacity].store(kAnsweredWithData, std::memory_order_relaxed);
  bytes_appended.store(bytes_appended.load(std::memory_order_relaxed) + entry.length,
                       std::memory_order_relaxed);
  appended.store(index + 1, std::memory_order_release);
  appended_seq.store(static_cast<uint32_t>(index + 1), std::memory_order_release);
}

void SharedLog::MarkAnswer(uint64_t index, uint8_t how, uint64_t site) {
  answer_sites[index % kCapacity].store(site, std::memory_order_relaxed);
  answers[index % kCapacity].store(how, std::memory_order_relaxed);
}

bool SharedLog::LatestWithoutData(uint64_t end, uint64_t window, uint8_t* how,
                                  uint64_t* site) const {
  const uint64_t written = appended.load(std::memory_order_acquire);
  if (end > written) end = written;
  for (uint64_t i = end; i > 0 && end - i < window; --i) {
    if (written - (i - 1) > kCapacity) return false;  // written over by later entries
    const uint8_t answer = answers[(i - 1) % kCapacity].load(std::memory_order_relaxed);
    if (answer == kAnsweredWithData) continue;
    *how = answer;
    *site = answer_sites[(i - 1) % kCapacity].load(std::memory_order_relaxed);
    return true;
  }
  return false;
}

MatchResult SharedLog::MatchNext(uint64_t dev, uint64_t ino, uint64_t offset) {
  uint64_t index = consumed.load(std::memory_order_relaxed);
  if (appended.load(std::memory_order_acquire) == index) return MatchResult::kBehind;
  const LogEntry& entry = entries[index % kCapacity];
  if (entry.dev != dev || entry.ino != ino || entry.offset != offset) {
    return MatchResult::kMismatch;
  }
  bytes_consumed.store(bytes_consumed.load(std::memory_order_relaxed) + entry.length,
                       std::memory_order_release);
  consumed.store(index + 1, std::memory_order_release);
  consumed_seq.store(static_cast<uint32_t>(index + 1), std::memory_order_release);
  return MatchResult::kMatched;
}

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  struct timespec timeout;
  struct timespec* timeout_ptr = nullptr;
  if (timeout_ns >= 0) {
    timeout.tv_sec = timeout_ns / 1000000000;
    timeout.tv_nsec = timeout_ns % 1000000000;
    timeout_ptr = &timeout;
  }
  RawSyscall(SYS_futex, reinterpret_cast<long>(word), FUTEX_WAIT, expected,
             reinterpret_cast<long>(timeout_ptr));
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  RawSyscall(SYS_futex, reinterpret_cast<long>(word), FUTEX_WAKE, 0x7fffffff);
}

}  // namespace tipfs::spec
