#include "fusefs/fuse_ring.h"

#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>

#include "fusefs/fuse_bridge.h"
#include "fusefs/fuse_ring_abi.h"
#include "fusefs/reply_poll.h"
#include "fusefs/ring_workers.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/wait_notice.h"

namespace tipfs::fusefs {
namespace {

// Requests a CPU's queue holds at once: the most reads one CPU's programs keep waiting for the
// disks before the kernel queues more (32 jobs of nvme-rand-32 spread over the CPUs).
constexpr uint32_t kEntriesPerQueue = 32;

// user_data of the read of a queue's eventfd (entries are aligned, never 1).
constexpr uint64_t kKickTag = 1;

// Threads a queue may have: at most this many of its CPU's requests wait for the disks at once
// while the ring is still served; beyond it the next waits until one of them is done.
constexpr size_t kMostThreadsPerQueue = 16;

// When the calling thread, as its queue's server, began the wait it is in (0: none); only that
// wait's end clears the queue's stamp (Queue::WaitEnds).
thread_local int64_t t_wait_began_ns = 0;

// The kernel's count of queues: num_possible_cpus(), from /sys/devices/system/cpu/possible
// ("0-3"); glibc's get_nprocs_conf() counted cpuN directories before 2.36, which can be fewer.
int PossibleCpus() {
  std::ifstream in("/sys/devices/system/cpu/possible");
  std::string ranges;
  in >> ranges;
  const size_t last = ranges.find_last_of("-,");
  const std::string highest = last == std::string::npos ? ranges : ranges.substr(last + 1);
  if (highest.empty() || highest.find_first_not_of("0123456789") != std::string::npos) {
    return get_nprocs_conf();
  }
  return std::stoi(highest) + 1;
}

// A queue the kernel sends requests to but nothing serves would leave its CPU's programs hanging:
// the daemon ends the mount instead, as SIGTERM does (everything acknowledged is made durable).
void EndMount(const std::string& why) {
  std::fprintf(stderr, "tipfs: %s: unmounting\n", why.c_str());
  kill(getpid(), SIGTERM);
}

// Writes to an eventfd, waking whatever reads it.
void Kick(int eventfd) {
  uint64_t one = 1;
  (void)!write(eventfd, &one, sizeof one);
}

FuseRing* RingOf(void* userdata) { return static_cast<FuseBridge*>(userdata)->ring(); }

ssize_t ReadHook(int fd, void* buf, size_t len, void* userdata) {
  return RingOf(userdata)->Read(fd, buf, len);
}

ssize_t WriteHook(int fd, struct iovec* iov, int count, void* userdata) {
  return RingOf(userdata)->Write(fd, iov, count);
}

}  // namespace

// One registered entry: the header the kernel writes a request's headers into, and the payload
// buffer behind a page of room, where the request is rebuilt contiguous for libfuse.
struct FuseRing::Entry {
  Queue* queue = nullptr;
  RingRequestHeader* header = nullptr;  // starts the mapping: header page, room page, payload
  size_t region_bytes = 0;
  char* payload = nullptr;
  size_t payload_bytes = 0;
  iovec iov[2] = {};
  // The unique of the request the entry holds until its reply claims it; 0 when it holds none.
  std::atomic<uint64_t> unique{0};
  int reregistered = 0;  // times a server gave the entry back after an error
};

// A CPU's queue: its io_uring, entries and threads. One thread at a time serves the ring (the
// server): it alone touches the ring's submission queue (so it alone is the task the kernel
// delivers requests through, and a commit costs a replying thread no wait for the ring); replies
// from other threads are queued for it under mu_. When a server's handler waits for the disks
// past the grace (util/wait_notice.h, timed by the ring's WaitWatchdog), or announces a long wait,
// the ring passes to a spare thread, started if none waits, and the old server becomes a spare
// once its handler returns: no request waits long behind another's I/O, and a write on fast disks
// is still served without a hand-off. The kernel delivers an entry's next request (and the kick's
// read) as task work of the thread that submitted its command, so for the entries the old server
// committed last it wakes that thread in its futex wait first (an uninterruptible sleep would hold
// them, which is why such waits go to the workers). After the queue has stopped serving, replies
// submit their commits themselves, under mu_.
class FuseRing::Queue final : public WaitObserver {
 public:
  Queue(FuseRing* owner, uint16_t qid) : owner_(owner), qid_(qid) {}
  ~Queue() {
    Join();
    Close();
    for (Entry& e : entries_) {
      if (e.header != nullptr) munmap(e.header, e.region_bytes);
    }
    if (kick_fd_ >= 0) close(kick_fd_);
  }

