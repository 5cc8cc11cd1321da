// tipfs-bench-report-overhead: what the reporting of issue 13 costs on the paths it touches, in
// one run, each measured against the same operation without it:
//   getattr   FileSystem::GetAttr alone vs GetAttr + AllocatedBlocks (st_blocks from the objects)
//             over four PosixDisks, for 4 KiB files (one object) and 1 MiB files (four objects)
//   request   Disk::Submit of a 4 KiB read to an in-memory disk that completes inline, bare vs
//             through ActivityRecordingDisk (per-disk statistics), with the timeline off and on
// Prints nanoseconds per operation, medians of --rounds rounds. Usage:
//   tipfs-bench-report-overhead [--files 2000] [--requests 200000] [--rounds 7] [--dir /tmp]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/file_cache.h"
#include "fusefs/filesystem.h"
#include "meta/meta_store.h"
#include "stripe/disk_activity.h"
#include "stripe/mkfs.h"
#include "stripe/striped_io.h"
#include "stripe/volume.h"
#include "tests/support/mem_disk.h"
#include "util/clock.h"
#include "util/timeline.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Nanoseconds per call of `op` (called `count` times per round), median over `rounds`.
double NanosPerCall(int rounds, long count, const std::function<void(long)>& op) {
  std::vector<double> per;
  for (int r = 0; r < rounds; ++r) {
    const auto start = Clock::now();
    for (long i = 0; i < count; ++i) op(i);
    per.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
                  double(count));
  }
  return Median(per);
}

int Usage(const char* message) {
  std::fprintf(stderr,
               "%s\nusage: tipfs-bench-report-overhead [--files N] [--requests N] [--rounds N] "
               "[--dir DIR]\n",
               message);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  long files = 2000, requests = 200000;
  int rounds = 7;
  std::string dir = "/tmp";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      Usage("What st_blocks, per-disk statistics and the timeline cost (ns per operation).");
      return 0;
    }
    if (i + 1 >= argc) return Usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--files") {
      files = std::atol(v);
    } else if (a == "--requests") {
      requests = std::atol(v);
    } else if (a == "--rounds") {
      rounds = std::atoi(v);
    } else if (a == "--dir") {
      dir = v;
    } else {
      return Usage(("unknown option " + a).c_str());
    }
  }
  if (files <= 0 || requests <= 0 || rounds <= 0) return Usage("counts must be positive");
  using namespace tipfs;

  // ---- getattr over a real volume (PosixDisks in a scratch directory) ----
  std::string root = dir + "/tipfs-overhead-XXXXXX";
  if (mkdtemp(root.data()) == nullptr) return Usage("cannot make a scratch directory");
  std::vector<std::string> disks;
  for (int d = 0; d < 4; ++d) {
    disks.push_back(root + "/d" + std::to_string(d));
    std::filesystem::create_directories(disks.back());
  }
  stripe::MkfsOptions mkfs;
  mkfs.disks = disks;
  Result<stripe::Label> label = stripe::Mkfs(mkfs);
  auto store = meta::MetaStore::Create(stripe::MetaPath(*label), label->volume_uuid, 0, 0);
  if (!label.ok() || !store.ok()) return Usage("mkfs of the scratch volume failed");
  store->reset();
  auto volume = stripe::Volume::Open(disks[0], {});
  auto meta = meta::MetaStore::Open(stripe::MetaPath(*label), label->volume_uuid);
  if (!volume.ok() || !meta.ok()) return Usage("cannot open the scratch volume");
  SystemClock clock;
  stripe::StripedIo io(volume->get());
  cache::CacheOptions cache_options;
  cache_options.capacity_bytes = 64 << 20;
  cache::FileCache cache(&io, &clock, cache_options);
  fusefs::FileSystem fs(volume->get(), meta->get(), &cache);
  std::printf("%-58s %10s %10s %8s\n", "operation", "without", "with", "added");
  for (uint64_t size : {uint64_t{4096}, uint64_t{1} << 20}) {
    std::vector<meta::Inode> inodes;
    const std::string data(size, 'x');
    for (long i = 0; i < files; ++i) {
      auto f = fs.Create(fusefs::Caller{}, meta::kRootIno,
                         "s" + std::to_string(size) + "-" + std::to_string(i), 0644, O_RDWR);
      if (!f.ok() || !fs.Write(f->inode.ino, 0, data.data(), data.size()).ok()) {
        return Usage("writing the scratch files failed");
      }
      (void)fs.Release(f->inode.ino);
      inodes.push_back(f->inode);
    }
    uint64_t sink = 0;  // read below, so the calls are not optimized away
    const double plain =
        NanosPerCall(rounds, files, [&](long i) { sink += fs.GetAttr(inodes[i].ino)->size; });
    const double with = NanosPerCall(rounds, files, [&](long i) {
      auto inode = fs.GetAttr(inodes[i].ino);
      sink += fs.AllocatedBlocks(*inode);
    });
    if (sink == 0) std::printf(" ");
    char what[96];
    std::snprintf(what, sizeof(what), "getattr of a %s file (4 disks), + st_blocks",
                  size == 4096 ? "4 KiB" : "1 MiB");
    std::printf("%-58s %8.0f ns %8.0f ns %+7.0f%%\n", what, plain, with,
                100 * (with - plain) / plain);
  }

  // ---- a disk request, bare and measured ----
  std::vector<char> buffer(4096);
  auto submit = [&](stripe::Disk* disk) {
    return [&buffer, disk](long i) {
      stripe::DiskRequest r;
      r.kind = stripe::DiskRequest::Kind::kRead;
      r.object = 1;
      r.offset = static_cast<uint64_t>(i % 256) * 4096;
      r.length = 4096;
      r.buffer = buffer.data();
      r.done = [](Result<uint64_t>) {};
      disk->Submit(std::move(r));
    };
  };
  auto bare = std::make_unique<testing::MemDisk>();
  {
    std::string block(1 << 20, 'y');
    stripe::DiskRequest w;
    w.kind = stripe::DiskRequest::Kind::kWrite;
    w.object = 1;
    w.length = block.size();
    w.buffer = block.data();
    w.done = [](Result<uint64_t>) {};
    bare->Submit(std::move(w));
  }
  testing::MemDisk* inner = bare.get();
  const double plain = NanosPerCall(rounds, requests, submit(inner));
  stripe::DiskActivity activity(1, &clock);
  std::unique_ptr<stripe::Disk> wrapped = activity.Wrap(std::move(bare), 0);
  const double measured = NanosPerCall(rounds, requests, submit(wrapped.get()));
  TimelineRecorder::Global()->Start();
  const double recorded =
      NanosPerCall(rounds, std::min<long>(requests, 100000), submit(wrapped.get()));
  TimelineRecorder::Global()->Stop();
  std::printf("%-58s %8.0f ns %8.0f ns %+7.0f%%\n", "4 KiB read request, + per-disk statistics",
              plain, measured, 100 * (measured - plain) / plain);
  std::printf("%-58s %8.0f ns %8.0f ns %+7.0f%%\n",
              "4 KiB read request, + statistics and a timeline recording", plain, recorded,
              100 * (recorded - plain) / plain);
  std::printf(
      "(in-memory disk completing inline: the wrapper's own cost; a FUSE round trip is "
      "tens of microseconds)\n");
  std::filesystem::remove_all(root);
  return 0;
}
