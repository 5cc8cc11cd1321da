// The speculating child's reads: every read the sandbox traps ends here (child_syscalls.cc
// dispatches). A read of a watched file is logged for the program's on-track check (bounded
// run-ahead), hinted by the mount (the child's attached read is the hint), and answered: data
// cached is returned; data not cached is waited for only at the fork point and at read sites
// learned to be data-critical (or always, or never: WaitPolicy), else the read returns without
// it (EAGAIN from the mount) and the child goes on with whatever its buffer holds; at a learned
// site it goes on with predicted bytes when it has any that fit (read_predictor.h), and waits
// only when it has none: a read of a whole file gets a whole other file kept there, at that
// file's length, and the shadow offset then stands at the real file's end (where the program's
// next read will be); any other read gets a kept read padded to its length. Its first read
// without data ends its clean hints: it re-attaches tainted, and its later hints are tainted.
// Hazard 1: a read never moves an offset shared with the program (pread at the shadow offset).
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "speculate/child_state.h"
#include "speculate/raw_syscall.h"

namespace tipfs::spec::child {

namespace {

constexpr int64_t kRunAheadPollNanos = 100'000'000;  // re-check the program is alive this often

long Sys(long nr, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0, long a5 = 0, long a6 = 0) {
  return RawSyscall(nr, a1, a2, a3, a4, a5, a6);
}

// Hazard 2 (bounded run-ahead) and the hint log: wait while too far ahead, then log.
void LogRead(Desc* d, uint64_t offset, uint64_t requested) {
  SharedLog* log = g_state.config.log;
  while (!log->HasRoom()) {
    uint32_t seen = log->consumed_seq.load(std::memory_order_acquire);
    log->child_waiting.store(1, std::memory_order_seq_cst);
    if (log->HasRoom()) break;
    FutexWait(&log->consumed_seq, seen, kRunAheadPollNanos);
    if (Sys(SYS_getppid) != g_state.config.parent_pid) End(EndReason::kParentGone, 0);
  }
  log->child_waiting.store(0, std::memory_order_relaxed);
  uint64_t size = d->facts.size;
  uint64_t length = offset >= size ? 0 : (requested < size - offset ? requested : size - offset);
  log->Append(LogEntry{d->facts.dev, d->facts.ino, offset, length});
  if (log->tainted()) log->tainted_appended.fetch_add(1, std::memory_order_relaxed);
  int index = static_cast<int>(d - g_state.descs);
  const char* path = g_state.config.watch->log_mode() ? g_state.paths[index] : nullptr;
  g_state.config.sink->OnSpeculativeRead(g_state.config.epoch, d->facts, path, offset, length);
  if (log->parent_waiting.load(std::memory_order_seq_cst) != 0) FutexWakeAll(&log->appended_seq);
}

// A logged read is done (lockstep waits for that).
void LoggedReadDone() {
  SharedLog* log = g_state.config.log;
  log->reads_done.store(log->appended.load(std::memory_order_relaxed), std::memory_order_release);
  log->reads_done_seq.fetch_add(1, std::memory_order_release);
  if (log->parent_waiting.load(std::memory_order_seq_cst) != 0) {
    FutexWakeAll(&log->reads_done_seq);
  }
}

// The length a read at `offset` has: `requested`, or less at the end of the file.
uint64_t ReadLength(int fd, const Desc* d, uint64_t offset, uint64_t requested) {
  uint64_t size = CurrentSize(fd, d);
  if (offset >= size) return 0;
  return requested < size - offset ? requested : size - offset;
}

// A read the mount answered with EAGAIN (data not cached, not waited for): logged entry `index`.
// The first one ends the clean hints.
void CountReadWithoutData(uint64_t index, uint64_t site) {
  SharedLog* log = g_state.config.log;
  log->reads_without_data.fetch_add(1, std::memory_order_relaxed);
  log->MarkAnswer(index, kAnsweredGarbage, site);
  if (!log->tainted()) {
    log->MarkTainted(index, site, log->bytes_appended.load(std::memory_order_relaxed));
    // Should this fail, the mount keeps calling our hints clean: they are still capped (the
    // child's own tainted bound) and cancelled when the child ends, as before.
    g_state.config.sink->Attach(g_state.config.stream, g_state.config.epoch,
                                /*wait_for_data=*/!g_state.attach_no_wait, /*tainted=*/true);
  }
}

// How many reads through `d` came from `site` before this one (which is counted): the read's
// ordinal, which kept read may stand for it (read_predictor.h). Not known through a description
// the program had open at the fork (it may have read there before): taking the second table of
// an object read there for a first one sent the gnuld workload's children astray.
uint32_t OrdinalAtSite(Desc* d, uint64_t site) {
  if (d->inherited) return ReadPredictor::kUnknownOrdinal;
  for (Desc::SiteCount& count : d->site_counts) {
    if (count.site == site && count.reads > 0) return count.reads++;
  }
  Desc::SiteCount& count = d->site_counts[d->site_count_next++ % Desc::kSiteCounts];
  count = {site, 1};
  return 0;
}

// What a read does when its data is not cached.
enum class WithoutData {
  kWait,          // wait for it
  kGoOn,          // go on with whatever the buffer holds
  kPredict,       // go on with bytes an earlier read at this learned site returned, padded
  kPredictWhole,  // a read of a whole file: go on with a whole file read at this site before
};

// Answers a read without data: with predicted bytes when `how` says so and some still fit (the
// read's `predicted_length` was found when the prediction was chosen), else, like SpecHint, with
// whatever the buffer holds and the length the read would have had. *advance: how far the shadow
// offset moves, the real read's length (after a whole file predicted, the real file's end is
// where the program stands after its read, and where its next one goes).
long AnswerWithoutData(int fd, const Desc* d, const struct iovec* iov, int iov_count,
                       uint64_t offset, uint64_t requested, uint64_t site, uint32_t ordinal,
                       WithoutData how, uint64_t predicted_length, uint64_t* advance) {
  // The read was the last one logged (a read the program makes itself, at the fork point,
  // always waits).
  const uint64_t index = g_state.config.log->appended.load(std::memory_order_relaxed) - 1;
  CountReadWithoutData(index, site);
  const bool predicts = how == WithoutData::kPredict || how == WithoutData::kPredictWhole;
  const uint64_t length = predicts ? predicted_length : ReadLength(fd, d, offset, requested);
  *advance = length;
  uint64_t answered = length;
  uint8_t answer = kAnsweredGarbage;
  if (how == WithoutData::kPredictWhole) {
    const size_t whole = g_state.predictor.FillWhole(site, iov, iov_count, requested);
    if (whole != 0) {
      answered = whole;
      answer = kAnsweredWhole;
    }
  }
  if (predicts && answer == kAnsweredGarbage &&
      g_state.predictor.Fill(site, ordinal, d->facts.size, iov, iov_count, length)) {
    answer = kAnsweredPadded;
  }
  if (answer != kAnsweredGarbage) {
    SharedLog* log = g_state.config.log;
    log->reads_predicted.fetch_add(1, std::memory_order_relaxed);
    if (answer == kAnsweredWhole)
      log->reads_predicted_whole.fetch_add(1, std::memory_order_relaxed);
    // If the child goes astray soon after, the program blames the prediction (LearnFrom).
    log->MarkAnswer(index, answer, site);
  }
  return static_cast<long>(answered);
}

long ReadMemoryDevice(const Desc* d, char* buffer, uint64_t length) {
  switch (d->facts.rdev_minor) {
    case 3:  // /dev/null
      return 0;
    case 5:  // /dev/zero
    case 7:  // /dev/full
      memset(buffer, 0, length);
      return static_cast<long>(length);
    case 8:  // /dev/random
    case 9:  // /dev/urandom
      return Sys(SYS_getrandom, reinterpret_cast<long>(buffer), length, 0);
    default:
      return -EINVAL;
  }
}

// A private description of watched file `fd` opened with O_DIRECT (and O_NONBLOCK unless
// `waits`), or kNoPrivateFd.
int OpenPrivate(int fd, bool waits) {
  LineBuilder path;
  path.Add("/proc/self/fd/").Add(static_cast<uint64_t>(fd));
  long direct = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path.data()),
                    O_RDONLY | O_DIRECT | O_CLOEXEC | (waits ? 0 : O_NONBLOCK));
  long high = direct >= 0 ? MoveToPrivateFd(direct) : direct;
  return high >= 0 ? static_cast<int>(high) : kNoPrivateFd;
}

