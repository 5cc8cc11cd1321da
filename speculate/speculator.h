// Speculator: the program's side of libtipspec. It owns the hint log mapping, forks speculating
// children, checks each real read of a watched file against the log (SpecHint's on-track
// check), restarts speculation when it goes off track, and keeps the counters.
//
// One process-wide instance. The read hooks are called from the interposed read functions of
// any thread, but speculation follows one thread (the first that reads a watched file); the
// others pass through. State changes happen under mu_; the per-fd classification is atomic.
// The fast path for a descriptor not on the mount is one array load, no system call; for a
// read of the mount while no child runs and none is due, two clock reads (vDSO), no lock (with
// history on, one lseek and one lock more).
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "speculate/fd_snapshot.h"
#include "speculate/fork_policy.h"
#include "speculate/history.h"
#include "speculate/mount_watch.h"
#include "speculate/options.h"
#include "speculate/read_site.h"
#include "speculate/seccomp_filter.h"
#include "speculate/shared_log.h"
#include "speculate/site_waits.h"
#include "tipfs/spec.h"

namespace tipfs::spec {

// Holds a pthread mutex for a scope (the Speculator's lock must be a plain pthread mutex: it is
// re-initialised in the program's own fork children, see AfterForkInChild).
class Locked {
 public:
  explicit Locked(pthread_mutex_t* mu) : mu_(mu) { pthread_mutex_lock(mu_); }
  ~Locked() { pthread_mutex_unlock(mu_); }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;

 private:
  pthread_mutex_t* mu_;
};

class Speculator {
 public:
  static Speculator& Instance();

  // Not thread-safe against itself; call once (the library constructor or tipspec_start).
  Status Start(const SpecOptions& options);
  // Ends the child, cancels its hints, turns speculation off.
  void Stop();
  bool active() const { return active_.load(std::memory_order_relaxed); }

  // Fast-path filter for the interposed read functions: false for descriptors known not to be
  // watched (and whenever speculation is off).
  bool MaybeWatched(int fd) const {
    if (!active() || fd < 0 || fd >= kMaxFds || fds_ == nullptr) return false;
    return fds_[fd].state.load(std::memory_order_acquire) != kUnwatched;
  }
  // True when fd is a watched file (classifies it on first use). Also in the speculating child,
  // so that the child makes the same choices the program makes (stdio streams, for one).
  bool IsWatched(int fd);
  // Speculation was started and not stopped (true in the child too, unlike active()).
  bool started() const { return started_.load(std::memory_order_relaxed); }
  // A descriptor number is about to be closed or was (re)assigned: forget what we knew about it
  // (a read of it still waiting to be recorded is recorded now, while the path is known).
  void ForgetFd(int fd) {
    if (fds_ != nullptr && fd >= 0 && fd < kMaxFds) {
      if (pending_read_ready_.load(std::memory_order_acquire)) RecordPendingReadOf(fd);
      fds_[fd].state.store(kUnknown, std::memory_order_relaxed);
    }
  }

  // What BeforeRead found out about a read, for AfterRead: start_nanos > 0 when the read is
  // watched; offset where it starts (-1: not needed, or unknown).
  struct ReadTicket {
    int64_t start_nanos = 0;
    int64_t offset = -1;
    bool hinted = false;  // it matched the running child's next logged read
  };
  // Around a real read of `fd` at `explicit_offset` (< 0: the current offset). BeforeRead checks
  // the read against the child (and forks), AfterRead measures the stall and hands the read
  // (`result`: what it returned) to the history. At most one lseek and one lock per read: the
  // history takes the read at the lock of the program's next read (or its close, exit or exec).
  ReadTicket BeforeRead(int fd, int64_t explicit_offset);
  void AfterRead(const ReadTicket& ticket, int fd, ssize_t result);

  // The program is about to exec: the child must not outlive the image it speculates on.
  void BeforeExec();
  // The process ends in _exit(2): its counters are printed (if asked), nothing is saved (the
  // recording and the sites of a run that ended this way are not kept). Not in a speculating
  // child, nor in a vfork child (which shares the parent's memory: its pid is not the program's).
  void BeforeQuickExit();
  // In the program's own fork children: forget the parent's child and log; start afresh.
  void AfterForkInChild();

  void Query(tipspec_counters* out);
  void PrintStatsIfAsked();

 private:
  static constexpr int kMaxFds = 65536;
  enum : uint8_t { kUnknown = 0, kUnwatched = 1, kWatched = 2 };
  // dev and ino are written before `state` is stored with release, and read after it is loaded
  // with acquire: a thread that sees kWatched sees the file it belongs to.
  struct FdInfo {
    std::atomic<uint8_t> state;
    uint64_t dev;
    uint64_t ino;
  };
  // kLosing: behind for long, and it cost more than the allowance (ForkPolicy::ChildOverBudget).
  enum class StopCause { kMismatch, kBehind, kLosing, kChildEnded, kExec, kStop };

