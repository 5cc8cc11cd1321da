// IoRing on its own: what its waiting requests get when the kernel refuses a submission
// (io_uring_enter failing, io_ring.h "failed / finished"). The refusals are real, made by seccomp
// filters on the ring's thread: one makes io_uring_enter fail with EPERM whenever it carries 3 or
// more SQEs, so the wake-up read and a lone request still go in, and a batch does not; the other
// hands each io_uring_enter to a supervisor thread of the test, which refuses all of them while
// the test says so.
#include "stripe/io_ring.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/temp_dir.h"
#include "util/mutex.h"

namespace tipfs::stripe {
namespace {

constexpr int kOps = 8;
constexpr uint32_t kRefusedFrom = 3;  // SQEs in one io_uring_enter that the filter refuses
constexpr uint64_t kLength = 4096;

// Installs on the calling thread, and so on every thread it starts from now on, a filter that
// lets every system call but io_uring_enter through and decides io_uring_enter with `on_enter`
// (BPF statements that end in returns). Returns what seccomp(2) returns with `flags` (0, or a
// listener fd), or -errno on a kernel that does not let this thread filter its system calls.
int FilterEnters(std::vector<sock_filter> on_enter, unsigned flags) {
#if defined(__x86_64__)
  constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
  return -ENOSYS;
#endif
  std::vector<sock_filter> filter = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_enter, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  filter.insert(filter.end(), on_enter.begin(), on_enter.end());
  sock_fprog program{static_cast<unsigned short>(filter.size()), filter.data()};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -errno;
  const long r = ::syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, flags, &program);
  return r < 0 ? -errno : static_cast<int>(r);
}

// A filter under which io_uring_enter fails with `err` when it submits `min_sqes` or more SQEs.
// Returns 0, or the errno of a kernel that does not let this thread filter its system calls.
int RefuseSubmissionsOf(uint32_t min_sqes, int err) {
  // to_submit is the second argument, an unsigned int: the low word of args[1] (little-endian).
  return -FilterEnters(
      {
          BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1])),
          BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, min_sqes, 0, 1),
          BPF_STMT(BPF_RET | BPF_K,
                   SECCOMP_RET_ERRNO | (static_cast<uint32_t>(err) & SECCOMP_RET_DATA)),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      },
      0);
}

// A filter that hands every io_uring_enter to a RefusalSwitch. Returns the listener fd, or
// -errno.
int HandEntersToListener() {
  return FilterEnters({BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF)},
                      SECCOMP_FILTER_FLAG_NEW_LISTENER);
}

// The supervisor of HandEntersToListener's filter: a thread that lets each io_uring_enter run
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE) or, while refusing, fails it with `err`, and counts those.
class RefusalSwitch {
 public:
  RefusalSwitch(int listener, int err)
      : listener_(listener), err_(err), thread_([this] { Serve(); }) {}
  ~RefusalSwitch() {
    stop_.store(true);
    thread_.join();
    ::close(listener_);
  }
  void Refuse(bool refuse) { refusing_.store(refuse); }
  uint64_t refused() const { return refused_.load(); }

 private:
  void Serve() {
    while (!stop_.load()) {
      pollfd ready{listener_, POLLIN, 0};
      if (::poll(&ready, 1, 10) <= 0 || (ready.revents & POLLIN) == 0) continue;
      seccomp_notif request;
      std::memset(&request, 0, sizeof(request));
      if (::ioctl(listener_, SECCOMP_IOCTL_NOTIF_RECV, &request) != 0) continue;
      seccomp_notif_resp response;
      std::memset(&response, 0, sizeof(response));
      response.id = request.id;
      if (refusing_.load()) {
        response.error = -err_;
        refused_.fetch_add(1);
      } else {
        response.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
      }
      // ENOENT: the call was interrupted meanwhile; the ring's thread makes it again.
      (void)::ioctl(listener_, SECCOMP_IOCTL_NOTIF_SEND, &response);
    }
  }

  const int listener_;
  const int err_;
  std::atomic<bool> refusing_{false};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> refused_{0};
  std::thread thread_;
};