// Where the child reads a watched file: a private description opened with O_DIRECT, so every
// read goes to the mount's daemon, which decides (cached: the data; not cached: a hint, and
// EAGAIN or a wait). Through the kernel page cache, a read of a page the program has in flight
// would wait in the kernel on the page lock, before the daemon sees it: in `kernel` data-cache
// mode a child that once caught up with the program could then never pass it. O_DIRECT reads
// also never fill the page cache (hazard 3). Two of them: the attach says "wait for data", and the
// daemon lets a read through an O_NONBLOCK description never wait, so the child picks per read.
// Where O_DIRECT cannot be had, the shared descriptor (pread only, so its offset never moves),
// and the attach's mode is switched when a read needs the other one.
// (A plain directory in log mode has no such problem, and O_DIRECT there may want alignment.)
int ReadFd(int fd, Desc* d, bool waits) {
  if (!d->facts.watched) return fd;
  if (g_state.config.watch->log_mode()) {
    d->private_fd = d->wait_fd = kNoPrivateFd;
    return fd;
  }
  int* slot = waits ? &d->wait_fd : &d->private_fd;
  if (*slot == -1) *slot = OpenPrivate(fd, waits);
  if (*slot >= 0) return *slot;
  if (g_state.attach_no_wait == waits) {
    g_state.attach_no_wait = !waits;
    g_state.config.sink->Attach(g_state.config.stream, g_state.config.epoch, waits,
                                g_state.config.log->tainted());
  }
  return fd;
}