  Status Init(uint32_t entries, size_t payload_bytes) {
    kick_fd_ = eventfd(0, EFD_CLOEXEC);
    if (kick_fd_ < 0) return ErrnoStatus("FUSE ring: eventfd");
    io_uring_params params = {};
    params.flags = IORING_SETUP_SQE128;  // the FUSE commands need the 128-byte entries
    int rc = io_uring_queue_init_params(2 * entries + 2, &ring_, &params);
    if (rc < 0) return ErrnoStatus("FUSE ring: io_uring_queue_init", -rc);
    {
      MutexLock lock(&mu_);
      ring_open_ = true;
      pending_.reserve(entries);  // a reply queues without allocating
      batch_.reserve(entries);
    }
    const size_t page = PageBytes();
    entries_ = std::vector<Entry>(entries);
    for (Entry& e : entries_) {
      e.queue = this;
      e.payload_bytes = payload_bytes;
      e.region_bytes = 2 * page + payload_bytes;
      // Pages are only backed once touched: a 4 KiB reply uses one page of a 1 MiB payload (a
      // 1 MiB write all of them).
      void* p = mmap(nullptr, e.region_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) return ErrnoStatus("FUSE ring: mmap");
      e.header = static_cast<RingRequestHeader*>(p);
      e.payload = static_cast<char*>(p) + 2 * page;  // a page of room for the request's headers
      e.iov[0] = {e.header, sizeof(RingRequestHeader)};
      e.iov[1] = {e.payload, payload_bytes};
    }
    return Status::OK();
  }

  std::vector<Entry>& entries() { return entries_; }

  Status Start() {
    MutexLock lock(&mu_);
    return StartThread();
  }

  void RequestStop() {
    stop_requested_.store(true);
    Kick(kick_fd_);
    MutexLock lock(&mu_);
    role_free_.SignalAll();  // a spare takes a free ring to end its serving
  }

  // Joins every thread, those a server started while the first were being joined too.
  void Join() {
    for (;;) {
      std::vector<std::thread> threads;
      {
        MutexLock lock(&mu_);
        threads.swap(threads_);
      }
      if (threads.empty()) return;
      for (std::thread& t : threads) t.join();
    }
  }

  // util/wait_notice.h, on the queue's threads. A long wait of the server's passes the ring on at
  // once; a wait that may be short is stamped for the watchdog, which passes the ring on if it
  // outlasts the grace. Either way the old server serves no further request until its handler is
  // done, and then waits as a spare.
  void WillWait() override {
    MutexLock lock(&mu_);
    if (server_.load() == std::this_thread::get_id()) PassOn();
  }
  void WaitBegins() override {
    if (server_.load(std::memory_order_relaxed) != std::this_thread::get_id()) return;
    t_wait_began_ns = SystemClock::Default()->NowNanos();
    wait_began_ns_.store(t_wait_began_ns, std::memory_order_release);
    owner_->watchdog_.WaitBegan();
  }
  void WaitEnds() override {
    int64_t mine = t_wait_began_ns;
    if (mine == 0) return;
    t_wait_began_ns = 0;
    wait_began_ns_.compare_exchange_strong(mine, 0);  // unless a later server's wait is stamped
  }

  // The watchdog: passes the ring on if its server has waited since before `deadline_ns`.
  // Returns whether the server is in a wait still.
  bool PassOnIfWaitingSince(int64_t deadline_ns) {
    const int64_t began = wait_began_ns_.load(std::memory_order_acquire);
    if (began == 0) return false;
    if (began > deadline_ns) return true;
    MutexLock lock(&mu_);
    if (wait_began_ns_.load() == began) PassOn();  // the same wait, not over yet
    return false;
  }

