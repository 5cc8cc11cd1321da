// Requests submitted by a thread that exits before they complete must still succeed. libfuse
// retires idle worker threads, and FUSE workers submit reads, writes and prefetches; an io_uring
// request belongs to the task that submitted it, so when that task exits the kernel cancels its
// pending work (-ECANCELED for a buffered write still queued in io-wq) or fails a buffered read
// whose retry needed the submitter (-EFAULT, liburing issue #1595). Found under load: creates
// failed with EIO ("write object ...: Operation canceled") and readers that joined such a
// prefetch got EIO. The fix is that no thread outside the disk's ring submits to io_uring.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "stripe/io_ring.h"
#include "stripe/posix_disk.h"
#include "tests/support/temp_dir.h"
#include "util/mutex.h"

namespace tipfs::testing {
namespace {

constexpr uint64_t kObjectBytes = 4 << 20;
constexpr int kObjects = 16;

// Counts completions and collects the errors of requests submitted from short-lived threads.
class Completions {
 public:
  std::function<void(Result<uint64_t>)> Callback(const std::string& what) {
    return [this, what](Result<uint64_t> r) {
      MutexLock lock(&mu_);
      if (!r.ok()) errors_.push_back(what + ": " + r.status().ToString());
      ++done_;
      cv_.Signal();
    };
  }
  // Waits for `count` completions (at most a minute) and reports every error.
  void ExpectAllSucceeded(int count) {
    MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (done_ != count && cv_.WaitUntil(&mu_, deadline)) {
    }
    ASSERT_EQ(done_, count) << done_ << " of " << count << " requests completed";
    for (const std::string& e : errors_) ADD_FAILURE() << e;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int done_ GUARDED_BY(mu_) = 0;
  std::vector<std::string> errors_ GUARDED_BY(mu_);
};

class ThreadExitIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A disk on a real block device (the temporary directory), so that I/O reaches the device.
    std::filesystem::create_directories(dir_.Sub("disk/objects"));
    auto ring = stripe::IoRing::Create(64);
    ASSERT_TRUE(ring.ok()) << ring.status().ToString();
    ring_ = std::move(*ring);
    auto disk = stripe::PosixDisk::Open(dir_.Sub("disk"), 0, ring_.get());
    ASSERT_TRUE(disk.ok()) << disk.status().ToString();
    disk_ = std::move(*disk);
  }

  // Each request is submitted by a thread that ends right after submitting.
  void SubmitFromExitingThread(stripe::DiskRequest request) {
    std::thread([this, &request] { disk_->Submit(std::move(request)); }).join();
  }

  stripe::DiskRequest Request(stripe::DiskRequest::Kind kind, int object, char* buffer,
                              Completions* completions) {
    stripe::DiskRequest r;
    r.kind = kind;
    r.object = object;
    r.length = kObjectBytes;
    r.buffer = buffer;
    r.done = completions->Callback("object " + std::to_string(object));
    return r;
  }

  void DropFromPageCache() {
    for (int o = 1; o <= kObjects; ++o) {
      const std::string path = dir_.Sub("disk/") + stripe::PosixDisk::ObjectRelativePath(o);
      int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      ASSERT_GE(fd, 0) << path;
      fdatasync(fd);
      posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      close(fd);
    }
  }

  TempDir dir_{"tipfs-exit-io"};
  std::unique_ptr<stripe::IoRing> ring_;
  std::unique_ptr<stripe::PosixDisk> disk_;
};

TEST_F(ThreadExitIoTest, WritesOfExitedSubmittersComplete) {
  // Buffered writes normally complete inside the submit; those that contend for the object (other
  // threads writing it) are handed to the submitter's io-wq, whose queued work the kernel cancels
  // when the submitter exits. So several short-lived threads write pieces of one object at once,
  // as FUSE workers writing the stripe units of one file do.
  constexpr int kThreads = 4;
  constexpr uint64_t kPieces = 64;
  constexpr uint64_t kPieceBytes = kObjectBytes / kPieces;
  std::string data(kObjectBytes, '\0');
  for (uint64_t i = 0; i < kObjectBytes; ++i) data[i] = static_cast<char>('a' + (i / 4096) % 26);
  Completions writes;
  for (int o = 1; o <= kObjects; ++o) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, o, t] {
        for (uint64_t p = t; p < kPieces; p += kThreads) {
          stripe::DiskRequest r =
              Request(stripe::DiskRequest::Kind::kWrite, o, data.data() + p * kPieceBytes, &writes);
          r.offset = p * kPieceBytes;
          r.length = kPieceBytes;
          disk_->Submit(std::move(r));
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  writes.ExpectAllSucceeded(kObjects * kPieces);
  DropFromPageCache();
  std::vector<std::string> buffers(kObjects, std::string(kObjectBytes, '\0'));
  Completions reads;
  for (int o = 1; o <= kObjects; ++o) {
    disk_->Submit(Request(stripe::DiskRequest::Kind::kRead, o, buffers[o - 1].data(), &reads));
  }
  reads.ExpectAllSucceeded(kObjects);
  for (int o = 0; o < kObjects; ++o) EXPECT_TRUE(buffers[o] == data) << "object " << o + 1;
}

TEST_F(ThreadExitIoTest, ReadsOfExitedSubmittersComplete) {
  const std::string data(kObjectBytes, 'q');
  Completions writes;
  for (int o = 1; o <= kObjects; ++o) {
    disk_->Submit(
        Request(stripe::DiskRequest::Kind::kWrite, o, const_cast<char*>(data.data()), &writes));
  }
  writes.ExpectAllSucceeded(kObjects);
  // Out of the page cache, so the reads below go to the device and complete later.
  DropFromPageCache();
  std::vector<std::string> buffers(kObjects, std::string(kObjectBytes, '\0'));
  Completions reads;
  for (int o = 1; o <= kObjects; ++o) {
    SubmitFromExitingThread(
        Request(stripe::DiskRequest::Kind::kRead, o, buffers[o - 1].data(), &reads));
  }
  reads.ExpectAllSucceeded(kObjects);
  for (int o = 0; o < kObjects; ++o) EXPECT_TRUE(buffers[o] == data) << "object " << o + 1;
}

}  // namespace
}  // namespace tipfs::testing