// kPredict and kPredictWhole set *length, the read's length (a size check of the file), for
// AnswerWithoutData. `at_shadow_offset`: a read(2)-style read (no offset of its own).
WithoutData WhenNotCached(bool fork_point, uint64_t site, uint32_t ordinal, int fd, const Desc* d,
                          uint64_t offset, uint64_t requested, bool at_shadow_offset,
                          uint64_t* length) {
  if (fork_point) return WithoutData::kWait;
  switch (g_state.config.wait) {
    case WaitPolicy::kAlways:
      return WithoutData::kWait;
    case WaitPolicy::kNever:
      return WithoutData::kGoOn;
    case WaitPolicy::kLearned:
      break;
  }
  if (!g_state.config.sites->Contains(site)) return WithoutData::kGoOn;
  if (g_state.config.predict && g_state.predictor.Keeps(site) &&
      !g_state.config.unpredictable->Contains(site)) {
    *length = ReadLength(fd, d, offset, requested);
    if (*length == 0) return WithoutData::kGoOn;  // at the end: there is nothing to wait for
    // The whole file, asked for with room to spare (the program expects to see its end, as a
    // loader reading st_size + 1 bytes does): another whole file, then the end. Only at the
    // shadow offset, which can then stand at the real end: a program that preads computes its
    // next offset from what the read returned.
    if (at_shadow_offset && offset == 0 && requested > *length &&
        !g_state.config.not_whole->Contains(site) &&
        g_state.predictor.WholeFits(site, requested) != 0) {
      return WithoutData::kPredictWhole;
    }
    if (g_state.predictor.CanFill(site, ordinal, d->facts.size, *length)) {
      return WithoutData::kPredict;
    }
  }
  g_state.config.log->waits_at_sites.fetch_add(1, std::memory_order_relaxed);
  return WithoutData::kWait;
}

// Real data read at a learned site (or at the fork point, where the program reads it too) is kept
// for predictions of later reads there.
// A read from the start that came back short (the end of the file) or with the file's size is
// a whole file.
void RememberRead(bool fork_point, uint64_t site, uint32_t ordinal, const Desc* d, uint64_t offset,
                  uint64_t requested, const struct iovec* iov, int iov_count, long result) {
  if (result <= 0 || !g_state.config.predict || g_state.config.wait != WaitPolicy::kLearned) {
    return;
  }
  if (fork_point || g_state.config.sites->Contains(site)) {
    const uint64_t got = static_cast<uint64_t>(result);
    const bool whole = offset == 0 && (got < requested || got == d->facts.size);
    if (!whole && ordinal == ReadPredictor::kUnknownOrdinal) return;  // would answer nothing
    g_state.predictor.Remember(site, ordinal, d->facts.size, iov, iov_count, got, whole);
  }
}

}  // namespace

