// Many readers and writers at once on the whole stack without a mount: FileSystem over a real
// volume (PosixDisks, one io_uring and ring thread per disk), the metadata store with its inode
// cache and write-back, and a block cache small enough to evict. Run in the TSan build too
// (label sanitize): the reads that complete on ring threads, the shared buffers FUSE replies
// from, the sharded inode tables and the attributes written back meet here.
//
// Writes are whole 4 KiB pages whose every byte says (page, generation), so a reader can tell a
// page some write left from bytes no write left: every page a read returns must be all zeros
// (never written) or one write's page, and never older than the last write of that page that had
// returned when the read started (a stale cached block would be whole, but old). At the end each
// page holds its last generation, on the disks too (read back after a fresh cache).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/file_cache.h"
#include "fusefs/filesystem.h"
#include "meta/meta_store.h"
#include "stripe/mkfs.h"
#include "stripe/striped_io.h"
#include "stripe/volume.h"
#include "tests/support/temp_dir.h"
#include "util/clock.h"
#include "util/mutex.h"

namespace tipfs::testing {
namespace {

using fusefs::Caller;
using meta::kRootIno;

constexpr uint32_t kDisks = 4;
constexpr uint32_t kStripeUnit = 64 * 1024;
constexpr size_t kPage = 4096;

// The byte every position of `page` holds after write `generation` (never 0: zeros are holes).
char PageByte(uint64_t page, uint32_t generation) {
  return static_cast<char>(1 + (page * 31 + generation * 7) % 251);
}

class ConcurrentIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stripe::MkfsOptions mkfs;
    for (uint32_t i = 0; i < kDisks; ++i) {
      const std::string disk = dir_.Sub("disk" + std::to_string(i));
      std::filesystem::create_directories(disk);
      mkfs.disks.push_back(disk);
    }
    mkfs.stripe_unit = kStripeUnit;
    auto label = stripe::Mkfs(mkfs);
    ASSERT_TRUE(label.ok()) << label.status().ToString();
    auto store = meta::MetaStore::Create(stripe::MetaPath(*label), label->volume_uuid, 0, 0);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store->reset();
    Boot();
  }

  // (Re)opens volume, store, cache and file system: a fresh, empty block cache.
  void Boot() {
    fs_.reset();
    cache_.reset();
    meta_.reset();
    io_.reset();
    volume_.reset();
    stripe::OpenOptions options;
    options.ring_entries = 32;  // small: requests queue for ring slots too
    // Aligned reads bypass the backing page cache (where the file system takes O_DIRECT) while
    // writes stay buffered: the kernel must keep the two coherent under all this traffic.
    options.direct_io = true;
    auto volume = stripe::Volume::Open(mkfs_disk0(), options);
    if (!volume.ok() && volume.error() == ENOSYS) GTEST_SKIP() << "no io_uring";
    ASSERT_TRUE(volume.ok()) << volume.status().ToString();
    volume_ = std::move(*volume);
    auto store =
        meta::MetaStore::Open(stripe::MetaPath(volume_->label()), volume_->label().volume_uuid);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    meta_ = std::move(*store);
    io_ = std::make_unique<stripe::StripedIo>(volume_.get());
    cache::CacheOptions options_cache;
    options_cache.capacity_bytes = 16 * kStripeUnit;  // far less than the files: evictions
    cache_ = std::make_unique<cache::FileCache>(io_.get(), &clock_, options_cache);
    fs_ = std::make_unique<fusefs::FileSystem>(volume_.get(), meta_.get(), cache_.get());
  }
  std::string mkfs_disk0() const { return dir_.Sub("disk0"); }

  uint64_t Create(const std::string& name) {
    auto opened = fs_->Create(Caller{}, kRootIno, name, 0644, O_RDWR);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return opened.ok() ? opened->inode.ino : 0;
  }
  void WritePage(uint64_t ino, uint64_t page, uint32_t generation) {
    const std::string bytes(kPage, PageByte(page, generation));
    auto n = fs_->Write(ino, page * kPage, bytes.data(), bytes.size());
    ASSERT_TRUE(n.ok()) << n.status().ToString();
  }
  // The generation whose write leaves `byte` in `page`: 0 for a hole, -1 for a byte no write of
  // generations 1..250 leaves (PageByte differs for each of them: 7 is invertible modulo 251).
  static int GenerationOf(uint64_t page, char byte) {
    if (byte == 0) return 0;
    for (uint32_t g = 1; g < 251; ++g) {
      if (PageByte(page, g) == byte) return static_cast<int>(g);
    }
    return -1;
  }
  // Checks that each page in [offset, offset + data.size()) is at least the generation `at_least`
  // gives for it (the pages' numbers index it).
  static ::testing::AssertionResult NoPageOlderThan(uint64_t offset, const std::string& data,
                                                    const std::vector<uint32_t>& at_least) {
    for (size_t at = 0; at < data.size(); at += kPage) {
      const uint64_t page = (offset + at) / kPage;
      const int generation = GenerationOf(page, data[at]);
      if (generation < static_cast<int>(at_least[page])) {
        return ::testing::AssertionFailure()
               << "page " << page << " read as generation " << generation << " after write "
               << at_least[page] << " of it had returned";
      }
    }
    return ::testing::AssertionSuccess();
  }
  // Checks that each whole page in [offset, offset + data.size()) is a hole or one write's page.
  static ::testing::AssertionResult PagesAreWhole(uint64_t offset, const std::string& data) {
    for (size_t at = 0; at < data.size(); at += kPage) {
      const uint64_t page = (offset + at) / kPage;
      const char first = data[at];
      const size_t n = std::min(kPage, data.size() - at);
      bool known = first == 0;
      for (uint32_t g = 0; !known && g < 1000; ++g) known = first == PageByte(page, g);
      if (!known) return ::testing::AssertionFailure() << "page " << page << ": unknown byte";
      for (size_t i = 1; i < n; ++i) {
        if (data[at + i] != first) {
          return ::testing::AssertionFailure()
                 << "page " << page << " torn at byte " << i << " (a mix of writes)";
        }
      }
    }
    return ::testing::AssertionSuccess();
  }

