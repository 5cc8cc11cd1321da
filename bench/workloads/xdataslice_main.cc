// tipfs-bench-xdataslice: the XDataSlice workload of Chang & Gibson (OSDI 1999) and Patterson
// et al. (SOSP 1995): slices through a 3-D volume of floats (volume_format.h) at random
// orientations (fixed seed) or at given planes. For each slice the program works out which
// bricks the slice's samples need (trilinear interpolation), reads them with pread() as runs of
// consecutive bricks in file order, then samples the slice and prints its statistics (count,
// min, max, mean, a 16-bin histogram, a digest of the sampled values) to stdout.
//
// Variants (one source): original reads each slice's runs with no hints. manual computes the
// slice's runs first (it must anyway) and discloses them all before its first read, in read
// order (TIPFS_IOC_HINT_FD, up to 1020 segments per call), as the paper's hinted XDataSlice
// disclosed each slice before fetching it. Output is byte-identical; stderr differs.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/workloads/bench_common.h"
#include "bench/workloads/hint_window.h"
#include "bench/workloads/volume_format.h"

namespace tipfs::bench {
namespace {

using tvol::SampleCell;
using tvol::SlicePlane;
using tvol::Vec3;

constexpr char kProgram[] = "tipfs-bench-xdataslice";
constexpr int kHistogramBins = 16;

struct Options {
  Variant variant = Variant::kOriginal;
  std::string volume;
  uint32_t slices = 32;  // 32 slices of 512^3 read 362 MB, the paper's 370.7 MB
  uint64_t seed = 1;
  uint64_t max_run_bytes = 128 * 1024;
  std::vector<std::string> explicit_slices;  // "cx,cy,cz,nx,ny,nz"
};

Result<SlicePlane> ParseSlice(const std::string& spec, uint32_t dim) {
  std::vector<double> v;
  std::stringstream in(spec);
  std::string part;
  while (std::getline(in, part, ',')) {
    char* end = nullptr;
    double d = std::strtod(part.c_str(), &end);
    if (end == part.c_str() || *end != '\0' || !std::isfinite(d)) break;
    v.push_back(d);
  }
  if (v.size() != 6 || (v[3] == 0 && v[4] == 0 && v[5] == 0)) {
    return Status::InvalidArgument("bad --slice '" + spec + "': want cx,cy,cz,nx,ny,nz");
  }
  return SlicePlane::Make({v[0], v[1], v[2]}, {v[3], v[4], v[5]}, dim);
}

std::vector<SlicePlane> RandomSlices(uint32_t count, uint64_t seed, uint32_t dim) {
  Rng rng(DeriveSeed(seed, 0x736c696365ull));
  std::vector<SlicePlane> planes;
  while (planes.size() < count) {
    Vec3 normal = {rng.Normal(), rng.Normal(), rng.Normal()};
    double length =
        std::sqrt(normal[0] * normal[0] + normal[1] * normal[1] + normal[2] * normal[2]);
    Vec3 center;
    for (double& c : center) c = dim * (0.25 + 0.5 * rng.Uniform01());
    if (length < 1e-6) continue;
    planes.push_back(SlicePlane::Make(center, normal, dim));
  }
  return planes;
}

// A run of consecutive bricks, read with one pread().
struct BrickRun {
  uint64_t first_brick;
  uint64_t bricks;
};

class Slicer {
 public:
  Slicer(int fd, const tvol::Header& header, uint64_t max_run_bytes)
      : fd_(fd),
        header_(header),
        max_run_bricks_(std::max<uint64_t>(1, max_run_bytes / header.brick_bytes())),
        brick_voxels_(uint64_t{header.brick} * header.brick * header.brick),
        marked_in_slice_(header.brick_count(), 0),
        slot_(header.brick_count(), 0) {}

  // The bricks `plane` needs, as runs in file order. Pure computation: no I/O.
  std::vector<BrickRun> PlanReads(const SlicePlane& plane) {
    ++slice_number_;
    bricks_.clear();
    ForEachSample(plane, [&](const SampleCell& cell) {
      for (uint32_t z : {cell.lo[2], cell.hi[2]}) {
        for (uint32_t y : {cell.lo[1], cell.hi[1]}) {
          for (uint32_t x : {cell.lo[0], cell.hi[0]}) {
            uint64_t brick = tvol::BrickOf(header_, x, y, z);
            if (marked_in_slice_[brick] == slice_number_) continue;
            marked_in_slice_[brick] = slice_number_;
            bricks_.push_back(brick);
          }
        }
      }
    });
    std::sort(bricks_.begin(), bricks_.end());
    std::vector<BrickRun> runs;
    for (size_t k = 0; k < bricks_.size(); ++k) {
      slot_[bricks_[k]] = static_cast<uint32_t>(k);
      if (!runs.empty() && runs.back().first_brick + runs.back().bricks == bricks_[k] &&
          runs.back().bricks < max_run_bricks_) {
        ++runs.back().bricks;
      } else {
        runs.push_back(BrickRun{bricks_[k], 1});
      }
    }
    return runs;
  }