  // Hands the entries back to the kernel; a reply after it is dropped.
  void Close() {
    MutexLock lock(&mu_);
    if (ring_open_) io_uring_queue_exit(&ring_);
    ring_open_ = false;
  }

  // Commits the reply to `unique`, already in `e`'s buffers: queued for the server, woken
  // when it waits; submitted here once the queue stopped serving. False when the ring is closed.
  bool Commit(Entry* e, uint64_t unique) {
    MutexLock lock(&mu_);
    if (!ring_open_) return false;
    if (!serving_) {
      PrepareCommand(e, kCommitAndFetch, unique);
      io_uring_submit(&ring_);
      ReplyCame();
      return true;
    }
    pending_.push_back({e, unique});
    ReplyCame();
    reply_queued_.store(true, std::memory_order_release);
    if (waiting_ && !kicked_) {
      kicked_ = true;
      Kick(kick_fd_);
    }
    return true;
  }

 private:
  struct PendingCommit {
    Entry* entry;
    uint64_t unique;
  };

  static size_t PageBytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

  // Fills the next submission; only the server, or a replier under mu_ once the queue stopped
  // serving.
  void PrepareCommand(Entry* e, uint32_t op, uint64_t commit_id) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    // The queue holds twice the entries, and each entry has one command at a time.
    if (sqe == nullptr) std::abort();
    std::memset(sqe, 0, 2 * sizeof(io_uring_sqe));  // SQE128: the command area follows
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = owner_->fd_;
    sqe->cmd_op = op;
    if (op == kRegister) {
      sqe->addr = reinterpret_cast<uint64_t>(e->iov);
      sqe->len = 2;
    }
    io_uring_sqe_set_data(sqe, e);
    RingCommand cmd = {};
    cmd.commit_id = commit_id;
    cmd.qid = qid_;
    std::memcpy(sqe->cmd, &cmd, sizeof cmd);
  }