  // A read the program did before its child had logged it (the child not ahead yet).
  struct OwedRead {
    uint64_t dev;
    uint64_t ino;
    uint64_t offset;
  };

  Speculator();
  bool OwnedByCallingThread();
  bool Classify(int fd);
  // REQUIRES: mu_ held.
  void CheckRead(uint64_t dev, uint64_t ino, uint64_t offset);
  // REQUIRES: mu_ held, a child running, not lockstep. Matches the read with the log, ends the
  // child when it is off track; a child that is merely not there yet keeps running.
  void CheckAgainstChild(uint64_t dev, uint64_t ino, uint64_t offset);
  // REQUIRES: mu_ held, lockstep. Waits for the child's next log entry.
  void CheckInLockstep(uint64_t dev, uint64_t ino, uint64_t offset);
  // REQUIRES: mu_ held, lockstep. Waits until the child has made its first `entries` logged
  // reads (or ended).
  void WaitForChildsRead(uint64_t entries);
  // REQUIRES: mu_ held. Consumed one more log entry: lets a child waiting for room go on.
  void Consumed();
  // The fast path's test: the last read stalled and speculation may fork at all.
  bool MayFork() const;
  // REQUIRES: mu_ held. A fork opportunity: the policy's decision (counts deferrals).
  bool ForkDue();
  // REQUIRES: mu_ held. The running child ends (`cause`): when it went astray soon after its
  // first read of data it did not get, that read's site is data-critical from now on.
  void LearnFrom(StopCause cause);
  // REQUIRES: mu_ held, TIPSPEC_WAIT=learned. The ended child was judged (`paid`): tells
  // site_waits_, and drops the waits or forgets the sites when it says so.
  void JudgeSiteWaits(bool paid);
  // Stores the sites learned in this run with those of earlier runs (TIPSPEC_LEARN); after a
  // refutation, exactly the sites still held, and the refuted ones apart.
  void SaveLearnedSites();
  // REQUIRES: mu_ held. Starts recording this run and replaying the last one (TIPSPEC_HISTORY).
  void StartHistory();
  // REQUIRES: mu_ held. Ends the replay and saves this run's recording (at exit and exec).
  void FinishHistory();
  // REQUIRES: mu_ held. Gives the history the program's last read, if not given yet.
  void RecordPendingRead();
  // Takes mu_: RecordPendingRead when the read waiting is one of `fd`.
  void RecordPendingReadOf(int fd);
  // The mount's count of the hinted blocks this process consumed, by source (all zero in log
  // mode or when the mount cannot say).
  void QueryMount(tipspec_counters* out) const;
  // REQUIRES: mu_ held. What the minor faults since the last call cost (copy-on-write after
  // forks; 0 before the first fork).
  int64_t FaultNanosSinceLastCall();
  // The thread speculation follows, after a read of `took` nanoseconds that returned data: a read
  // without a hint adds to the estimate of what a read costs, one with a hint saved the running
  // child's account the difference.
  void AccountRead(bool hinted, int64_t took);
  bool InProgramProcess() const;
  void Fork();
  // A child reaped already: its wait status and the CPU time it used.
  struct Reaped {
    int status;
    int64_t cpu_nanos;
  };
  // `reaped`: the child was already reaped.
  void EndChild(StopCause cause, const Reaped* reaped = nullptr);
  // REQUIRES: mu_ held. Charges the ended child (`cpu_nanos`, its reads, its faults, `teardown`)
  // and has the policy judge it.
  bool JudgeChild(int64_t cpu_nanos, int64_t teardown_nanos);
  // REQUIRES: mu_ held, a child running. What it has cost that is charged only when it ends:
  // its CPU time so far and the daemon's work for its reads.
  int64_t UnbilledChildNanos(int64_t cpu_nanos) const;
  // REQUIRES: mu_ held. Counts what the child of `slot` did, from its log and wait status.
  void RecordChildExit(int slot, int wait_status);
  // REQUIRES: mu_ held. Reaps the killed children that have exited (all of them, waiting, when
  // `wait`), counts them, cancels their epochs once more and frees their logs.
  void ReapKilledChildren(bool wait);
  // REQUIRES: mu_ held. A log no child writes to, mapped on first use; -1 if none is free (with
  // `wait`, waits for a killed child to exit instead) or none can be mapped.
  int FreeLogSlot(bool wait);

  // Constant after Start.
  SpecOptions options_;
  MountWatch watch_;
  HintSink sink_;
  SandboxFilter filter_;
  FdInfo* fds_ = nullptr;
  FdSnapshot* snapshot_ = nullptr;  // filled right before each fork (the fork copies it)
  uint64_t stream_ = 0;