  uint64_t RunOffset(const BrickRun& run) const {
    return tvol::BrickOffset(header_, run.first_brick);
  }
  uint64_t RunBytes(const BrickRun& run) const { return run.bricks * header_.brick_bytes(); }

  // Reads the planned runs into the slab; `on_read(bytes)` after each.
  template <typename OnRead>
  Status ReadRuns(const std::vector<BrickRun>& runs, IoCounters* io, OnRead on_read) {
    slab_.resize(bricks_.size() * brick_voxels_);
    float* destination = slab_.data();
    for (const BrickRun& run : runs) {
      TIPFS_RETURN_IF_ERROR(PreadExact(fd_, destination, RunBytes(run), RunOffset(run)));
      ++io->read_calls;
      io->bytes_read += RunBytes(run);
      on_read(RunBytes(run));
      destination += run.bricks * brick_voxels_;
    }
    return Status::OK();
  }

  // Samples the slice from the slab and prints its line; returns the slice's digest.
  uint64_t SampleAndPrint(uint32_t index, const SlicePlane& plane, size_t runs) {
    uint64_t samples = 0;
    double sum = 0;
    float min = std::numeric_limits<float>::max(), max = std::numeric_limits<float>::lowest();
    uint64_t histogram[kHistogramBins] = {};
    const double lo = header_.value_min, span = std::max(1e-30, double{header_.value_max} - lo);
    Hasher digest(index);
    ForEachSample(plane, [&](const SampleCell& cell) {
      float value = Interpolate(cell);
      ++samples;
      sum += value;
      min = std::min(min, value);
      max = std::max(max, value);
      int bin = static_cast<int>((value - lo) / span * kHistogramBins);
      histogram[std::clamp(bin, 0, kHistogramBins - 1)]++;
      digest.Update(&value, sizeof value);
    });
    std::string bins;
    for (int b = 0; b < kHistogramBins; ++b) {
      bins += (b ? "," : "") + std::to_string(histogram[b]);
    }
    std::printf(
        "slice %u center=(%.3f,%.3f,%.3f) normal=(%.5f,%.5f,%.5f) samples=%llu bricks=%zu "
        "runs=%zu min=%.9g max=%.9g mean=%.12g hist=%s digest=%s\n",
        index, plane.center[0], plane.center[1], plane.center[2], plane.normal[0], plane.normal[1],
        plane.normal[2], static_cast<unsigned long long>(samples), bricks_.size(), runs,
        samples ? min : 0.0f, samples ? max : 0.0f,
        samples ? sum / static_cast<double>(samples) : 0.0, bins.c_str(),
        Hex64(digest.Digest()).c_str());
    return digest.Digest();
  }

 private:
  template <typename Fn>
  void ForEachSample(const SlicePlane& plane, Fn fn) const {
    SampleCell cell;
    for (uint32_t j = 0; j < plane.size; ++j) {
      for (uint32_t i = 0; i < plane.size; ++i) {
        if (tvol::LocateSample(plane.Sample(i, j), header_.dim, &cell)) fn(cell);
      }
    }
  }

  float Voxel(uint32_t x, uint32_t y, uint32_t z) const {
    uint64_t brick = tvol::BrickOf(header_, x, y, z);
    return slab_[slot_[brick] * brick_voxels_ + tvol::IndexInBrick(header_, x, y, z)];
  }

  // Trilinear interpolation; on grid points (all fractions 0) it returns the voxel exactly.
  float Interpolate(const SampleCell& c) const {
    const double fx = c.frac[0], fy = c.frac[1], fz = c.frac[2];
    auto lerp = [](double a, double b, double t) { return a * (1 - t) + b * t; };
    auto row = [&](uint32_t y, uint32_t z) {
      return lerp(Voxel(c.lo[0], y, z), Voxel(c.hi[0], y, z), fx);
    };
    double near = lerp(row(c.lo[1], c.lo[2]), row(c.hi[1], c.lo[2]), fy);
    double far = lerp(row(c.lo[1], c.hi[2]), row(c.hi[1], c.hi[2]), fy);
    return static_cast<float>(lerp(near, far, fz));
  }