// Reads of one file; each op's finish records its result, and how often it ran.
struct Reads {
  struct Outcome {
    std::atomic<int> calls{0};
    std::atomic<int64_t> result{0};
  };

  IoRing* ring = nullptr;
  int fd = -1;
  std::array<std::array<char, kLength>, kOps + 2> buffers{};
  std::array<Outcome, kOps + 2> outcomes;  // [0, kOps): the batch; kOps: the first; kOps + 1: later
  Mutex mu;
  CondVar cv;
  int finished GUARDED_BY(mu) = 0;

  void Start(size_t slot, void (*finish)(IoRing::Op*, int64_t)) {
    IoRing::Op* op = ring->AllocOp();
    op->kind = IoRing::OpKind::kRead;
    op->fd = fd;
    op->buffer = buffers[slot].data();
    op->offset = slot * kLength;
    op->length = kLength;
    op->finish = finish;
    op->owner = this;
    op->owner_data = reinterpret_cast<void*>(slot);
    ring->Submit(op);
  }
  static void Record(IoRing::Op* op, int64_t result) {
    Reads* reads = static_cast<Reads*>(op->owner);
    Outcome& outcome = reads->outcomes[reinterpret_cast<uintptr_t>(op->owner_data)];
    outcome.result.store(result);
    outcome.calls.fetch_add(1);
    MutexLock lock(&reads->mu);
    ++reads->finished;
    reads->cv.SignalAll();
  }
  // The first read's finish, on the ring's thread: queues the whole batch there, so the ring
  // prepares all of it for one io_uring_enter.
  static void RecordAndStartBatch(IoRing::Op* op, int64_t result) {
    Reads* reads = static_cast<Reads*>(op->owner);
    for (size_t i = 0; i < kOps; ++i) reads->Start(i, &Record);
    Record(op, result);
  }
  // Waits until `count` finishes ran; false after a generous time (a waiter that would hang).
  bool WaitFor(int count) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    MutexLock lock(&mu);
    while (finished < count) {
      if (!cv.WaitUntil(&mu, deadline)) return finished >= count;
    }
    return true;
  }
};

std::string FileBytes(size_t size) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>('a' + (i * 7 + i / kLength) % 26);
  return bytes;
}

// A file of kOps + 2 blocks of known bytes, open for `reads_`.
class IoRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = dir_.Sub("file");
    std::ofstream(path, std::ios::binary) << bytes_;
    reads_.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(reads_.fd, 0) << std::strerror(errno);
  }
  void TearDown() override {
    if (reads_.fd >= 0) ::close(reads_.fd);
  }

  testing::TempDir dir_{"tipfs-io-ring"};
  const std::string bytes_ = FileBytes((kOps + 2) * kLength);
  Reads reads_;
};

// Every request of a submission the kernel refused finishes once, with the refusal's errno; none
// is left waiting, none is retried, and the ring takes later requests as before.
TEST_F(IoRingTest, ASubmissionTheKernelRefusesFailsEachOfItsRequestsOnce) {
  // The filter goes on a thread of its own, which makes the ring (and so the ring's thread).
  int filtered = 0;
  std::optional<Result<std::unique_ptr<IoRing>>> made;
  std::thread maker([&] {
    filtered = RefuseSubmissionsOf(kRefusedFrom, EPERM);
    if (filtered == 0) made.emplace(IoRing::Create(16, "test-ring"));
  });
  maker.join();
  if (filtered != 0) {
    GTEST_SKIP() << "cannot install a seccomp filter here: " << std::strerror(filtered);
  }
  if (!made->ok()) {
    GTEST_SKIP() << "io_uring unavailable: " << made->status().ToString();
  }
  std::unique_ptr<IoRing> ring = std::move(**made);
  reads_.ring = ring.get();

  // One read alone goes in (at most the wake-up read beside it) and succeeds.
  reads_.Start(kOps, &Reads::RecordAndStartBatch);
  if (!reads_.WaitFor(1 + kOps)) {
    (void)ring.release();  // its destructor would wait for the lost requests forever
    FAIL() << "a request of the refused batch never finished";
  }
  EXPECT_EQ(reads_.outcomes[kOps].result.load(), static_cast<int64_t>(kLength));
  for (size_t i = 0; i < kOps; ++i) {
    EXPECT_EQ(reads_.outcomes[i].result.load(), -EPERM) << "request " << i;
  }
  EXPECT_EQ(ring->counters().submit_errors, static_cast<uint64_t>(kOps));

  // The ring still works: a later lone read goes in and reads its bytes.
  reads_.Start(kOps + 1, &Reads::Record);
  if (!reads_.WaitFor(2 + kOps)) {
    (void)ring.release();
    FAIL() << "the read after the refusal never finished";
  }
  EXPECT_EQ(reads_.outcomes[kOps + 1].result.load(), static_cast<int64_t>(kLength));
  EXPECT_EQ(std::string(reads_.buffers[kOps + 1].data(), kLength),
            bytes_.substr((kOps + 1) * kLength, kLength));

  ring.reset();  // joins the ring's thread: no finish can run after this
  for (size_t i = 0; i < reads_.outcomes.size(); ++i) {
    EXPECT_EQ(reads_.outcomes[i].calls.load(), 1) << "times request " << i << " finished";
  }
}