  // Reads the eventfd that wakes the thread (for a reply, or to stop).
  void ArmKick() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) std::abort();
    io_uring_prep_read(sqe, kick_fd_, &kick_count_, sizeof kick_count_, 0);
    io_uring_sqe_set_data64(sqe, kKickTag);
  }

  // The server gives the ring up: a spare takes it, or a thread started for it; with none (the
  // most threads run), the old server takes it back after its handler.
  void PassOn() REQUIRES(mu_) {
    if (!serving_ || stop_requested_.load() || server_.load() == std::thread::id()) return;
    server_.store(std::thread::id());
    wait_began_ns_.store(0);
    RecordTick(owner_->statistics_, FUSE_RING_SERVER_CHANGES);
    if (spares_ > 0) {
      role_free_.Signal();
    } else if (threads_.size() < kMostThreadsPerQueue) {
      (void)StartThread();
    }
  }

  Status StartThread() REQUIRES(mu_) {
    try {
      threads_.emplace_back([this] { Run(); });
    } catch (const std::system_error& e) {
      return Status::FromErrno(e.code().value(), std::string("FUSE ring: a thread: ") + e.what());
    }
    return Status::OK();
  }

  // Each of the queue's threads: takes the ring when it is free, serves it until it passes it on
  // (then waits as a spare) or the queue stops serving.
  void Run() {
    char name[16];
    std::snprintf(name, sizeof name, "tipfs-ring%u", static_cast<unsigned>(qid_ % 1000));
    pthread_setname_np(pthread_self(), name);
    // Served on the CPU whose programs' requests this queue holds (the kernel picks the queue by
    // the requesting task's CPU): the request and its reply stay in that CPU's caches.
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(qid_, &cpus);
    (void)sched_setaffinity(0, sizeof cpus, &cpus);
    SetWaitObserver(this);
    for (;;) {
      {
        MutexLock lock(&mu_);
        while (serving_ && server_.load() != std::thread::id()) {
          ++spares_;
          role_free_.Wait(&mu_);
          --spares_;
        }
        if (!serving_) return;
        server_.store(std::this_thread::get_id());
      }
      if (!ServeRing()) return;
    }
  }

  // Serves the ring as its server: true when the ring passed on (PassOn) while this thread served
  // a request, false once the queue has stopped serving.
  bool ServeRing() {
    if (!registered_) {
      for (Entry& e : entries_) PrepareCommand(&e, kRegister, 0);
      live_ = entries_.size();
      registered_ = true;
    }
    while (!stop_requested_.load() && live_ > 0) {
      // Emulated disks' completions already due run here rather than on the clock's timer
      // thread: their replies are queued for this very loop, no thread is woken for them.
      SystemClock::Default()->RunDue();
      // A completion waits for nothing today; were one to wait long, the ring would have passed
      // on (WaitBegins), and a thread that is no longer its server must not go on with it.
      if (server_.load() != std::this_thread::get_id()) return true;
      {
        MutexLock lock(&mu_);
        batch_.swap(pending_);
        reply_queued_.store(false, std::memory_order_relaxed);
      }
      for (const PendingCommit& c : batch_) PrepareCommand(c.entry, kCommitAndFetch, c.unique);
      batch_.clear();
      if (!kick_armed_) ArmKick();
      kick_armed_ = true;
      SpinForWork();
      if (server_.load() != std::this_thread::get_id()) return true;  // as after RunDue above
      bool wait;
      {
        MutexLock lock(&mu_);
        wait = pending_.empty();  // else the loop takes the replies queued since the swap
        waiting_ = wait;          // a reply queued from here on wakes the server
        kicked_ = false;
      }
      // One system call submits the replies and waits for the next request.
      const int rc = wait ? io_uring_submit_and_wait(&ring_, 1) : io_uring_submit(&ring_);
      if (wait) {
        MutexLock lock(&mu_);
        waiting_ = false;
      }
      if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
        std::fprintf(stderr, "tipfs: FUSE ring queue %u: io_uring_enter: %s\n", qid_,
                     std::strerror(-rc));
        break;
      }
      io_uring_cqe* cqe;
      while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
        const uint64_t data = cqe->user_data;
        const int res = cqe->res;
        // Reaped before serving: if the ring passes on meanwhile, the next server takes the rest.
        io_uring_cqe_seen(&ring_, cqe);
        if (data == kKickTag) {
          kick_armed_ = false;
        } else if (res == 0) {
          Serve(reinterpret_cast<Entry*>(data));
          if (server_.load() != std::this_thread::get_id()) return true;
        } else {
          EntryFailed(reinterpret_cast<Entry*>(data), -res);
        }
      }
    }
    MutexLock lock(&mu_);
    // Replies queued since the last submission go now; later ones submit themselves.
    for (const PendingCommit& c : pending_) PrepareCommand(c.entry, kCommitAndFetch, c.unique);
    pending_.clear();
    io_uring_submit(&ring_);
    serving_ = false;
    server_.store(std::thread::id());
    role_free_.SignalAll();  // the spares leave
    if (live_ == 0 && !stop_requested_.load() && served_ > 0) {
      EndMount("FUSE ring queue " + std::to_string(qid_) + " lost all its entries");
    }
    return false;
  }

  // A command of `e` ended with `error` instead of a request.
  void EntryFailed(Entry* e, int error) {
    if (error == EAGAIN || error == EINTR) {  // not ready yet: register again
      PrepareCommand(e, kRegister, 0);
      return;
    }
    if (error == ENOTCONN || error == ECONNABORTED) {  // the connection ended
      --live_;
      return;
    }
    std::fprintf(stderr, "tipfs: FUSE ring queue %u: an entry's command failed: %s\n", qid_,
                 std::strerror(error));
    if (served_ > 0 && e->reregistered < 3) {  // a commit went wrong: give the buffers back
      ++e->reregistered;
      PrepareCommand(e, kRegister, 0);
      return;
    }
    // A registration the kernel refused: it serves /dev/fuse instead.
    --live_;
  }

  // Hands the request in `e` to libfuse as /dev/fuse would have delivered it.
  void Serve(Entry* e) {
    ++served_;
    replies_owed_.fetch_add(1, std::memory_order_relaxed);
    fuse_in_header in;
    std::memcpy(&in, e->header->in_out, sizeof in);
    char* start = RebuildRequest(*e->header, e->payload, e->payload_bytes);
    if (start == nullptr) {
      FailRequest(e, in.unique, EIO);
      return;
    }
    e->unique.store(in.unique, std::memory_order_release);
    RecordTick(owner_->statistics_, FUSE_RING_REQUESTS);
    const size_t header = sizeof(fuse_in_header);
    if (ServedInline(in, start + header, in.len - header, owner_->fs_)) {
      ServeRequest(owner_, start, in.len);
    } else {
      RecordTick(owner_->statistics_, FUSE_RING_HANDED_OFF);
      owner_->workers_.Hand(start, in.len);
    }
  }

  // A reply was committed: one fewer owed (never below zero: a reply to a request this queue
  // did not count, should one come, is not owed).
  void ReplyCame() {
    uint32_t owed = replies_owed_.load(std::memory_order_relaxed);
    while (owed > 0 &&
           !replies_owed_.compare_exchange_weak(owed, owed - 1, std::memory_order_relaxed)) {
    }
  }

  // Before the server sleeps with few replies owed, it spins until a reply is queued or a request
  // or a completion is in the ring, within ReplyPoll's bounds (fusefs/reply_poll.h). The replies
  // already taken are submitted first, as the wait would have.
  void SpinForWork() {
    const uint32_t owed = replies_owed_.load(std::memory_order_relaxed);
    if (!poll_.MaySpin(owed)) return;  // most waits: no clock read on the request path
    const int64_t began = SystemClock::Default()->NowNanos();
    const int64_t spin = poll_.SpinFor(began, owed);
    if (spin <= 0 || io_uring_cq_ready(&ring_) > 0) return;
    io_uring_submit(&ring_);
    int64_t now = began;
    bool found = false;
    while (now - began < spin && !stop_requested_.load(std::memory_order_relaxed)) {
      // The reply may be this thread's to make: an emulated completion that falls due during the
      // spin (on nvme, at depth 1, the disk answers within it) runs here, not on the timer thread.
      SystemClock::Default()->RunDue();
      found = reply_queued_.load(std::memory_order_acquire) || io_uring_cq_ready(&ring_) > 0;
      if (found) break;
      // Yields rather than pauses: the thread that will answer may be runnable on this CPU (a
      // metadata reply, a worker), and a new request reaches this thread as task work, which
      // runs when it enters the kernel.
      sched_yield();
      now = SystemClock::Default()->NowNanos();
    }
    poll_.Spun(began, now, found);
    // Counted once per spin, after it: whether spinning pays shows in `tipfs stats`.
    RecordTick(owner_->statistics_, FUSE_RING_REPLY_SPINS);
    if (found) RecordTick(owner_->statistics_, FUSE_RING_REPLY_SPINS_FOUND);
    RecordTick(owner_->statistics_, FUSE_RING_REPLY_SPIN_NANOS, static_cast<uint64_t>(now - began));
  }

  void FailRequest(Entry* e, uint64_t unique, int error) {
    fuse_out_header out = {};
    out.len = sizeof out;
    out.error = -error;
    out.unique = unique;
    std::memcpy(e->header->in_out, &out, sizeof out);
    e->header->ent_in_out.payload_sz = 0;
    Commit(e, unique);
  }

  FuseRing* const owner_;
  const uint16_t qid_;
  int kick_fd_ = -1;
  std::vector<Entry> entries_;
  // The ring: its submission side as the class comment says, its completions the server's alone.
  io_uring ring_ = {};
  // The server's own, handed from one server to the next under mu_:
  bool registered_ = false;  // the entries were given to the kernel
  size_t live_ = 0;          // entries the kernel holds or that hold a request
  uint64_t served_ = 0;      // requests taken
  bool kick_armed_ = false;  // a read of the eventfd is in the ring
  ReplyPoll poll_{SystemClock::Default()->NowNanos()};
  std::vector<PendingCommit> batch_;
  uint64_t kick_count_ = 0;  // where the kernel reads the eventfd's count into
  std::atomic<bool> stop_requested_{false};
  // Requests served and not yet answered (Serve counts up, Commit down), for ReplyPoll.
  std::atomic<uint32_t> replies_owed_{0};
  // A reply was queued since the server last took them (set by Commit, cleared at the swap).
  std::atomic<bool> reply_queued_{false};
  Mutex mu_;
  CondVar role_free_;  // the ring has no server, or the queue stopped serving
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
  // The thread serving the ring (none: free); changed under mu_, read anywhere.
  std::atomic<std::thread::id> server_;
  std::atomic<int64_t> wait_began_ns_{0};  // when the server began the wait it is in; 0: none
  size_t spares_ GUARDED_BY(mu_) = 0;      // threads waiting for the ring
  bool ring_open_ GUARDED_BY(mu_) = false;
  bool serving_ GUARDED_BY(mu_) = true;                 // a server takes the replies
  std::vector<PendingCommit> pending_ GUARDED_BY(mu_);  // replies for the server to submit
  bool waiting_ GUARDED_BY(mu_) = false;                // the server waits in io_uring_enter
  bool kicked_ GUARDED_BY(mu_) = false;                 // and has been woken since
};