  std::atomic<bool> active_{false};
  std::atomic<bool> started_{false};
  std::atomic<pid_t> owner_tid_{0};
  // Set by whichever thread reaps a child that could not sandbox itself, read by every reading
  // thread's fast path.
  std::atomic<bool> disabled_after_failure_{false};

  // child_pid_ > 0, readable without mu_ by the fast path of the thread speculation follows.
  std::atomic<bool> child_running_{false};

  pthread_mutex_t mu_ = PTHREAD_MUTEX_INITIALIZER;  // protects everything below
  // Hint logs, one per child that may still write to it: the running one, and killed ones not
  // reaped yet (a SIGKILLed child still runs until it takes the signal, and on a loaded machine
  // an idle-priority process can take long to exit: the program does not wait for it).
  static constexpr int kLogSlots = 8;
  struct LogSlot {
    SharedLog* log = nullptr;
    pid_t child = 0;  // 0: free
    uint32_t epoch = 0;
    bool keep_clean = false;  // the child ended by itself: its clean hints stay at its reaping
  };
  LogSlot slots_[kLogSlots];
  int slot_ = -1;             // the running (or last forked) child's
  SharedLog* log_ = nullptr;  // slots_[slot_].log
  pid_t child_pid_ = 0;
  uint32_t epoch_ = 0;
  bool ever_forked_ = false;
  int64_t last_read_nanos_ = 0;
  ForkPolicy policy_;
  uint64_t child_consumed_ = 0;      // hints of the running child the program used
  uint64_t child_reads_behind_ = 0;  // reads the program did before its child since one matched
  // The program's time in stalled reads (added by the thread speculation follows, no lock), and
  // its value at the running child's fork.
  std::atomic<int64_t> stalled_nanos_{0};
  int64_t stalled_at_fork_ = 0;
  // Stall its used hints saved the program: added by the thread speculation follows (AfterRead,
  // no lock), taken under mu_ when the child ends.
  std::atomic<int64_t> child_saved_nanos_{0};
  // The program's reads that returned data without a hint (the thread speculation follows
  // only): their mean is what a hinted read would have cost without its hint.
  int64_t unhinted_read_nanos_ = 0;
  uint64_t unhinted_reads_ = 0;
  // The read being checked matched the child's log (set by CheckRead under mu_, for BeforeRead).
  bool read_hinted_ = false;
  int64_t child_cpu_nanos_ = 0;      // CPU time of the children ended so far
  long faults_charged_ = -1;         // minor faults counted so far; -1 before the first fork
  uint64_t forks_without_slot_ = 0;  // fork chances skipped: every log held by a dying child
  uint64_t children_waiting_ = 0;    // children forked waiting for every read
  // Read sites (read_site.h): the loaded objects (refreshed before each fork) and the sites
  // learned to be data-critical, in this run and (TIPSPEC_LEARN) earlier ones of this program.
  ObjectTable objects_;
  CriticalSites sites_;
  uint64_t program_key_ = 0;
  uint64_t sites_known_ = 0;    // at start (earlier runs)
  uint64_t sites_learned_ = 0;  // in this run
  bool sites_unsaved_ = false;
  // Whether the learned sites pay (site_waits.h); the running child was given them; the sites
  // given up to the drop; the sites refuted (in earlier runs, and in this one).
  SiteWaitJudge site_waits_;
  bool child_given_sites_ = false;
  CriticalSites no_sites_;
  CriticalSites dropped_sites_;
  CriticalSites refuted_;
  CriticalSites unpredictable_;  // ChildConfig::unpredictable
  CriticalSites not_whole_;      // ChildConfig::not_whole
  bool refuted_now_ = false;     // in this run: the store is replaced, not merged with
  // Hints from the last run (history.h), in the program process only.
  HistoryRecorder recorder_;
  HistoryReplay replay_;
  uint64_t history_key_ = 0;
  // recorder_ or replay_ wants the program's reads (readable without mu_ by the reading thread).
  std::atomic<bool> history_reads_{false};
  // The program's last read for the history, not given to it yet. Written without mu_ by the
  // thread speculation follows, in AfterRead, only while pending_read_ready_ is false (then
  // stored true with release); read and cleared under mu_ after an acquire load finds it true.
  // The owner writes again only after its next BeforeRead cleared it under mu_, so a holder of
  // mu_ that sees it true reads a stable record.
  struct PendingRead {
    int fd = -1;
    uint64_t dev = 0;
    uint64_t ino = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
  };
  PendingRead pending_read_;
  std::atomic<bool> pending_read_ready_{false};
  // The last child was useful: fork the next one at the next read, stall or not.
  bool fork_at_next_read_ = false;
  // Reads the program did before the running child logged them, oldest first (a ring).
  std::vector<OwedRead> owed_;
  size_t owed_head_ = 0;
  size_t owed_count_ = 0;
  tipspec_counters counters_{};
};

}  // namespace tipfs::spec