// While the kernel refuses every io_uring_enter, each request submitted meanwhile finishes once,
// with the refusal's errno, and the ring's thread does not spin on the refusals; when the kernel
// takes submissions again, so does the ring.
TEST_F(IoRingTest, WhileTheKernelRefusesEveryEnterRequestsFailAndTheRingDoesNotSpin) {
  int listener = -1;
  std::optional<Result<std::unique_ptr<IoRing>>> made;
  std::thread maker([&] {
    listener = HandEntersToListener();
    if (listener >= 0) made.emplace(IoRing::Create(16, "test-ring"));
  });
  maker.join();
  if (listener < 0) {
    GTEST_SKIP() << "cannot install a seccomp filter here: " << std::strerror(-listener);
  }
  // Until it serves, the ring's thread waits in its first io_uring_enter.
  RefusalSwitch refusals(listener, EPERM);
  if (!made->ok()) {
    GTEST_SKIP() << "io_uring unavailable: " << made->status().ToString();
  }
  std::unique_ptr<IoRing> ring = std::move(**made);
  reads_.ring = ring.get();

  // Requests submitted while every enter is refused, spread over half a second.
  refusals.Refuse(true);
  constexpr int kRefusedReads = 5;
  for (int i = 0; i < kRefusedReads; ++i) {
    reads_.Start(i, &Reads::Record);
    if (!reads_.WaitFor(i + 1)) {
      (void)ring.release();  // its destructor would wait for the lost request forever
      FAIL() << "request " << i << " never finished while the kernel refused";
    }
    EXPECT_EQ(reads_.outcomes[i].result.load(), -EPERM) << "request " << i;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // A ring retrying at once makes tens of thousands of attempts in that time.
  const uint64_t refused = refusals.refused();
  EXPECT_LT(refused, 200u) << "io_uring_enter attempts refused in about 500 ms";

  // The kernel takes submissions again: a read goes in and reads its bytes.
  refusals.Refuse(false);
  reads_.Start(kOps, &Reads::Record);
  if (!reads_.WaitFor(kRefusedReads + 1)) {
    (void)ring.release();
    FAIL() << "the read after the refusals never finished";
  }
  EXPECT_EQ(reads_.outcomes[kOps].result.load(), static_cast<int64_t>(kLength));
  EXPECT_EQ(std::string(reads_.buffers[kOps].data(), kLength),
            bytes_.substr(kOps * kLength, kLength));
  // The ring counted every refusal, and failed only the requests submitted during them.
  const IoRing::Counters counters = ring->counters();
  EXPECT_EQ(counters.refused_enters, refusals.refused());
  EXPECT_EQ(counters.submit_errors, static_cast<uint64_t>(kRefusedReads));

  ring.reset();  // joins the ring's thread: no finish can run after this
  for (int i = 0; i < kRefusedReads; ++i) {
    EXPECT_EQ(reads_.outcomes[i].calls.load(), 1) << "times request " << i << " finished";
  }
  EXPECT_EQ(reads_.outcomes[kOps].calls.load(), 1) << "times the later read finished";
}

}  // namespace
}  // namespace tipfs::stripe
