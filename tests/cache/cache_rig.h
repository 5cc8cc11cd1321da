// Test rig for cache/: a FileCache over a volume of in-memory disks on a FakeClock, optionally
// with each disk wrapped in a HeldDisk (completions held until the test lets them go, so a fetch
// can be caught in flight) or a FaultyDisk (injected errors).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cache/file_cache.h"
#include "stripe/emulation/emulated_disk.h"
#include "stripe/faulty_disk.h"
#include "stripe/striped_io.h"
#include "stripe/volume.h"
#include "tests/support/mem_disk.h"
#include "util/clock.h"
#include "util/mutex.h"

namespace tipfs::cache::testing {

// A Disk wrapper that performs each read at once on the inner disk (so the bytes are those of
// the moment of submission) but holds its completion until Release: a fetch in flight on demand.
// Writes and everything else pass straight through.
class HeldDisk : public stripe::Disk {
 public:
  explicit HeldDisk(std::unique_ptr<stripe::Disk> inner) : inner_(std::move(inner)) {}

  void Submit(stripe::DiskRequest request) override {
    if (request.kind != stripe::DiskRequest::Kind::kRead) return inner_->Submit(std::move(request));
    auto done = std::move(request.done);
    request.done = [this, done = std::move(done)](Result<uint64_t> r) mutable {
      MutexLock lock(&mu_);
      if (!holding_) {
        lock.Unlock();
        done(std::move(r));
        return;
      }
      held_.push_back([done = std::move(done), r = std::move(r)]() mutable { done(std::move(r)); });
    };
    inner_->Submit(std::move(request));
  }
  // Starts or stops holding completions (stopping does not release the held ones).
  void Hold(bool on) {
    MutexLock lock(&mu_);
    holding_ = on;
  }
  size_t held() const {
    MutexLock lock(&mu_);
    return held_.size();
  }
  // Delivers every held completion, in order.
  void Release() {
    std::deque<std::function<void()>> run;
    {
      MutexLock lock(&mu_);
      run.swap(held_);
    }
    for (auto& fn : run) fn();
  }

  Status Truncate(stripe::ObjectId o, uint64_t size) override { return inner_->Truncate(o, size); }
  Status Remove(stripe::ObjectId o) override { return inner_->Remove(o); }
  Result<stripe::ObjectInfo> Stat(stripe::ObjectId o) override { return inner_->Stat(o); }
  Status ListObjects(std::vector<stripe::ObjectId>* out) override {
    return inner_->ListObjects(out);
  }
  Result<stripe::DiskUsage> Usage() override { return inner_->Usage(); }
  Status SyncAll() override { return inner_->SyncAll(); }
  std::string name() const override { return inner_->name(); }

 private:
  std::unique_ptr<stripe::Disk> inner_;
  mutable Mutex mu_;
  bool holding_ GUARDED_BY(mu_) = false;
  std::deque<std::function<void()>> held_ GUARDED_BY(mu_);
};

// A FakeClock on which each thread has a CPU clock of its own: ThreadCpuNanos is the fake time
// plus what the thread was charged, by Charge (a stage the test gives a CPU cost, such as a
// disk's submission) and by every NowNanos call once set_cpu_per_clock_read is set (the work a
// stage of the data path does around its clock reading). Tests of the TIP estimators use it to
// see which stages an estimate counts.
class CpuFakeClock : public FakeClock {
 public:
  int64_t NowNanos() const override {
    charged_ += per_read_.load(std::memory_order_relaxed);
    return FakeClock::NowNanos();
  }
  int64_t ThreadCpuNanos() const override { return FakeClock::NowNanos() + charged_; }
  static void Charge(int64_t nanos) { charged_ += nanos; }
  void set_cpu_per_clock_read(int64_t nanos) { per_read_.store(nanos); }

