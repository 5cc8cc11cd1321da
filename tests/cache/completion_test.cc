// The miss path's completions (issue 11, bench/fast/README.md "The miss path's CPU"): fetches
// completing on other threads while the cache is destroyed, and reads started from inside a
// completion on the submitting thread. Runs under TSan too (label sanitize).
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/file_cache.h"
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

}  // namespace
}  // namespace tipfs::cache
