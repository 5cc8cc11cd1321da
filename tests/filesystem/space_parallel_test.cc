// st_blocks asks the disks at once: every disk of a file, and every file of one call (a
// READDIRPLUS reply), are asked before any answers, so on disks across a network a lookup costs
// one round trip, not one per disk and entry. A disk here parks its Stat answers until the test
// releases them and counts how many were asked before the first answer.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "stripe/disk_wrapper.h"
#include "tests/support/volume_rig.h"
#include "util/mutex.h"

namespace tipfs::testing {
namespace {

using fusefs::Caller;
using meta::kRootIno;

// Holds the answers of every StatAsync of the disks it gates while closed.
class StatGate {
 public:
  void Close() {
    MutexLock lock(&mu_);
    closed_ = true;
  }
  // Answers at once while open; parks the answer while closed.
  void Answer(std::function<void()> answer) {
    {
      MutexLock lock(&mu_);
      if (closed_) {
        parked_.push_back(std::move(answer));
        changed_.SignalAll();
        return;
      }
    }
    answer();
  }
  // How many answers wait, once `n` do or after 10 s (a caller that asks one disk at a time
  // never gets there).
  size_t WaitForParked(size_t n) {
    MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (parked_.size() < n && changed_.WaitUntil(&mu_, deadline)) {
    }
    return parked_.size();
  }
  // Opens the gate and gives the parked answers.
  void Open() {
    std::vector<std::function<void()>> parked;
    {
      MutexLock lock(&mu_);
      closed_ = false;
      parked.swap(parked_);
    }
    for (auto& answer : parked) answer();
  }

 private:
  Mutex mu_;
  CondVar changed_;
  bool closed_ GUARDED_BY(mu_) = false;
  std::vector<std::function<void()>> parked_ GUARDED_BY(mu_);
};

class GatedStatDisk : public stripe::DiskWrapper {
 public:
  GatedStatDisk(std::unique_ptr<stripe::Disk> inner, StatGate* gate)
      : DiskWrapper(std::move(inner)), gate_(gate) {}
  void StatAsync(stripe::ObjectId object, StatDone done) override {
    Result<stripe::ObjectInfo> info = inner_->Stat(object);
    gate_->Answer(
        [done = std::move(done), info = std::move(info)]() mutable { done(std::move(info)); });
  }

 private:
  StatGate* const gate_;
};

TEST(SpaceParallelTest, StBlocksAsksEveryDiskOfEveryFileBeforeAnyAnswers) {
  StatGate gate;
  VolumeRig rig(4, 64 * 1024);
  ASSERT_TRUE(rig.Open([&gate](MemDisk* disk, uint32_t) -> std::unique_ptr<stripe::Disk> {
                   return std::make_unique<GatedStatDisk>(std::make_unique<DiskRef>(disk), &gate);
                 })
                  .ok());
  fusefs::FileSystem* fs = rig.fs();
  auto create = [&](const std::string& name, uint64_t length) -> meta::Inode {
    auto opened = fs->Create(Caller{}, kRootIno, name, 0644, O_RDWR);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    if (!opened.ok()) return {};
    const std::string data(length, 'x');
    if (length > 0) {
      EXPECT_TRUE(fs->Write(opened->inode.ino, 0, data.data(), data.size()).ok());
    }
    auto inode = fs->GetAttr(opened->inode.ino);
    EXPECT_TRUE(inode.ok());
    return inode.ok() ? *inode : meta::Inode{};
  };
  const meta::Inode wide = create("wide", 256 * 1024);  // four units: all four disks
  const meta::Inode small = create("small", 4096);
  const meta::Inode other = create("other", 100);
  const meta::Inode empty = create("empty", 0);  // asks no disk
  const std::vector<const meta::Inode*> inodes = {&wide, &small, &other, &empty};
  std::vector<uint64_t> expected;
  for (const meta::Inode* inode : inodes) expected.push_back(fs->AllocatedBlocks(*inode));
  EXPECT_EQ(expected, (std::vector<uint64_t>{512, 8, 8, 0}));

  gate.Close();
  std::vector<uint64_t> blocks;
  std::thread asker([&] { blocks = fs->AllocatedBlocks(inodes); });
  const size_t asked_at_once = gate.WaitForParked(6);
  gate.Open();
  asker.join();
  EXPECT_EQ(asked_at_once, 6u);  // 4 disks of "wide", 1 each for "small" and "other"
  EXPECT_EQ(blocks, expected);
}

}  // namespace
}  // namespace tipfs::testing