uint64_t CurrentSize(int fd, const Desc* d) {
  if (d->truncated) return 0;
  // Not fstat: after the read without data that comes before (an O_DIRECT read the daemon
  // answered), a FUSE kernel holds atime stale, and fstat would wait for a GETATTR round trip,
  // one per file read ahead, which kept the child from getting further ahead of its program
  // (bench/rados/README.md, "What the speculating run waited on").
  struct stat st;
  if (RawFstatWithoutAtime(fd, &st) == 0) return st.st_size;
  return d->facts.size;
}

long MoveToPrivateFd(long source) {
  long high = Sys(SYS_fcntl, source, F_DUPFD_CLOEXEC, g_state.private_fd_base);
  Sys(SYS_close, source);
  return high;
}

long DoRead(long nr, int fd, const struct iovec* iov, int iov_count, int64_t explicit_offset) {
  Desc* d = DescFor(fd);
  if (d == nullptr) return -EBADF;
  uint64_t requested = 0;
  for (int i = 0; i < iov_count; ++i) requested += iov[i].iov_len;
  switch (d->facts.kind) {
    case FdFacts::kMemoryDevice:
      return iov_count == 1
                 ? ReadMemoryDevice(d, static_cast<char*>(iov[0].iov_base), iov[0].iov_len)
                 : 0;
    case FdFacts::kDirectory:
      return -EISDIR;
    case FdFacts::kOther:
      // A pipe, socket or terminal: reading would take data the program is owed.
      End(EndReason::kStreamRead, nr);
    case FdFacts::kRegular:
      break;
  }
  if (d->discard || d->truncated) return 0;
  uint64_t offset = explicit_offset >= 0 ? static_cast<uint64_t>(explicit_offset) : d->offset;
  // The read the program was doing when it forked us: the program is fetching exactly these
  // bytes anyway, so the child waits for them (garbage here would send it off at its very first
  // step, a header it then finds "not recognized"); the program is doing that read itself, so it
  // is not logged.
  const bool fork_point = d->facts.watched && g_state.skip_next_log;
  uint64_t site = 0;
  uint32_t ordinal = 0;
  WithoutData not_cached = WithoutData::kWait;
  uint64_t length = 0;
  if (d->facts.watched) {
    // The site is needed to decide on waiting, and to tell the program where its first read
    // without data came from.
    if (g_state.config.wait == WaitPolicy::kLearned || !g_state.config.log->tainted()) {
      site = ReadSiteHere(*g_state.config.objects);
      ordinal = OrdinalAtSite(d, site);
    }
    not_cached = WhenNotCached(fork_point, site, ordinal, fd, d, offset, requested,
                               explicit_offset < 0, &length);
    if (fork_point) {
      g_state.skip_next_log = false;
    } else {
      LogRead(d, offset, requested);
    }
  }
  const bool waits = not_cached == WithoutData::kWait;
  int read_fd = ReadFd(fd, d, waits);
  long result = Sys(SYS_preadv, read_fd, reinterpret_cast<long>(iov), iov_count,
                    static_cast<long>(offset), 0);
  if (result == -EINVAL && read_fd != fd) {  // O_DIRECT refused this read: the shared one then
    for (int* private_fd : {&d->private_fd, &d->wait_fd}) {
      if (*private_fd >= 0) Sys(SYS_close, *private_fd);
      *private_fd = kNoPrivateFd;
    }
    result = Sys(SYS_preadv, ReadFd(fd, d, waits), reinterpret_cast<long>(iov), iov_count,
                 static_cast<long>(offset), 0);
  }
  if (d->facts.watched && !fork_point) LoggedReadDone();
  uint64_t advance = result > 0 ? static_cast<uint64_t>(result) : 0;
  if (result == -EAGAIN && d->facts.watched) {
    result = AnswerWithoutData(fd, d, iov, iov_count, offset, requested, site, ordinal, not_cached,
                               length, &advance);
  } else if (d->facts.watched) {
    RememberRead(fork_point, site, ordinal, d, offset, requested, iov, iov_count, result);
  }
  if (result > 0 && explicit_offset < 0) d->offset += advance;
  return result;
}

long SingleRead(long nr, long fd, long buffer, long length, int64_t explicit_offset) {
  struct iovec iov = {reinterpret_cast<void*>(buffer), static_cast<size_t>(length)};
  return DoRead(nr, static_cast<int>(fd), &iov, 1, explicit_offset);
}

}  // namespace tipfs::spec::child