  // `writers` threads rewrite the `pages` pages of `ino` generation by generation, 1 to
  // `generations` (writer w the pages p with p % writers == w), while `readers` threads read
  // ranges at random, half of them through the FUSE path (ReadAsync), until the writers are done
  // and 200 reads were made. Every page a read returns must be whole and not older than the last
  // write of it that had returned when the read started. With `paced`, each write waits until
  // `readers` reads ended after the one before it: reads then also run while no write does, when
  // the blocks they fetch are cached. Returns the reads made by ReadAsync.
  uint64_t ReadWhileWriting(uint64_t ino, uint64_t pages, int writers, int readers,
                            uint32_t generations, bool paced = false) {
    // The last generation of each page whose write has returned.
    std::vector<std::atomic<uint32_t>> written(pages);
    std::vector<std::thread> threads;
    std::atomic<int> writers_left{writers};
    std::atomic<uint64_t> reads{0};
    std::atomic<uint64_t> async_reads{0};
    std::atomic<int> readers_left{readers};  // a reader that failed an ASSERT leaves early
    for (int w = 0; w < writers; ++w) {
      threads.emplace_back([&, w] {
        for (uint32_t g = 1; g <= generations; ++g) {
          for (uint64_t p = w; p < pages; p += writers) {
            WritePage(ino, p, g);
            written[p].store(g, std::memory_order_release);
            const uint64_t before = reads.load();
            while (paced && readers_left.load() > 0 && reads.load() < before + readers) {
              std::this_thread::yield();
            }
          }
        }
        --writers_left;
      });
    }
    for (int r = 0; r < readers; ++r) {
      threads.emplace_back([&, r] {
        struct Leaving {
          std::atomic<int>* left;
          ~Leaving() { --*left; }
        } leaving{&readers_left};
        std::mt19937_64 rng(r);
        while (writers_left.load() > 0 || reads.load() < 200) {
          const uint64_t page = rng() % pages;
          const size_t length = kPage * (1 + rng() % 40);  // up to 160 KiB: several blocks
          const cache::ReadContext context{static_cast<uint64_t>(100 + r),
                                           static_cast<uint32_t>(100 + r)};
          // What the read must not predate: the writes that returned before it starts.
          std::vector<uint32_t> at_least(pages);
          for (uint64_t p = 0; p < pages; ++p) {
            at_least[p] = written[p].load(std::memory_order_acquire);
          }
          if (rng() % 2 == 0) {
            std::string out(length, '\0');
            auto n = fs_->Read(context, ino, page * kPage, length, out.data());
            ASSERT_TRUE(n.ok()) << n.status().ToString();
            out.resize(*n);
            ASSERT_TRUE(PagesAreWhole(page * kPage, out));
            ASSERT_TRUE(NoPageOlderThan(page * kPage, out, at_least));
          } else {
            // The FUSE path: a reply from references to the cache's buffers, maybe on a ring
            // thread.
            Mutex mu;
            CondVar done_cv;
            bool done = false;
            std::string out;
            fs_->ReadAsync(context, ino, page * kPage, length, [&](Result<cache::ReadData> data) {
              std::string copy;
              if (data.ok()) {
                copy.resize(data->bytes);
                data->CopyTo(copy.data());
              } else {
                ADD_FAILURE() << data.status().ToString();
              }
              MutexLock lock(&mu);
              out = std::move(copy);
              done = true;
              done_cv.Signal();
            });
            MutexLock lock(&mu);
            while (!done) done_cv.Wait(&mu);
            ASSERT_TRUE(PagesAreWhole(page * kPage, out));
            ASSERT_TRUE(NoPageOlderThan(page * kPage, out, at_least));
            ++async_reads;
          }
          ++reads;
        }
      });
    }
    for (std::thread& t : threads) t.join();
    return async_reads.load();
  }

