// The miss path's completions (issue 11, bench/fast/README.md "The miss path's CPU"): fetches
// completing on other threads while the cache is destroyed, reads started from inside a
// completion on the submitting thread, and one thread's many misses at the disks at once. Runs
// under TSan too (label sanitize).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/file_cache.h"
#include "stripe/emulation/emulated_disk.h"
#include "tests/cache/cache_rig.h"
#include "util/mutex.h"

namespace tipfs::cache {
namespace {

using testing::CacheRig;
using testing::RandomBytes;
using testing::TestOptions;
using testing::Wrap;

constexpr uint32_t kUnit = 8192;

// Threads that run completions handed to them, as a disk's completion thread (or the clock's
// timer thread) runs a fetch's: several at once, in no order.
class CompletionThreads {
 public:
  explicit CompletionThreads(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~CompletionThreads() {
    {
      MutexLock lock(&mu_);
      stopping_ = true;
    }
    cv_.SignalAll();
    for (std::thread& t : threads_) t.join();
  }
  void Push(std::function<void()> fn) {
    {
      MutexLock lock(&mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.Signal();
  }

 private:
  void Loop() {
    MutexLock lock(&mu_);
    while (true) {
      while (!stopping_ && queue_.empty()) cv_.Wait(&mu_);
      if (queue_.empty()) return;
      std::function<void()> fn = std::move(queue_.front());
      queue_.pop_front();
      lock.Unlock();
      fn();
      lock.Lock();
    }
  }

  Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

// Reads complete on CompletionThreads; everything else passes through.
class ThreadedCompletionDisk : public stripe::DiskWrapper {
 public:
  ThreadedCompletionDisk(std::unique_ptr<stripe::Disk> inner, CompletionThreads* threads)
      : DiskWrapper(std::move(inner)), threads_(threads) {}
  void Submit(stripe::DiskRequest request) override {
    if (request.kind == stripe::DiskRequest::Kind::kRead) {
      request.done = [threads = threads_, done = std::move(request.done)](Result<uint64_t> r) {
        threads->Push([done, r] { done(r); });
      };
    }
    inner_->Submit(std::move(request));
  }

 private:
  CompletionThreads* const threads_;
};

TEST(MissCompletionTest, TheCacheOutlivesTheLastOfManyCompletionsOnOtherThreads) {
  for (int round = 0; round < 20; ++round) {
    auto threads = std::make_unique<CompletionThreads>(4);
    CompletionThreads* raw = threads.get();
    CacheRig rig(4, kUnit, TestOptions(256), Wrap::kNone,
                 [raw](std::unique_ptr<stripe::Disk> inner, Clock*) {
                   return std::unique_ptr<stripe::Disk>(
                       std::make_unique<ThreadedCompletionDisk>(std::move(inner), raw));
                 });
    const std::string data = RandomBytes(64 * 4096, 7 + round);
    rig.WriteUnderneath(3, data);
    constexpr int kReads = 64;
    std::atomic<int> done{0};
    std::vector<std::string> out(kReads, std::string(4096, '\0'));
    for (int i = 0; i < kReads; ++i) {
      rig.cache->ReadAsync(ReadContext{100u + i, 100u + i}, 3, uint64_t{4096} * i, 4096,
                           data.size(), out[i].data(), [&done](Result<size_t> r) {
                             EXPECT_TRUE(r.ok());
                             done.fetch_add(1);
                           });
    }
    // Destroyed while the completions run: it waits for every fetch, and no completion may
    // touch it after (the last fetch's count goes to zero under its lock).
    rig.cache.reset();
    EXPECT_EQ(done.load(), kReads);
    for (int i = 0; i < kReads; ++i) EXPECT_EQ(out[i], data.substr(4096 * i, 4096)) << i;
    threads.reset();
  }
}

TEST(MissCompletionTest, AReadStartedInsideAnInlineCompletionIsSubmitted) {
  // In-memory disks complete inline, inside the submission: each read's callback starts the
  // next read, whose fetch the submitting loop already running on this thread must send.
  CacheRig rig(2, kUnit, TestOptions(64));
  const std::string data = RandomBytes(16 * 4096, 11);
  rig.WriteUnderneath(5, data);
  constexpr int kChain = 8;
  std::vector<std::string> out(kChain, std::string(4096, '\0'));
  int completed = 0;
  std::function<void(int)> start = [&](int i) {
    rig.cache->ReadAsync(ReadContext{100, 100}, 5, uint64_t{4096} * 2 * i, 4096, data.size(),
                         out[i].data(), [&, i](Result<size_t> r) {
                           ASSERT_TRUE(r.ok());
                           ++completed;
                           if (i + 1 < kChain) start(i + 1);
                         });
  };
  start(0);
  EXPECT_EQ(completed, kChain);
  for (int i = 0; i < kChain; ++i) EXPECT_EQ(out[i], data.substr(4096 * 2 * i, 4096)) << i;
  EXPECT_EQ(rig.cache->Stats().demand_misses, uint64_t{kChain});
}

// Misses in flight are bounded by the disks' queues, not by the threads that start reads (the
// FUSE workers): one thread starts 64 reads that miss, on disks that hold every completion
// (EmulatedDisk's hold=on), and all 64 are at the disks at once. Each then completes once with
// its bytes when the hold ends.
TEST(MissCompletionTest, OneThreadKeepsManyMissesAtTheDisksAtOnce) {
  std::vector<std::shared_ptr<stripe::DiskEmulator>> emulators;
  CacheRig rig(4, kUnit, TestOptions(256, kUnit), Wrap::kNone,
               [&emulators](std::unique_ptr<stripe::Disk> inner, Clock* clock) {
                 stripe::EmulatedDiskOptions o;
                 o.model.hold = true;  // the `none` profile: the real disk's timing, held
                 o.burn_overhead = false;
                 auto disk = std::make_unique<stripe::EmulatedDisk>(std::move(inner), clock, o);
                 emulators.push_back(disk->shared_emulator());
                 return std::unique_ptr<stripe::Disk>(std::move(disk));
               });
  auto at_disks = [&emulators] {
    uint64_t n = 0;
    for (const auto& e : emulators) n += e->Stats().in_flight;
    return n;
  };
  auto end_hold = [&emulators] {
    for (const auto& e : emulators) {
      stripe::DiskModelConfig model = e->model();
      model.hold = false;
      e->SetModel(model);
    }
  };
  constexpr int kReads = 64;  // four times the FUSE worker threads
  const std::string data = RandomBytes(kReads * kUnit, 13);
  rig.WriteUnderneath(9, data);
  std::vector<std::string> out(kReads);
  std::vector<std::atomic<int>> calls(kReads);
  std::atomic<int> started{0};
  // One thread starts every read (one per block, so each misses); none may wait for a disk.
  std::thread reader([&] {
    for (int i = 0; i < kReads; ++i) {
      rig.cache->ReadShared(ReadContext{100, 100}, 9, uint64_t{kUnit} * i, 4096, data.size(),
                            [&, i](Result<ReadData> r) {
                              ASSERT_TRUE(r.ok()) << r.status().ToString();
                              out[i].resize(r->bytes);
                              r->CopyTo(out[i].data());
                              calls[i].fetch_add(1);
                            });
      started.fetch_add(1);
    }
  });
  // Polled, with a generous bound only so that a read that blocks fails the test, not hangs it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (started.load() < kReads && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(started.load(), kReads) << "a read waited for the disks before returning";
  EXPECT_EQ(at_disks(), uint64_t{kReads});
  for (int i = 0; i < kReads; ++i) EXPECT_EQ(calls[i].load(), 0) << "read " << i;
  end_hold();
  reader.join();
  while (rig.clock.AdvanceToNext()) {
  }
  EXPECT_EQ(at_disks(), 0u);
  EXPECT_EQ(rig.cache->Stats().demand_misses, uint64_t{kReads});
  for (int i = 0; i < kReads; ++i) {
    EXPECT_EQ(calls[i].load(), 1) << "times read " << i << " completed";
    EXPECT_EQ(out[i], data.substr(uint64_t{kUnit} * i, 4096)) << "read " << i;
  }
}

}  // namespace
}  // namespace tipfs::cache
