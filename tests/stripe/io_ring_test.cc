// IoRing on its own: what its waiting requests get when the kernel refuses a submission
// (io_uring_enter failing, io_ring.h "failed / finished"). The refusal is real: a seccomp filter
// on the ring's thread makes io_uring_enter fail with EPERM whenever it carries 3 or more SQEs,
// so the wake-up read and a lone request still go in, and a batch does not.
#include "stripe/io_ring.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
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
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "tests/support/temp_dir.h"
#include "util/mutex.h"

namespace tipfs::stripe {
namespace {

constexpr int kOps = 8;
constexpr uint32_t kRefusedFrom = 3;  // SQEs in one io_uring_enter that the filter refuses
constexpr uint64_t kLength = 4096;

// Installs on the calling thread, and so on every thread it starts from now on, a filter under
// which io_uring_enter fails with `err` when it submits `min_sqes` or more SQEs. Returns 0, or
// the errno of a kernel that does not let this thread filter its system calls.
int RefuseSubmissionsOf(uint32_t min_sqes, int err) {
#if defined(__x86_64__)
  constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
  return ENOSYS;
#endif
  // to_submit is the second argument, an unsigned int: the low word of args[1] (little-endian).
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_enter, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1])),
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, min_sqes, 0, 1),
      BPF_STMT(BPF_RET | BPF_K,
               SECCOMP_RET_ERRNO | (static_cast<uint32_t>(err) & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) return errno;
  return 0;
}

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

// Every request of a submission the kernel refused finishes once, with the refusal's errno; none
// is left waiting, none is retried, and the ring takes later requests as before.
TEST(IoRingTest, ASubmissionTheKernelRefusesFailsEachOfItsRequestsOnce) {
  testing::TempDir dir("tipfs-io-ring");
  const std::string path = dir.Sub("file");
  const std::string bytes = FileBytes((kOps + 2) * kLength);
  std::ofstream(path, std::ios::binary) << bytes;
  Reads reads;
  reads.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(reads.fd, 0) << std::strerror(errno);

  // The filter goes on a thread of its own, which makes the ring (and so the ring's thread).
  int filtered = 0;
  std::optional<Result<std::unique_ptr<IoRing>>> made;
  std::thread maker([&] {
    filtered = RefuseSubmissionsOf(kRefusedFrom, EPERM);
    if (filtered == 0) made.emplace(IoRing::Create(16, "test-ring"));
  });
  maker.join();
  if (filtered != 0) {
    ::close(reads.fd);
    GTEST_SKIP() << "cannot install a seccomp filter here: " << std::strerror(filtered);
  }
  if (!made->ok()) {
    ::close(reads.fd);
    GTEST_SKIP() << "io_uring unavailable: " << made->status().ToString();
  }
  std::unique_ptr<IoRing> ring = std::move(**made);
  reads.ring = ring.get();

  // One read alone goes in (at most the wake-up read beside it) and succeeds.
  reads.Start(kOps, &Reads::RecordAndStartBatch);
  if (!reads.WaitFor(1 + kOps)) {
    (void)ring.release();  // its destructor would wait for the lost requests forever
    FAIL() << "a request of the refused batch never finished";
  }
  EXPECT_EQ(reads.outcomes[kOps].result.load(), static_cast<int64_t>(kLength));
  for (size_t i = 0; i < kOps; ++i) {
    EXPECT_EQ(reads.outcomes[i].result.load(), -EPERM) << "request " << i;
  }
  EXPECT_EQ(ring->counters().submit_errors, static_cast<uint64_t>(kOps));

  // The ring still works: a later lone read goes in and reads its bytes.
  reads.Start(kOps + 1, &Reads::Record);
  if (!reads.WaitFor(2 + kOps)) {
    (void)ring.release();
    FAIL() << "the read after the refusal never finished";
  }
  EXPECT_EQ(reads.outcomes[kOps + 1].result.load(), static_cast<int64_t>(kLength));
  EXPECT_EQ(std::string(reads.buffers[kOps + 1].data(), kLength),
            bytes.substr((kOps + 1) * kLength, kLength));

  ring.reset();  // joins the ring's thread: no finish can run after this
  for (size_t i = 0; i < reads.outcomes.size(); ++i) {
    EXPECT_EQ(reads.outcomes[i].calls.load(), 1) << "times request " << i << " finished";
  }
  ::close(reads.fd);
}

}  // namespace
}  // namespace tipfs::stripe