  TempDir dir_{"tipfs-concurrent-io"};
  SystemClock clock_;
  std::unique_ptr<stripe::Volume> volume_;
  std::unique_ptr<meta::MetaStore> meta_;
  std::unique_ptr<stripe::StripedIo> io_;
  std::unique_ptr<cache::FileCache> cache_;
  std::unique_ptr<fusefs::FileSystem> fs_;
};

TEST_F(ConcurrentIoTest, ReadersAndWritersOfOneFileSeeOnlyWholeWrites) {
  constexpr uint64_t kPages = 256;  // 1 MiB: 16 stripe units over 4 disks
  constexpr uint32_t kGenerations = 12;
  const uint64_t ino = Create("shared");
  EXPECT_GT(ReadWhileWriting(ino, kPages, /*writers=*/4, /*readers=*/4, kGenerations), 0u);
  auto attr = fs_->GetAttr(ino);
  ASSERT_TRUE(attr.ok());
  EXPECT_EQ(attr->size, kPages * kPage);
  ASSERT_TRUE(fs_->Release(ino).ok());
  // The disks hold the last generation of every page (read through a fresh cache).
  Boot();
  std::string all(kPages * kPage, '\0');
  auto n = fs_->Read(cache::ReadContext{}, ino, 0, all.size(), all.data());
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, all.size());
  for (uint64_t p = 0; p < kPages; ++p) {
    ASSERT_EQ(all[p * kPage], PageByte(p, kGenerations)) << "page " << p;
  }
  // That read-back went around the backing page cache where the file system allows it.
  for (stripe::Disk* disk : volume_->disks()) {
    const stripe::BackingIoInfo info = disk->BackingIo();
    if (info.mode.rfind("direct", 0) == 0) {
      EXPECT_GT(info.direct_reads, 0u) << disk->name();
    }
  }
}

// One writer that lets reads run between its writes: blocks fetched then are cached, and the
// next write must patch (or drop) them. A read that starts after that write returned never gets
// the cached bytes from before it.
TEST_F(ConcurrentIoTest, AReadAfterAWriteReturnedNeverSeesAnOlderPage) {
  const uint64_t ino = Create("one-writer");
  ReadWhileWriting(ino, /*pages=*/64, /*writers=*/1, /*readers=*/4, /*generations=*/6,
                   /*paced=*/true);
  // The case this guards happened: writes met cached blocks.
  EXPECT_GT(cache_->Stats().write_blocks_updated, 0u);
  ASSERT_TRUE(fs_->Release(ino).ok());
}

TEST_F(ConcurrentIoTest, ManyFilesWrittenReadTruncatedAndRemovedAtOnce) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 6;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      for (int round = 0; round < kRounds; ++round) {
        const std::string name = "f" + std::to_string(t) + "-" + std::to_string(round);
        const uint64_t ino = Create(name);
        const uint64_t pages = 1 + rng() % 80;
        for (uint64_t p = 0; p < pages; ++p) WritePage(ino, p, round + 1);
        std::string out(pages * kPage, '\0');
        auto n = fs_->Read(cache::ReadContext{static_cast<uint64_t>(t + 1)}, ino, 0, out.size(),
                           out.data());
        ASSERT_TRUE(n.ok()) << n.status().ToString();
        ASSERT_EQ(*n, out.size());
        for (uint64_t p = 0; p < pages; ++p) {
          ASSERT_EQ(out[p * kPage], PageByte(p, round + 1)) << name << " page " << p;
          ASSERT_TRUE(PagesAreWhole(0, out));
        }
        meta::AttrChange cut;
        cut.size = (pages / 2) * kPage;
        cut.now = meta::Time::Now();
        auto resized = fs_->SetAttr(ino, cut);
        ASSERT_TRUE(resized.ok()) << resized.status().ToString();
        EXPECT_EQ(resized->size, (pages / 2) * kPage);
        ASSERT_TRUE(fs_->Release(ino).ok());
        if (round % 2 == 0) {
          ASSERT_TRUE(fs_->Unlink(kRootIno, name).ok());
          fs_->Forget(ino, 1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // The survivors, read through a fresh cache: their cut size and bytes.
  Boot();
  auto entries = fs_->ListDir(kRootIno);
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(entries->size(), static_cast<size_t>(kThreads * kRounds / 2));
  for (const meta::DirEntry& e : *entries) {
    auto inode = fs_->GetAttr(e.ino);
    ASSERT_TRUE(inode.ok());
    const uint32_t generation =
        static_cast<uint32_t>(std::stoi(e.name.substr(e.name.find('-') + 1))) + 1;
    std::string out(inode->size, '\0');
    auto n = fs_->Read(cache::ReadContext{}, e.ino, 0, out.size(), out.data());
    ASSERT_TRUE(n.ok());
    ASSERT_EQ(*n, out.size());
    for (uint64_t p = 0; p * kPage < out.size(); ++p) {
      ASSERT_EQ(out[p * kPage], PageByte(p, generation)) << e.name << " page " << p;
    }
  }
}

}  // namespace
}  // namespace tipfs::testing