FuseRing::FuseRing(fuse_session* session, FileSystem* fs, Statistics* statistics,
                   uint32_t worker_threads)
    : session_(session),
      fs_(fs),
      statistics_(statistics),
      workers_(ServeRequest, this, worker_threads),
      watchdog_(PassOnWaitingQueues, this) {}

bool FuseRing::PassOnWaitingQueues(void* ring, int64_t deadline_ns) {
  bool waiting = false;
  for (auto& q : static_cast<FuseRing*>(ring)->queues_) {
    waiting = q->PassOnIfWaitingSince(deadline_ns) || waiting;
  }
  return waiting;
}

void FuseRing::ServeRequest(void* ring, char* request, size_t bytes) {
  fuse_buf buf = {};
  buf.mem = request;
  buf.size = bytes;
  fuse_session_process_buf(static_cast<FuseRing*>(ring)->session_, &buf);
}

FuseRing::~FuseRing() {
  StopServing();
  // Also where the INIT reply failed after the queues were made (StopServing saw none ready):
  // the watchdog walks the queues, and the workers serve into their entries.
  watchdog_.Stop();
  workers_.Stop();
  Close();
  queues_ready_.store(false, std::memory_order_release);
  entries_.clear();
  queues_.clear();  // unmaps the entries: the session is gone, no reply can come any more
}

