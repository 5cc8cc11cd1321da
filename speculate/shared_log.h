// SharedLog: the hint log between the program (parent) and its speculating child (SpecHint's
// hint log). It lives in a MAP_SHARED|MAP_ANONYMOUS mapping created before the child is forked.
//
// One writer (the child appends each read of a watched file), one reader (the program's
// speculating thread matches each of its real reads against the next entry). The child's reads up
// to and including its first read answered without data are clean; later ones are tainted, and
// the child pauses when its tainted bytes ahead of the program reach max_tainted_bytes (the
// mount's tainted budget: what it hints beyond would be trimmed anyway). Entries are
// published with release stores of `appended` and read after acquire loads, so no lock is
// needed; the futex words let either side sleep: the child when it is too far ahead (bounded
// run-ahead), the parent in lockstep mode when the log is behind. Async-signal-safe: the child
// uses it from its SIGSYS handler.
#pragma once

#include <atomic>
#include <cstdint>

namespace tipfs::spec {

struct LogEntry {
  uint64_t dev;
  uint64_t ino;
  uint64_t offset;
  uint64_t length;
};

// Why a child stopped speculating (SharedLog::end_reason). Names in EndReasonName().
enum class EndReason : uint32_t {
  kNone = 0,
  kProgramExit = 1,        // the program finished in the child
  kForbiddenSyscall = 2,   // a call the sandbox does not allow (end_syscall says which)
  kStreamRead = 3,         // a read of a pipe, socket or terminal it shares with the program, or
                           // an open of a FIFO, socket or device
  kSharedMemoryWrite = 4,  // a write mapping of memory or a file it shares with the program
  kSignalToOther = 5,      // a signal to another process
  kParentGone = 6,         // the program went away
  kStartupFailed = 7,      // the sandbox could not be set up
  kCount = 8,
};
const char* EndReasonName(EndReason reason);

enum class MatchResult { kMatched, kMismatch, kBehind };

// How the child answered one of its logged reads (SharedLog::answers).
enum : uint8_t {
  kAnsweredWithData = 0,  // cached, or waited for
  kAnsweredGarbage = 1,   // without data: with whatever the buffer held
  kAnsweredPadded = 2,    // without data: a kept read padded to the read's length (ReadPredictor)
  kAnsweredWhole = 3,     // without data: a whole file kept, at its own length, then end of file
};

struct SharedLog {
  static constexpr uint32_t kCapacity = 4096;

  // Parent, before forking a child. REQUIRES: no child is running.
  void Reset(uint32_t max_hints, uint64_t max_bytes, uint64_t max_tainted);

  // Child: true when one more entry keeps the child within its run-ahead bound. An entry is
  // always allowed when nothing is outstanding, so a single huge read cannot stall the child.
  bool HasRoom() const;
  // Child: publish an entry. REQUIRES: HasRoom().
  void Append(const LogEntry& entry);

  // Parent: compare one real read with the next entry; on a match, consume it.
  MatchResult MatchNext(uint64_t dev, uint64_t ino, uint64_t offset);

  uint64_t Outstanding() const {
    return appended.load(std::memory_order_acquire) - consumed.load(std::memory_order_acquire);
  }

  // Set by the parent before the fork, constant while the child runs.
  uint32_t max_ahead_hints;
  uint64_t max_ahead_bytes;
  uint64_t max_tainted_bytes;

  // Child: its first read answered without data was logged as entry `index` (0-based), from
  // read site `site`; `clean_logged` bytes were logged up to and including it. Later entries
  // are tainted.
  void MarkTainted(uint64_t index, uint64_t site, uint64_t clean_logged);
  bool tainted() const { return without_data_at.load(std::memory_order_acquire) != 0; }

  // Child: logged entry `index` was answered without data, `how` (kAnswered*), at read site
  // `site`. Before it logs the next entry, so the parent sees it once it sees that one.
  void MarkAnswer(uint64_t index, uint8_t how, uint64_t site);
  // Parent: the latest of the `window` entries before entry `end` that the child answered without
  // data: how, and where; false when none of them was (or they were written over).
  bool LatestWithoutData(uint64_t end, uint64_t window, uint8_t* how, uint64_t* site) const;

  std::atomic<uint32_t> ended;  // 1 once the child stopped speculating
  std::atomic<uint32_t> end_reason;
  std::atomic<uint32_t> end_syscall;
  std::atomic<uint32_t> exit_status;   // kProgramExit: the status the program's code exited with
  std::atomic<uint32_t> appended_seq;  // futex word: low bits of `appended`
  std::atomic<uint32_t> consumed_seq;  // futex word: low bits of `consumed`
  std::atomic<uint32_t> parent_waiting;
  std::atomic<uint32_t> child_waiting;
  std::atomic<uint64_t> appended;
  std::atomic<uint64_t> consumed;
  std::atomic<uint64_t> bytes_appended;
  std::atomic<uint64_t> bytes_consumed;
  std::atomic<uint64_t> reads_without_data;  // child reads answered EAGAIN by the mount
  // 1 + the index of the child's first read answered without data (0: none yet), its read site,
  // and the bytes logged before the first tainted entry (what counts against max_tainted_bytes
  // is what was logged after).
  std::atomic<uint64_t> without_data_at;
  std::atomic<uint64_t> without_data_site;
  std::atomic<uint64_t> clean_bytes;
  std::atomic<uint64_t> tainted_appended;       // entries logged after the first without data
  std::atomic<uint64_t> waits_at_sites;         // reads the child waited for at learned sites
  std::atomic<uint64_t> reads_predicted;        // reads without data given predicted bytes instead
  std::atomic<uint64_t> reads_predicted_whole;  // of those, given a whole file (and its end)
  // Lockstep only: logged reads the child has made (its read returned), and a futex word that
  // changes with it, so the program can do its own read only after the child's.
  std::atomic<uint64_t> reads_done;
  std::atomic<uint32_t> reads_done_seq;
  LogEntry entries[kCapacity];
  // Per entry, how the child answered the read and (when without data) from which read site:
  // the program judges the read a child went astray after (Speculator::LearnFrom).
  std::atomic<uint8_t> answers[kCapacity];
  std::atomic<uint64_t> answer_sites[kCapacity];
};

// Futex helpers on a word of a shared (not process-private) mapping, through RawSyscall so the
// child may use them under its seccomp filter. timeout_ns < 0 waits without a limit.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns);
void FutexWakeAll(std::atomic<uint32_t>* word);

}  // namespace tipfs::spec
