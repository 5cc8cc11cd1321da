// A read submitted through the io_uring by a thread that exits before the read completes must
// still succeed. libfuse retires idle worker threads, so a FUSE thread that issued a prefetch can
// be gone when the disk delivers it; io_uring fails such a buffered read with -EFAULT when its
// completion has to be retried in the context of the (exited) submitter (liburing issue #1595).
// Found under load: readers that joined such a prefetch got EIO.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "stripe/io_ring.h"
#include "stripe/posix_disk.h"
#include "tests/support/temp_dir.h"

namespace tipfs::testing {
namespace {

constexpr uint64_t kObjectBytes = 4 << 20;
constexpr int kObjects = 16;

TEST(ThreadExitReadTest, ReadsOfExitedSubmittersComplete) {
  // A disk on a real block device (the temporary directory), so that reads miss the page cache.
  TempDir dir("tipfs-exit-read");
  std::filesystem::create_directories(dir.Sub("disk/objects"));
  auto ring = stripe::IoRing::Create(64);
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  auto disk = stripe::PosixDisk::Open(dir.Sub("disk"), 0, ring->get());
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  const std::string data(kObjectBytes, 'q');
  for (int o = 1; o <= kObjects; ++o) {
    std::mutex mu;
    std::condition_variable cv;
    bool finished = false;
    stripe::DiskRequest write;
    write.kind = stripe::DiskRequest::Kind::kWrite;
    write.object = o;
    write.length = data.size();
    write.buffer = const_cast<char*>(data.data());
    write.done = [&](Result<uint64_t> r) {
      EXPECT_TRUE(r.ok());
      std::lock_guard<std::mutex> lock(mu);
      finished = true;
      cv.notify_one();
    };
    (*disk)->Submit(std::move(write));
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return finished; });
  }
  // Out of the page cache, so the reads below go to the device and complete later.
  for (int o = 1; o <= kObjects; ++o) {
    const std::string path = dir.Sub("disk/") + stripe::PosixDisk::ObjectRelativePath(o);
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }

  std::vector<std::string> buffers(kObjects, std::string(kObjectBytes, '\0'));
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<std::string> errors;
  for (int o = 1; o <= kObjects; ++o) {
    // Each read is submitted by a thread that ends right after submitting.
    std::thread([&, o] {
      stripe::DiskRequest read;
      read.kind = stripe::DiskRequest::Kind::kRead;
      read.object = o;
      read.length = kObjectBytes;
      read.buffer = buffers[o - 1].data();
      read.done = [&, o](Result<uint64_t> r) {
        std::lock_guard<std::mutex> lock(mu);
        if (!r.ok()) errors.push_back("object " + std::to_string(o) + ": " + r.status().ToString());
        ++done;
        cv.notify_one();
      };
      (*disk)->Submit(std::move(read));
    }).join();
  }
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return done == kObjects; }));
  for (const std::string& e : errors) ADD_FAILURE() << e;
  for (int o = 0; o < kObjects; ++o) EXPECT_TRUE(buffers[o] == data) << "object " << o + 1;
}

}  // namespace
}  // namespace tipfs::testing