Status FuseRing::Attach() {
  fd_ = fuse_session_fd(session_);
  static const fuse_custom_io kHooks = {WriteHook, ReadHook, nullptr, nullptr};
  if (fuse_session_custom_io(session_, &kHooks, fd_) != 0) {
    return Status::IOError("FUSE ring: libfuse refused the custom transport");
  }
  return Status::OK();
}

void FuseRing::StopServing() {
  if (!queues_ready_.load(std::memory_order_acquire)) return;
  watchdog_.Stop();  // first: it calls into the queues
  for (auto& q : queues_) q->RequestStop();
  for (auto& q : queues_) q->Join();
  workers_.Stop();  // after the queues' threads, the only ones that hand requests over
}

void FuseRing::Close() {
  for (auto& q : queues_) q->Close();
}

ssize_t FuseRing::Read(int fd, void* buf, size_t len) {
  ssize_t n = read(fd, buf, len);
  if (n >= static_cast<ssize_t>(sizeof(fuse_in_header) + sizeof(fuse_init_in))) {
    fuse_in_header in;
    std::memcpy(&in, buf, sizeof in);
    if (in.opcode == FUSE_INIT) {
      fuse_init_in init;
      std::memcpy(&init, static_cast<char*>(buf) + sizeof in, sizeof init);
      const bool offered =
          (init.flags & kInitFlagsExtended) != 0 && (init.flags2 & kInitFlags2OverIoUring) != 0;
      kernel_offered_.store(offered);
      init_unique_.store(in.unique);
    }
  }
  return n;
}