 private:
  static inline thread_local int64_t charged_ = 0;
  std::atomic<int64_t> per_read_{0};
};

enum class Wrap { kNone, kHeld, kFaulty };

// Wraps each in-memory disk (e.g. in an EmulatedDisk on the rig's clock).
using WrapDisk =
    std::function<std::unique_ptr<stripe::Disk>(std::unique_ptr<stripe::Disk>, Clock* clock)>;

// Wraps each in-memory disk in an EmulatedDisk on the rig's clock that takes `access_ns` for a
// request not continuing the previous one, with no transfer time and no CPU burnt.
inline WrapDisk EmulatedDisks(int64_t access_ns) {
  return [access_ns](std::unique_ptr<stripe::Disk> inner, Clock* clock) {
    stripe::EmulatedDiskOptions o;
    o.model.profile = "test";
    o.model.access_ns = access_ns;
    o.burn_overhead = false;
    return std::unique_ptr<stripe::Disk>(
        std::make_unique<stripe::EmulatedDisk>(std::move(inner), clock, o));
  };
}

struct CacheRig {
  CacheRig(uint32_t disk_count, uint32_t stripe_unit, CacheOptions options, Wrap wrap = Wrap::kNone,
           WrapDisk wrap_disk = nullptr) {
    std::vector<std::unique_ptr<stripe::Disk>> disks;
    for (uint32_t i = 0; i < disk_count; ++i) {
      auto mem = std::make_unique<tipfs::testing::MemDisk>("disk " + std::to_string(i));
      mems.push_back(mem.get());
      std::unique_ptr<stripe::Disk> disk = std::move(mem);
      if (wrap == Wrap::kHeld) {
        auto held_disk = std::make_unique<HeldDisk>(std::move(disk));
        held.push_back(held_disk.get());
        disk = std::move(held_disk);
      } else if (wrap == Wrap::kFaulty) {
        auto faulty_disk = std::make_unique<stripe::FaultyDisk>(std::move(disk));
        faulty.push_back(faulty_disk.get());
        disk = std::move(faulty_disk);
      }
      if (wrap_disk) disk = wrap_disk(std::move(disk), &clock);
      disks.push_back(std::move(disk));
    }
    stripe::Label label;
    label.count = disk_count;
    label.stripe_unit = stripe_unit;
    volume = std::make_unique<stripe::Volume>(label, std::move(disks));
    io = std::make_unique<stripe::StripedIo>(volume.get());
    cache = std::make_unique<FileCache>(io.get(), &clock, options);
  }
  ~CacheRig() {
    for (HeldDisk* h : held) {
      h->Hold(false);
      h->Release();
    }
    while (clock.AdvanceToNext()) {
    }
    cache.reset();
  }

  // Starts a read and advances the clock until it completes (the reader's stall).
  std::string ReadWaiting(const ReadContext& ctx, uint64_t ino, uint64_t offset, size_t length,
                          uint64_t file_size, int* error = nullptr) {
    std::string out(length, '\x5a');
    bool done = false;
    Result<size_t> result = size_t{0};
    cache->ReadAsync(ctx, ino, offset, length, file_size, out.data(), [&](Result<size_t> r) {
      result = std::move(r);
      done = true;
    });
    while (!done && clock.AdvanceToNext()) {
    }
    EXPECT_TRUE(done) << "read of " << ino << " at " << offset << " never completed";
    if (error != nullptr) *error = result.error();
    if (!done || !result.ok()) return std::string();
    out.resize(*result);
    return out;
  }

  // Writes a file's bytes straight onto the in-memory disks, beneath any wrapper (untimed), as
  // if it had been written long ago.
  void WriteUnderneath(uint64_t ino, const std::string& data) {
    std::vector<stripe::Extent> pieces;
    io->layout().Map(ino, 0, data.size(), &pieces);
    for (const stripe::Extent& p : pieces) {
      stripe::DiskRequest w;
      w.kind = stripe::DiskRequest::Kind::kWrite;
      w.object = ino;
      w.offset = p.object_offset;
      w.length = p.length;
      w.buffer = const_cast<char*>(data.data()) + p.file_offset;  // a write only reads it
      w.done = [](Result<uint64_t> r) { EXPECT_TRUE(r.ok()); };
      mems[p.disk]->Submit(std::move(w));
    }
  }

  // Requests the disks have seen (reads and writes).
  uint64_t DiskRequests() const {
    uint64_t n = 0;
    for (auto* m : mems) n += m->requests();
    return n;
  }
  void HoldAll(bool on) {
    for (HeldDisk* h : held) h->Hold(on);
  }
  size_t HeldCount() const {
    size_t n = 0;
    for (HeldDisk* h : held) n += h->held();
    return n;
  }
  void ReleaseAll() {
    for (HeldDisk* h : held) h->Release();
  }

  std::string Read(const ReadContext& ctx, uint64_t ino, uint64_t offset, size_t length,
                   uint64_t file_size, int* error = nullptr) {
    std::string out(length, '\x5a');
    Result<size_t> n = cache->Read(ctx, ino, offset, length, file_size, out.data());
    if (error != nullptr) *error = n.error();
    if (!n.ok()) return std::string();
    out.resize(*n);
    return out;
  }

  CpuFakeClock clock;
  std::vector<tipfs::testing::MemDisk*> mems;
  std::vector<HeldDisk*> held;
  std::vector<stripe::FaultyDisk*> faulty;
  std::unique_ptr<stripe::Volume> volume;
  std::unique_ptr<stripe::StripedIo> io;
  std::unique_ptr<FileCache> cache;
};

// A cache of `blocks` blocks of `block_size` bytes, read-ahead off (tests turn it on), the
// manager's decisions inline (deterministic on the rig's FakeClock; tests of the manager thread
// turn it on).
inline CacheOptions TestOptions(uint64_t blocks, uint32_t block_size = 4096) {
  CacheOptions o;
  o.block_size = block_size;
  o.capacity_bytes = blocks * block_size;
  o.readahead = false;
  o.manager_thread = false;
  return o;
}

inline std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

}  // namespace tipfs::cache::testing