  int fd_;
  tvol::Header header_;
  uint64_t max_run_bricks_;
  uint64_t brick_voxels_;
  uint32_t slice_number_ = 0;
  std::vector<uint32_t> marked_in_slice_;  // slice number that last marked each brick
  std::vector<uint32_t> slot_;             // brick -> its place in the slab (this slice)
  std::vector<uint64_t> bricks_;           // this slice's bricks, sorted
  std::vector<float> slab_;
};

int Run(const Options& options) {
  RunReport report(kProgram, options.variant);
  int fd = ::open(options.volume.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Fail(kProgram, ErrnoStatus("open " + options.volume));
  struct stat st;
  if (::fstat(fd, &st) != 0) return Fail(kProgram, ErrnoStatus("fstat " + options.volume));
  IoCounters io;
  io.files_opened = 1;
  unsigned char header_bytes[tvol::kHeaderBytes];
  Status status = PreadExact(fd, header_bytes, sizeof header_bytes, 0);
  if (!status.ok()) return Fail(kProgram, status.WithContext(options.volume));
  ++io.read_calls;
  io.bytes_read += sizeof header_bytes;
  Result<tvol::Header> header = tvol::DecodeHeader(header_bytes, static_cast<uint64_t>(st.st_size));
  if (!header.ok()) return Fail(kProgram, header.status().WithContext(options.volume));

  std::vector<SlicePlane> planes;
  if (!options.explicit_slices.empty()) {
    for (const std::string& spec : options.explicit_slices) {
      Result<SlicePlane> plane = ParseSlice(spec, header->dim);
      if (!plane.ok()) return Fail(kProgram, plane.status());
      planes.push_back(*plane);
    }
  } else {
    planes = RandomSlices(options.slices, options.seed, header->dim);
  }

  std::optional<HintWindow> window;
  if (options.variant == Variant::kManual) window.emplace(kProgram, fd);
  Slicer slicer(fd, *header, options.max_run_bytes);
  Hasher digest(options.seed);
  uint64_t slice_bytes = 0;
  for (uint32_t s = 0; s < planes.size(); ++s) {
    std::vector<BrickRun> runs = slicer.PlanReads(planes[s]);
    if (window) {
      for (const BrickRun& run : runs)
        window->AddFd(fd, slicer.RunOffset(run), slicer.RunBytes(run));
      window->Disclose();
    }
    uint64_t before = io.bytes_read;
    status = slicer.ReadRuns(runs, &io, [&](uint64_t bytes) {
      if (window) window->Consumed(bytes);
    });
    if (!status.ok()) return Fail(kProgram, status.WithContext(options.volume));
    slice_bytes += io.bytes_read - before;
    digest.UpdateU64(slicer.SampleAndPrint(s, planes[s], runs.size()));
  }
  std::printf("xdataslice: dim=%u brick=%u slices=%zu bytes=%llu digest=%s\n", header->dim,
              header->brick, planes.size(), static_cast<unsigned long long>(slice_bytes),
              Hex64(digest.Digest()).c_str());
  ::close(fd);
  return FinishRun(kProgram, report, io, window ? window->Summary() : "");
}

}  // namespace
}  // namespace tipfs::bench

int main(int argc, char** argv) {
  using namespace tipfs::bench;
  Options options;
  CLI::App app{
      "XDataSlice-like slicing of a 3-D volume (tipfs benchmark workload).\n"
      "Prints per-slice statistics; timing goes to stderr."};
  AddVariantOption(app, &options.variant);
  app.add_option("--slices", options.slices, "random slices")->capture_default_str();
  app.add_option("--seed", options.seed, "seed of the slice orientations")->capture_default_str();
  app.add_option("--slice", options.explicit_slices,
                 "a slice cx,cy,cz,nx,ny,nz (repeatable; replaces the random ones)");
  AddSizeOption(app, "--max-run", &options.max_run_bytes,
                "longest run of consecutive bricks read by one pread (default 128K)");
  app.add_option("volume", options.volume, "the TVOL file (DIR/volume.tvol)")->required();
  int exit_code = ParseCommandLine(app, argc, argv);
  if (exit_code >= 0) return exit_code;
  return Run(options);
}