ssize_t FuseRing::Write(int fd, struct iovec* iov, int count) {
  fuse_out_header out;
  std::memcpy(&out, iov[0].iov_base, sizeof out);
  if (out.unique != 0 && queues_ready_.load(std::memory_order_acquire)) {
    if (Entry* e = Claim(out.unique)) {
      size_t bytes = 0;
      for (int i = 1; i < count; ++i) {
        if (bytes + iov[i].iov_len > e->payload_bytes) {  // the kernel never asks for more
          out.error = -EIO;
          bytes = 0;
          break;
        }
        std::memcpy(e->payload + bytes, iov[i].iov_base, iov[i].iov_len);
        bytes += iov[i].iov_len;
      }
      std::memcpy(e->header->in_out, &out, sizeof out);
      e->header->ent_in_out.payload_sz = static_cast<uint32_t>(bytes);
      if (!e->queue->Commit(e, out.unique)) {
        errno = ENOENT;  // the ring is closed: libfuse treats the reply as interrupted
        return -1;
      }
      return static_cast<ssize_t>(sizeof out + bytes);
    }
  }
  uint64_t init = out.unique;
  if (init != 0 && init_unique_.compare_exchange_strong(init, 0)) return WriteInit(fd, iov, count);
  return writev(fd, iov, count);
}

FuseRing::Entry* FuseRing::Claim(uint64_t unique) {
  // A few dozen entries: a scan is cheaper than a map that every request would insert into.
  for (Entry* e : entries_) {
    uint64_t expected = unique;
    if (e->unique.load(std::memory_order_acquire) == unique &&
        e->unique.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) {
      return e;
    }
  }
  return nullptr;
}

ssize_t FuseRing::WriteInit(int fd, struct iovec* iov, int count) {
  // The reply in one piece, with FUSE_OVER_IO_URING added when the kernel offered it and the
  // queues could be made: once the kernel has that flag it holds every request until each queue
  // has registered entries.
  std::vector<char> reply;
  for (int i = 0; i < count; ++i) {
    const char* p = static_cast<const char*>(iov[i].iov_base);
    reply.insert(reply.end(), p, p + iov[i].iov_len);
  }
  fuse_init_out init = {};
  if (!kernel_offered_.load()) {
    std::fprintf(stderr,
                 "tipfs: the kernel's INIT did not offer FUSE over io_uring: serving "
                 "/dev/fuse\n");
  }
  bool use_ring = kernel_offered_.load() &&
                  reply.size() >= sizeof(fuse_out_header) + sizeof(fuse_init_out) &&
                  reinterpret_cast<fuse_out_header*>(reply.data())->error == 0;
  if (use_ring) {
    std::memcpy(&init, reply.data() + sizeof(fuse_out_header), sizeof init);
    // Every payload buffer must hold the largest request the kernel may send.
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t pages = (init.flags & kInitFlagsMaxPages) != 0 ? init.max_pages : 32;
    const size_t payload = std::max<size_t>({8192, init.max_write, pages * page});
    Status st = MakeQueues((payload + page - 1) / page * page);
    if (st.ok()) st = workers_.Start();
    if (st.ok()) st = watchdog_.Start();  // after the queues: it walks them
    if (!st.ok()) {
      watchdog_.Stop();
      workers_.Stop();
      std::fprintf(stderr, "tipfs: serving /dev/fuse, not io_uring: %s\n", st.ToString().c_str());
      queues_.clear();
      entries_.clear();
      use_ring = false;
    }
  }
  if (use_ring) {
    init.flags |= kInitFlagsExtended;
    init.flags2 |= kInitFlags2OverIoUring;
    std::memcpy(reply.data() + sizeof(fuse_out_header), &init, sizeof init);
  }
  ssize_t n = write(fd, reply.data(), reply.size());
  if (n >= 0 && use_ring) {
    queues_ready_.store(true, std::memory_order_release);
    for (auto& q : queues_) {
      Status st = q->Start();
      if (!st.ok()) {  // the kernel now holds every request until each queue has entries
        EndMount(st.ToString());
        break;
      }
    }
  }
  return n;
}

Status FuseRing::MakeQueues(size_t payload_bytes) {
  // One queue per possible CPU: the kernel serves the ring only once every one has entries.
  const int cpus = PossibleCpus();
  for (int q = 0; q < cpus; ++q) {
    auto queue = std::make_unique<Queue>(this, static_cast<uint16_t>(q));
    TIPFS_RETURN_IF_ERROR(queue->Init(kEntriesPerQueue, payload_bytes));
    for (Entry& e : queue->entries()) entries_.push_back(&e);
    queues_.push_back(std::move(queue));
  }
  return Status::OK();
}

}  // namespace tipfs::fusefs
