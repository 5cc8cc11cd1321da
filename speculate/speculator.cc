#include "speculate/speculator.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <string>

#include "speculate/child.h"
#include "speculate/raw_syscall.h"
#include "speculate/site_store.h"

namespace tipfs::spec {

namespace {

constexpr int64_t kLockstepPollNanos = 100'000'000;
constexpr int kLockstepMaxPolls = 100;  // a child silent for ~10 s is declared behind
// What one minor fault costs the program, charged to speculation for every fault after the first
// fork: each fork write-protects the program's memory, and its next write to every page takes a
// fault (and a copy while the child lives). Measured here: 2.6 us per copied 4 KiB page on a
// loaded two-core machine; a fault that only re-enables writing costs less. Other faults (fresh
// memory) are charged too, so the estimate errs on the side of forking less.
constexpr int64_t kFaultNanos = 2000;
// What one of a child's reads costs the machine besides the child's own CPU, charged to the
// child: a FUSE round trip through the daemon, which shares the cores with the program. 32 us is
// that of a read the cache holds, measured with fio (bench/fast/README.md); a read that makes a
// hint of a block not cached costs the daemon more, so this errs on the side of forking more.
constexpr int64_t kChildReadNanos = 32'000;
// How often (in reads behind) the program looks whether a silent child has died.
constexpr size_t kDeathCheckInterval = 8;
// Reads in a row the program does before its child (none matching it) before the child may be
// judged a loser while it runs.
constexpr uint64_t kLosingStreak = 32;
// "Soon after" its first read without data: a child that logged at most this many reads after it
// and then ended (before the program's next read) or went off track had its path changed by the
// garbage; one that went on longer was not stopped by it (grep, tar: the bytes do not steer them).
constexpr uint64_t kSoonReads = 16;

int64_t NowNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

pid_t ThreadId() {
  static thread_local pid_t tid = 0;
  if (tid == 0) tid = static_cast<pid_t>(syscall(SYS_gettid));
  return tid;
}

// Waits for a child created with exit signal 0 (it never sends SIGCHLD, and wait(2) calls of
// the program without __WALL/__WCLONE never see it). `cpu_nanos`: the CPU time it used.
pid_t WaitChild(pid_t pid, int* status, int flags, int64_t* cpu_nanos = nullptr) {
  for (;;) {
    struct rusage usage = {};
    pid_t r = wait4(pid, status, flags | __WCLONE, &usage);
    if (r == pid && cpu_nanos != nullptr) {
      *cpu_nanos =
          (static_cast<int64_t>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)) * 1'000'000'000 +
          (static_cast<int64_t>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)) * 1000;
    }
    if (r >= 0 || errno != EINTR) return r;
  }
}

// The CPU time a child not reaped yet has used so far (0 if the kernel cannot say).
int64_t CpuNanosOf(pid_t pid) {
  clockid_t clock;
  struct timespec ts;
  if (clock_getcpuclockid(pid, &clock) != 0 || clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

Speculator& Speculator::Instance() {
  static Speculator* instance = new Speculator();  // never destroyed: used until _exit
  return *instance;
}

Speculator::Speculator() = default;

Status Speculator::Start(const SpecOptions& options) {
  if (active()) return Status::FromErrno(EALREADY, "speculation already started");
  options_ = options;
  TIPFS_RETURN_IF_ERROR(watch_.Init(options_));
  if (!watch_.enabled()) return Status::FromErrno(ENODEV, "no tipfs mount to speculate on");
  TIPFS_RETURN_IF_ERROR(sink_.Init(options_, watch_));
  Result<SandboxFilter> filter = BuildSandboxFilter(RawSyscallReturnAddress(), sink_.log_fd());
  if (!filter.ok()) return filter.status();
  filter_ = std::move(*filter);
  if (fds_ == nullptr) {
    void* table = mmap(nullptr, sizeof(FdInfo) * kMaxFds, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (table == MAP_FAILED) return ErrnoStatus("map descriptor table");
    fds_ = static_cast<FdInfo*>(table);
  }
  if (snapshot_ == nullptr) {
    void* snapshot = mmap(nullptr, sizeof(FdSnapshot), PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (snapshot == MAP_FAILED) return ErrnoStatus("map descriptor snapshot");
    snapshot_ = new (snapshot) FdSnapshot();
  }
  {
    Locked lock(&mu_);
    if (FreeLogSlot(/*wait=*/true) < 0) return ErrnoStatus("map hint log");
  }
  owed_.assign(options_.max_behind_reads == 0 ? 1 : options_.max_behind_reads, OwedRead{});
  owed_head_ = owed_count_ = 0;
  ForkPolicyOptions policy;
  policy.stall_nanos = static_cast<int64_t>(options_.stall_usec) * 1000;
  policy.budget_fraction = options_.lockstep ? 0 : options_.max_overhead_percent / 100;
  // No budget means no limit at all: no back-off either.
  policy.max_backoff_skips = options_.lockstep || options_.max_overhead_percent <= 0 ? 0 : 255;
  policy_.Configure(policy);
  policy_.Start(NowNanos());
  faults_charged_ = -1;
  stream_ = static_cast<uint64_t>(getpid());
  // Read sites: the unwinder initialises itself here, not in a sandboxed child.
  WarmUpUnwinder();
  objects_.Refresh();
  program_key_ = ProgramKey(objects_.main_id(), OwnArguments());
  sites_.Clear();
  refuted_.Clear();
  sites_learned_ = 0;
  if (options_.learn && options_.wait == WaitPolicy::kLearned) {
    SiteStore store(program_key_);
    (void)store.Load(&sites_);  // nothing stored yet is the usual first run
    (void)store.LoadRefuted(&refuted_);
    sites_.RemoveAll(refuted_);  // another run may have stored one since it was refuted
  }
  site_waits_ = SiteWaitJudge();
  dropped_sites_.Clear();
  refuted_now_ = false;
  sites_known_ = sites_.size();
  sites_unsaved_ = false;
  fork_at_next_read_ = false;
  {
    Locked lock(&mu_);
    StartHistory();
  }
  disabled_after_failure_.store(false);
  started_.store(true);
  active_.store(true);
  return Status::OK();
}

int Speculator::FreeLogSlot(bool wait) {
  ReapKilledChildren(/*wait=*/false);
  for (;;) {
    for (int i = 0; i < kLogSlots; ++i) {
      if (slots_[i].child != 0) continue;
      if (slots_[i].log == nullptr) {
        void* mapping = mmap(nullptr, sizeof(SharedLog), PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (mapping == MAP_FAILED) return -1;
        slots_[i].log = static_cast<SharedLog*>(mapping);
      }
      return i;
    }
    // Every log still written to by a killed child that has not exited yet (an idle-priority
    // process on a busy machine can take long to): the program does not wait, it skips this fork.
    if (!wait) return -1;
    ReapKilledChildren(/*wait=*/true);
  }
}

void Speculator::Stop() {
  Locked lock(&mu_);
  if (child_pid_ > 0) EndChild(StopCause::kStop);
  ReapKilledChildren(/*wait=*/true);
  SaveLearnedSites();
  FinishHistory();
  active_.store(false);
  started_.store(false);
}

bool Speculator::OwnedByCallingThread() {
  pid_t self = ThreadId();
  pid_t owner = owner_tid_.load(std::memory_order_relaxed);
  if (owner == self) return true;
  if (owner != 0) return false;
  return owner_tid_.compare_exchange_strong(owner, self);
}

bool Speculator::Classify(int fd) {
  FdFacts facts;
  if (!watch_.Classify(fd, &facts, nullptr)) return false;  // not open: decide at the next read
  // A file on a mount whose root cannot be opened is read as it is, without speculation.
  if (facts.watched && !sink_.UseMount(watch_.MountIndex(facts.dev))) facts.watched = false;
  fds_[fd].dev = facts.dev;
  fds_[fd].ino = facts.ino;
  fds_[fd].state.store(facts.watched ? kWatched : kUnwatched, std::memory_order_release);
  return facts.watched;
}

bool Speculator::IsWatched(int fd) {
  if (!started() || fd < 0 || fd >= kMaxFds || fds_ == nullptr) return false;
  const uint8_t state = fds_[fd].state.load(std::memory_order_acquire);
  if (state == kUnwatched) return false;
  if (state == kWatched) return true;
  return Classify(fd);
}

Speculator::ReadTicket Speculator::BeforeRead(int fd, int64_t explicit_offset) {
  if (!active() || !IsWatched(fd) || !OwnedByCallingThread()) return {};
  // Speculation off after a child could not sandbox itself: the read is still timed and recorded.
  // Otherwise the fast path, where speculation is not useful (reads too quick to be worth hiding):
  // no child to check this read against and none to fork.
  const bool check = !disabled_after_failure_.load(std::memory_order_relaxed) &&
                     (child_running_.load(std::memory_order_relaxed) || MayFork());
  const bool history = history_reads_.load(std::memory_order_relaxed);
  ReadTicket ticket;
  if (check || history) {
    // The one lseek of the read (a cheap system call beside the FUSE read it precedes).
    ticket.offset = explicit_offset >= 0 ? explicit_offset : lseek(fd, 0, SEEK_CUR);
    if (ticket.offset < 0 && check) return {};
  }
  if (check || pending_read_ready_.load(std::memory_order_acquire)) {
    Locked lock(&mu_);
    RecordPendingRead();
    if (check) {
      if (!active()) return {};
      read_hinted_ = false;
      CheckRead(fds_[fd].dev, fds_[fd].ino, static_cast<uint64_t>(ticket.offset));
      if (InSpeculativeChild()) return {};  // we are the fresh child, about to run ahead
      ticket.hinted = read_hinted_;
    }
  }
  ticket.start_nanos = NowNanos();
  return ticket;
}

void Speculator::AfterRead(const ReadTicket& ticket, int fd, ssize_t result) {
  if (ticket.start_nanos <= 0) return;
  last_read_nanos_ = NowNanos() - ticket.start_nanos;
  if (policy_.Stalled(last_read_nanos_)) {  // this thread is the only writer
    stalled_nanos_.store(stalled_nanos_.load(std::memory_order_relaxed) + last_read_nanos_,
                         std::memory_order_relaxed);
  }
  if (result > 0) AccountRead(ticket.hinted, last_read_nanos_);
  if (result <= 0 || ticket.offset < 0 || !history_reads_.load(std::memory_order_relaxed)) return;
  // No lock here: BeforeRead of this read found no read waiting (it recorded it), and only this
  // thread makes one.
  pending_read_ = PendingRead{fd, fds_[fd].dev, fds_[fd].ino, static_cast<uint64_t>(ticket.offset),
                              static_cast<uint64_t>(result)};
  pending_read_ready_.store(true, std::memory_order_release);
}

// A read at the end of a file (or past it) fetches nothing and saves nothing: only reads that
// returned data count on either side. The estimate is the run's mean, so hinted reads are set
// against reads of the same program on the same disks.
void Speculator::AccountRead(bool hinted, int64_t took) {
  if (!hinted) {
    unhinted_read_nanos_ += took;
    ++unhinted_reads_;
    return;
  }
  if (unhinted_reads_ == 0) return;
  const int64_t without_hint = unhinted_read_nanos_ / static_cast<int64_t>(unhinted_reads_);
  if (without_hint > took) {
    child_saved_nanos_.store(
        child_saved_nanos_.load(std::memory_order_relaxed) + without_hint - took,
        std::memory_order_relaxed);  // this thread is the only writer
  }
}

void Speculator::RecordPendingRead() {
  if (!pending_read_ready_.load(std::memory_order_acquire)) return;
  const PendingRead read = pending_read_;
  pending_read_ready_.store(false, std::memory_order_relaxed);
  if (!history_reads_.load(std::memory_order_relaxed) || !InProgramProcess()) return;
  recorder_.OnRead(read.fd, read.dev, read.ino, read.offset, read.length);
  replay_.OnRead(read.dev, read.ino, read.offset, read.length);
}

void Speculator::RecordPendingReadOf(int fd) {
  Locked lock(&mu_);
  if (pending_read_ready_.load(std::memory_order_acquire) && pending_read_.fd == fd) {
    RecordPendingRead();
  }
}

void Speculator::StartHistory() {
  history_reads_.store(false);
  if (!options_.history) return;
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  char cwd[4096];
  if (n <= 0 || getcwd(cwd, sizeof(cwd)) == nullptr) return;
  Recording command;
  command.executable.assign(exe, static_cast<size_t>(n));
  // Temporary file names made afresh each run (gcc's for collect2 and ld) are not the command.
  command.argv = StableArguments(OwnArguments(), TemporaryDirectories());
  command.cwd = cwd;
  history_key_ = HistoryKey(objects_.main_id(), command.executable, command.argv, command.cwd);
  recorder_.Start(command.executable, command.argv, command.cwd);
  if (!watch_.log_mode()) {
    replay_.Start(history_key_, command, &watch_, &sink_, options_.max_ahead_hints,
                  options_.max_ahead_bytes);
  }
  history_reads_.store(recorder_.enabled() || replay_.active());
}

void Speculator::FinishHistory() {
  if (!InProgramProcess()) return;
  RecordPendingRead();
  replay_.Stop();
  recorder_.Save(history_key_);
  recorder_.Disable();  // saved once: an exec that fails and an exit later do not save again
  history_reads_.store(false);
}

void Speculator::CheckRead(uint64_t dev, uint64_t ino, uint64_t offset) {
  ++counters_.reads_checked;
  if (child_pid_ > 0) {
    if (options_.lockstep) {
      CheckInLockstep(dev, ino, offset);
    } else {
      CheckAgainstChild(dev, ino, offset);
    }
    if (child_pid_ > 0) return;
  }
  if (ForkDue()) Fork();
}

void Speculator::Consumed() {
  ++child_consumed_;
  if (log_->child_waiting.load(std::memory_order_seq_cst) != 0) {
    FutexWakeAll(&log_->consumed_seq);
  }
}

// SpecHint's on-track check, with one change: a log that has not reached the program's read yet
// is not "off track". A fresh child is still setting itself up when the program's next read comes
// (often a cached one, right after the read it was forked at), and on a busy machine an
// idle-priority child may wait long for a core; killing it then only buys another fork that is
// no further along. So the program notes such reads (owed_) and checks them when the child logs
// them; only a wrong read (mismatch), a child that ended, or one more than max_behind_reads
// reads behind is replaced.
void Speculator::CheckAgainstChild(uint64_t dev, uint64_t ino, uint64_t offset) {
  while (owed_count_ > 0) {
    const OwedRead& owed = owed_[owed_head_];
    MatchResult match = log_->MatchNext(owed.dev, owed.ino, owed.offset);
    if (match == MatchResult::kBehind) break;
    if (match == MatchResult::kMismatch) {
      EndChild(StopCause::kMismatch);
      return;
    }
    owed_head_ = (owed_head_ + 1) % owed_.size();
    --owed_count_;
    if (log_->child_waiting.load(std::memory_order_seq_cst) != 0) {
      FutexWakeAll(&log_->consumed_seq);
    }
  }
  if (owed_count_ == 0) {
    MatchResult match = log_->MatchNext(dev, ino, offset);
    if (match == MatchResult::kMatched) {
      ++counters_.reads_on_track;
      read_hinted_ = true;
      child_reads_behind_ = 0;
      Consumed();
      return;
    }
    if (match == MatchResult::kMismatch) {
      EndChild(StopCause::kMismatch);
      return;
    }
  }
  // The child has not logged this read yet.
  if (log_->ended.load(std::memory_order_acquire) != 0) {
    EndChild(StopCause::kChildEnded);
    return;
  }
  if (owed_count_ >= owed_.size()) {
    EndChild(StopCause::kBehind);
    return;
  }
  // Every 8th read this child is behind.
  if (++child_reads_behind_ % kDeathCheckInterval == 0) {
    Reaped reaped{};
    if (WaitChild(child_pid_, &reaped.status, WNOHANG, &reaped.cpu_nanos) == child_pid_) {
      EndChild(StopCause::kChildEnded, &reaped);  // died without a word
      return;
    }
    // A child that trails the program hints nothing it does not read already: it may still get
    // ahead, but not at any price. One that was ahead lately is left alone (GNU ld's children
    // fall behind for a while at each new object and then lead again).
    if (child_reads_behind_ >= kLosingStreak &&
        policy_.ChildOverBudget(UnbilledChildNanos(CpuNanosOf(child_pid_)),
                                child_saved_nanos_.load(std::memory_order_relaxed))) {
      EndChild(StopCause::kLosing);
      return;
    }
  }
  owed_[(owed_head_ + owed_count_) % owed_.size()] = OwedRead{dev, ino, offset};
  ++owed_count_;
  ++counters_.reads_behind;
}

// Lockstep (tests): the program waits for its child's next logged read, and then until the
// child has made that read itself, so every read of the child comes before the program's own
// (and so, on cold data, finds it not cached) however little CPU the child gets.
void Speculator::CheckInLockstep(uint64_t dev, uint64_t ino, uint64_t offset) {
  int polls = 0;
  while (child_pid_ > 0) {
    MatchResult match = log_->MatchNext(dev, ino, offset);
    if (match == MatchResult::kMatched) {
      ++counters_.reads_on_track;
      read_hinted_ = true;
      Consumed();
      WaitForChildsRead(log_->consumed.load());
      return;
    }
    if (match == MatchResult::kMismatch) {
      EndChild(StopCause::kMismatch);
      return;
    }
    if (log_->ended.load(std::memory_order_acquire) != 0) {
      EndChild(StopCause::kChildEnded);
      return;
    }
    if (polls++ >= kLockstepMaxPolls) {
      EndChild(StopCause::kBehind);
      return;
    }
    // Wait for the child's next entry, its end, or its death.
    uint32_t seen = log_->appended_seq.load(std::memory_order_acquire);
    log_->parent_waiting.store(1, std::memory_order_seq_cst);
    if (log_->Outstanding() == 0 && log_->ended.load() == 0) {
      FutexWait(&log_->appended_seq, seen, kLockstepPollNanos);
    }
    log_->parent_waiting.store(0, std::memory_order_relaxed);
    Reaped reaped{};
    if (log_->Outstanding() == 0 && log_->ended.load() == 0 &&
        WaitChild(child_pid_, &reaped.status, WNOHANG, &reaped.cpu_nanos) == child_pid_) {
      EndChild(StopCause::kChildEnded, &reaped);  // reaped here; the log says nothing more
    }
  }
}

void Speculator::WaitForChildsRead(uint64_t entries) {
  for (int polls = 0; polls < kLockstepMaxPolls && child_pid_ > 0; ++polls) {
    uint32_t seen = log_->reads_done_seq.load(std::memory_order_acquire);
    if (log_->reads_done.load(std::memory_order_acquire) >= entries ||
        log_->ended.load(std::memory_order_acquire) != 0) {
      return;
    }
    log_->parent_waiting.store(1, std::memory_order_seq_cst);
    if (log_->reads_done.load() < entries && log_->ended.load() == 0) {
      FutexWait(&log_->reads_done_seq, seen, kLockstepPollNanos);
    }
    log_->parent_waiting.store(0, std::memory_order_relaxed);
    Reaped reaped{};
    if (log_->reads_done.load() < entries && log_->ended.load() == 0 &&
        WaitChild(child_pid_, &reaped.status, WNOHANG, &reaped.cpu_nanos) == child_pid_) {
      EndChild(StopCause::kChildEnded, &reaped);
    }
  }
}

// The first child too waits for a stall: a program whose reads all hit the cache never forks.
bool Speculator::MayFork() const {
  return !disabled_after_failure_.load(std::memory_order_relaxed) &&
         (fork_at_next_read_ || policy_.Stalled(last_read_nanos_));
}

bool Speculator::ForkDue() {
  if (!MayFork()) return false;
  if (!policy_.ForkNow(NowNanos(), last_read_nanos_)) return false;
  if (fork_at_next_read_ && !policy_.Stalled(last_read_nanos_)) ++counters_.forks_at_once;
  fork_at_next_read_ = false;
  return true;
}

void Speculator::LearnFrom(StopCause cause) {
  if (options_.wait != WaitPolicy::kLearned) return;
  if (!log_->tainted()) return;  // it never read garbage
  // The entry it went astray at: the program's read that did not match it, or, for a child that
  // ended before the program's next read, one past its last.
  uint64_t astray;
  if (cause == StopCause::kMismatch) {
    astray = log_->consumed.load(std::memory_order_relaxed);
  } else if (cause == StopCause::kChildEnded) {
    astray = log_->appended.load(std::memory_order_acquire);
  } else {
    return;  // behind, stopped, exec: nothing the data did
  }
  // The read without data to judge: the latest before the child went astray (at most kSoonReads
  // entries were logged after it), whose bytes a program checks right after reading them; a
  // predicted read's bytes have the right shape, so what came after a prediction was steered by
  // it. Not the child's first: a linker's child read the symbol and string tables without data
  // (harmless: zeros are a valid empty table) and died at the next object's header; blaming its
  // first read learned the tables' sites, and children waited there in lockstep with the
  // program until the waits were dropped (bench/spec/README.md, "First runs of gnuld and the
  // loader").
  uint8_t answer = kAnsweredWithData;
  uint64_t site = 0;
  if (!log_->LatestWithoutData(astray, kSoonReads + 1, &answer, &site)) return;
  if (answer != kAnsweredGarbage) {
    // A child that ran the program to a clean exit was not misled (it was forked near the end).
    if (cause == StopCause::kChildEnded &&
        log_->end_reason.load() == static_cast<uint32_t>(EndReason::kProgramExit) &&
        log_->exit_status.load() == 0) {
      return;
    }
    // Learned already (reads are predicted only at learned sites): it was the prediction that
    // misled the child. A whole file there misleads a program that checks what it read against
    // the file's size: later children of this run pad there instead. A padded one misleads one
    // that follows offsets it read: they wait there.
    if (answer == kAnsweredWhole) {
      if (not_whole_.Insert(site)) ++counters_.sites_not_whole;
      return;
    }
    const size_t before = unpredictable_.size();
    unpredictable_.Insert(site);
    counters_.sites_unpredictable += unpredictable_.size() - before;
    return;
  }
  if (refuted_.Contains(site)) return;  // its waits were found not to pay
  const size_t before = sites_.size();
  sites_.Insert(site);
  if (sites_.size() > before) {
    ++sites_learned_;
    sites_unsaved_ = true;
  }
}

void Speculator::JudgeSiteWaits(bool paid) {
  const bool was_dropped = site_waits_.dropped();
  const bool was_refuted = site_waits_.refuted();
  site_waits_.ChildJudged(child_given_sites_ && sites_.size() > 0, log_->appended.load(),
                          log_->waits_at_sites.load(), paid);
  if (!was_dropped && site_waits_.dropped()) {
    ++counters_.site_waits_dropped;
    dropped_sites_ = sites_;
  }
  if (!was_refuted && site_waits_.refuted()) {
    // Sites learned since the drop (never given to a child) are kept.
    uint64_t dropped[CriticalSites::kCapacity];
    const size_t n = dropped_sites_.CopyTo(dropped, CriticalSites::kCapacity);
    for (size_t i = 0; i < n; ++i) refuted_.Insert(dropped[i]);
    sites_.RemoveAll(dropped_sites_);
    counters_.sites_refuted += n;
    refuted_now_ = true;
    sites_unsaved_ = true;
  }
}

void Speculator::SaveLearnedSites() {
  if (!sites_unsaved_ || !options_.learn) return;
  // The next run learns again if this fails.
  SiteStore store(program_key_);
  // Refuting first, then saving a union, keeps what another run of the program learned meanwhile.
  if (refuted_now_) (void)store.Refute(refuted_);
  if (!refuted_now_ || sites_.size() > 0) (void)store.Save(sites_);
  sites_unsaved_ = false;
}

int64_t Speculator::FaultNanosSinceLastCall() {
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  int64_t nanos = 0;
  if (faults_charged_ >= 0 && usage.ru_minflt > faults_charged_) {
    nanos = (usage.ru_minflt - faults_charged_) * kFaultNanos;
  }
  faults_charged_ = usage.ru_minflt;
  return nanos;
}

// A vfork child (posix_spawn's, or the program's own vfork) shares the program's memory: what it
// did here would be done to the program's speculation. pthread_atfork makes fork children
// distinct processes with their own stream_; a vfork child still has the program's.
bool Speculator::InProgramProcess() const { return static_cast<uint64_t>(getpid()) == stream_; }

void Speculator::Fork() {
  if (!InProgramProcess()) return;
  const int64_t start = NowNanos();
  // Lockstep runs are deterministic: the fork waits for a dying child's log rather than being
  // skipped by how soon the scheduler let that child exit.
  int slot = FreeLogSlot(/*wait=*/options_.lockstep);
  if (slot < 0) {
    ++forks_without_slot_;
    return;
  }
  // Faults since the last child ended: the copy-on-write aftermath of the forks before.
  policy_.Charge(FaultNanosSinceLastCall());
  slot_ = slot;
  log_ = slots_[slot].log;
  log_->Reset(options_.max_ahead_hints, options_.max_ahead_bytes, options_.max_tainted_bytes);
  ++epoch_;
  snapshot_->Take(sink_);
  objects_.Refresh();  // objects dlopen'ed since: their read sites get their build-ids
  if (options_.wait == WaitPolicy::kAlways) ++children_waiting_;
  // Learned waits that did not pay are dropped for the rest of the run (site_waits.h).
  child_given_sites_ = options_.wait == WaitPolicy::kLearned && site_waits_.GiveSites();
  ChildConfig config{&watch_,       &sink_,
                     &filter_,      snapshot_,
                     log_,          sizeof(SharedLog),
                     stream_,       epoch_,
                     options_.wait, options_.predict,
                     &objects_,     child_given_sites_ ? &sites_ : &no_sites_,
                     getpid(),      &unpredictable_,
                     &not_whole_};
  // A raw clone with no exit signal: no SIGCHLD for the program, invisible to its wait(-1), and
  // no pthread_atfork handlers (the program's own would think it forked).
  long pid = syscall(SYS_clone, 0, 0, 0, 0, 0);
  if (pid == 0) {
    active_.store(false);
    BecomeSpeculativeChild(config);
    return;
  }
  if (pid < 0) {
    ++counters_.start_failures;
    return;
  }
  if (ever_forked_) ++counters_.restarts;
  ever_forked_ = true;
  ++counters_.forks;
  // The program goes on at once: the child sets itself up at idle priority, and a child that
  // cannot is counted (start_failures) and turns speculation off when it is reaped.
  slots_[slot] = LogSlot{log_, static_cast<pid_t>(pid), epoch_, false};
  child_pid_ = static_cast<pid_t>(pid);
  child_consumed_ = 0;
  child_saved_nanos_.store(0, std::memory_order_relaxed);
  child_reads_behind_ = 0;
  stalled_at_fork_ = stalled_nanos_.load(std::memory_order_relaxed);
  owed_head_ = owed_count_ = 0;
  child_running_.store(true, std::memory_order_relaxed);
  policy_.ChargeChild(NowNanos() - start);
}

void Speculator::RecordChildExit(int slot, int wait_status) {
  const SharedLog* log = slots_[slot].log;
  counters_.hints_issued += log->appended.load();
  counters_.hints_tainted += log->tainted_appended.load();
  counters_.hints_clean += log->appended.load() - log->tainted_appended.load();
  counters_.waits_at_sites += log->waits_at_sites.load();
  counters_.reads_predicted += log->reads_predicted.load();
  counters_.reads_predicted_whole += log->reads_predicted_whole.load();
  counters_.hint_bytes_issued += log->bytes_appended.load();
  counters_.hint_bytes_consumed += log->bytes_consumed.load();
  counters_.reads_without_data += log->reads_without_data.load();
  if (log->ended.load(std::memory_order_acquire) != 0) {
    switch (static_cast<EndReason>(log->end_reason.load())) {
      case EndReason::kProgramExit:
        ++counters_.child_ended_program_exit;
        break;
      case EndReason::kForbiddenSyscall:
        ++counters_.child_ended_forbidden;
        counters_.last_forbidden_syscall = log->end_syscall.load();
        break;
      case EndReason::kStreamRead:
        ++counters_.child_ended_stream_read;
        break;
      case EndReason::kSharedMemoryWrite:
        ++counters_.child_ended_shared_write;
        break;
      case EndReason::kSignalToOther:
        ++counters_.child_ended_signal;
        break;
      case EndReason::kStartupFailed:  // one that cannot sandbox itself never will: stop trying
        ++counters_.start_failures;
        disabled_after_failure_.store(true, std::memory_order_relaxed);
        break;
      default:
        break;
    }
  } else if (WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGSYS) {
    ++counters_.child_killed_by_sandbox;
  } else if (WIFSIGNALED(wait_status) && WTERMSIG(wait_status) != SIGKILL) {
    ++counters_.child_died_by_signal;
  }
}

void Speculator::ReapKilledChildren(bool wait) {
  for (int i = 0; i < kLogSlots; ++i) {
    pid_t pid = slots_[i].child;
    if (pid == 0 || pid == child_pid_) continue;
    int status = 0;
    if (WaitChild(pid, &status, wait ? 0 : WNOHANG) != pid) continue;
    RecordChildExit(i, status);
    // Reads it had in flight when it was killed may have hinted after the first cancel (if it
    // logged none, it hinted none but the read it was forked at, which the program has done).
    if (slots_[i].log->appended.load() > 0) {
      sink_.Cancel(stream_, slots_[i].epoch, /*tainted_only=*/slots_[i].keep_clean);
    }
    slots_[i].child = 0;
  }
}

// The program does not wait for a killed child to exit (ReapKilledChildren does that later): its
// hints are cancelled now, and its log is not reused until it is reaped.
void Speculator::EndChild(StopCause cause, const Reaped* reaped) {
  const int64_t start = NowNanos();
  if (cause == StopCause::kMismatch) ++counters_.offtrack_mismatch;
  if (cause == StopCause::kBehind) ++counters_.offtrack_behind;
  if (cause == StopCause::kLosing) ++counters_.ended_over_budget;
  pid_t pid = child_pid_;
  child_pid_ = 0;
  child_running_.store(false, std::memory_order_relaxed);
  owed_head_ = owed_count_ = 0;
  if (pid <= 0) return;
  LearnFrom(cause);
  // A child that ended by itself leaves its clean hints (made on real data: the program will
  // read them); one that went off track, fell behind or was stopped leaves none.
  const bool keep_clean = cause == StopCause::kChildEnded;
  slots_[slot_].keep_clean = keep_clean;
  int status = 0;
  int64_t cpu_nanos = 0;
  if (reaped != nullptr) {
    cpu_nanos = reaped->cpu_nanos;
    RecordChildExit(slot_, reaped->status);
    slots_[slot_].child = 0;
  } else if (WaitChild(pid, &status, WNOHANG, &cpu_nanos) == pid) {
    RecordChildExit(slot_, status);
    slots_[slot_].child = 0;
  } else {
    cpu_nanos = CpuNanosOf(pid);  // what it does between the kill and its exit is not counted
    kill(pid, SIGKILL);
    // At idle priority a killed child may wait long for a core to die on, holding its log (and
    // its copy-on-write pages). A normal policy (still at nice 19, which needs no privilege)
    // lets it exit promptly.
    struct sched_param normal = {};
    sched_setscheduler(pid, SCHED_OTHER, &normal);
  }
  // A child that logged nothing hinted nothing the program has not read (the read it was forked
  // at): no round trip to the mount. If it logs something before the kill takes, the cancel at
  // its reaping covers it.
  if (log_->appended.load() > 0) sink_.Cancel(stream_, epoch_, /*tainted_only=*/keep_clean);
  const bool paid = JudgeChild(cpu_nanos, NowNanos() - start);
  if (options_.wait == WaitPolicy::kLearned) JudgeSiteWaits(paid);
  // A child that paid ended: the next one goes at the next read, so that a loop of
  // open-read-parse keeps the next file in flight.
  fork_at_next_read_ = paid && cause == StopCause::kChildEnded;
  child_consumed_ = 0;
}

// The child runs at idle priority in the program's CPU group: CPU it used while the program sat
// in a stalled read took nothing from the program (real GNU ld's children, 12 ms of CPU each
// under 15 ms disks, were judged lost on it and speculation backed off: 0.47-0.49 of the
// original against the base's 0.42-0.44). Only what it used beyond those stalls is charged.
int64_t Speculator::UnbilledChildNanos(int64_t cpu_nanos) const {
  const int64_t stalled = stalled_nanos_.load(std::memory_order_relaxed) - stalled_at_fork_;
  return std::max<int64_t>(cpu_nanos - stalled, 0) +
         static_cast<int64_t>(log_->appended.load(std::memory_order_acquire)) * kChildReadNanos;
}

bool Speculator::JudgeChild(int64_t cpu_nanos, int64_t teardown_nanos) {
  child_cpu_nanos_ += cpu_nanos;
  policy_.ChargeChild(UnbilledChildNanos(cpu_nanos) + FaultNanosSinceLastCall() + teardown_nanos);
  const uint64_t paid_before = policy_.children_paid();
  policy_.ChildEnded(child_consumed_, child_saved_nanos_.exchange(0, std::memory_order_relaxed));
  return policy_.children_paid() > paid_before;
}

void Speculator::BeforeExec() {
  if (!active() || InSpeculativeChild() || !InProgramProcess()) return;
  {
    Locked lock(&mu_);
    if (child_pid_ > 0) EndChild(StopCause::kExec);
    ReapKilledChildren(/*wait=*/true);  // none may outlive the image it speculates on
    SaveLearnedSites();
    FinishHistory();
  }
  PrintStatsIfAsked();
}

void Speculator::BeforeQuickExit() {
  if (!active() || InSpeculativeChild() || !InProgramProcess()) return;
  PrintStatsIfAsked();
}

void Speculator::AfterForkInChild() {
  if (InSpeculativeChild()) return;
  pthread_mutex_init(&mu_, nullptr);
  // The parent's child and log belong to the parent; this process starts its own.
  child_pid_ = 0;
  child_running_.store(false);
  // The logs are shared with the parent and its children: this process maps its own.
  for (LogSlot& slot : slots_) slot = LogSlot{};
  slot_ = -1;
  log_ = nullptr;
  ever_forked_ = false;
  owner_tid_.store(0);
  stream_ = static_cast<uint64_t>(getpid());
  counters_ = tipspec_counters{};
  policy_.Start(NowNanos());
  faults_charged_ = -1;
  forks_without_slot_ = 0;
  children_waiting_ = 0;
  child_consumed_ = 0;
  child_saved_nanos_.store(0);
  unhinted_read_nanos_ = 0;
  unhinted_reads_ = 0;
  child_cpu_nanos_ = 0;
  // The sites stay (same binaries); saving them is the parent's business.
  sites_known_ = sites_.size();
  sites_learned_ = 0;
  sites_unsaved_ = false;
  refuted_now_ = false;  // what the parent refuted it saves; the judge's evidence holds here too
  fork_at_next_read_ = false;
  owed_head_ = owed_count_ = 0;
  // The same command line as the parent's: recording it would replace the parent's recording
  // with a part of it. The history stream is the parent's.
  recorder_.Disable();
  replay_.Forget();
  history_reads_.store(false);
  pending_read_ready_.store(false);
}

}  // namespace tipfs::spec
