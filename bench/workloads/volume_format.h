// TVOL: the 3-D volume read by tipfs-bench-xdataslice and written by tipfs-bench-gen, plus the
// slice geometry both the workload and the tests use.
//
// One file: a 4096-byte header, then dim^3 little-endian float32 values stored in bricks of
// brick^3 voxels. Bricks are laid out x-fastest (brick index (bz * nb + by) * nb + bx, with
// nb = dim / brick), and voxels inside a brick x-fastest too. The papers do not spell out
// XDataSlice's file layout; bricks are the usual layout for slicing volumes larger than memory,
// and they give what the benchmark needs: a slice at a random orientation reads exactly the
// bricks it cuts, as scattered runs whose positions the program computes from the slice
// geometry alone (no data dependency, hence hintable and speculable). The generator's default
// 8^3 bricks (2 KiB) make runs of about 7.5 KiB: reading is dominated by positioning, as the
// paper's XDataSlice was (its 370.7 MB took 324.6 s on HP C2247 disks; by our estimate, reads
// of about 25 KB issued one at a time); 32 slices through 512^3 read 362 MB. See
// bench/workloads/README.md for what 16^3 bricks change. Plain data and pure functions; safe from
// any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "util/status.h"

namespace tipfs::bench::tvol {

inline constexpr char kMagic[8] = {'T', 'I', 'P', 'V', 'O', 'L', '1', '\0'};
inline constexpr uint64_t kHeaderBytes = 4096;

struct Header {
  uint32_t dim = 0;    // voxels per axis
  uint32_t brick = 0;  // voxels per brick axis; divides dim
  uint64_t seed = 0;
  float value_min = 0;  // over the whole volume, written by the generator
  float value_max = 0;

  uint32_t bricks_per_axis() const { return dim / brick; }
  uint64_t brick_bytes() const { return uint64_t{brick} * brick * brick * sizeof(float); }
  uint64_t brick_count() const {
    uint64_t nb = bricks_per_axis();
    return nb * nb * nb;
  }
  uint64_t file_size() const { return kHeaderBytes + brick_count() * brick_bytes(); }
};

void EncodeHeader(const Header& header, unsigned char* out);  // kHeaderBytes
Result<Header> DecodeHeader(const unsigned char* in, uint64_t file_size);

// Brick index of a voxel, and the voxel's position inside its brick.
inline uint64_t BrickOf(const Header& h, uint32_t x, uint32_t y, uint32_t z) {
  uint64_t nb = h.bricks_per_axis();
  return (uint64_t{z / h.brick} * nb + y / h.brick) * nb + x / h.brick;
}
inline uint64_t IndexInBrick(const Header& h, uint32_t x, uint32_t y, uint32_t z) {
  uint64_t b = h.brick;
  return (uint64_t{z % h.brick} * b + y % h.brick) * b + x % h.brick;
}
inline uint64_t BrickOffset(const Header& h, uint64_t brick_index) {
  return kHeaderBytes + brick_index * h.brick_bytes();
}

// The generator's field: smooth structure (waves and a few Gaussian blobs, the kind of data
// XDataSlice visualised) plus a little per-voxel noise. Deterministic in (seed, x, y, z). Every
// term is separable, so Value() is a handful of table lookups: 512^3 voxels take seconds.
class Field {
 public:
  Field(uint64_t seed, uint32_t dim);
  float Value(uint32_t x, uint32_t y, uint32_t z) const;

 private:
  static constexpr int kBlobs = 4;
  uint64_t seed_;
  uint32_t dim_;
  std::vector<double> wave_x_, wave_y_, wave_z_;
  std::vector<double> blob_[kBlobs][3];  // per blob, per axis: exp(-(t - c)^2 / (2 s^2))
  double blob_weight_[kBlobs];
};

using Vec3 = std::array<double, 3>;

// A square slice of `size` x `size` samples, one voxel apart, centred on `center`, in the plane
// with unit normal `normal`. Sample (i, j) is center + (i - size/2) u + (j - size/2) v, where u is
// the coordinate axis least aligned with the normal, made orthogonal to it, and v = normal x u.
// For normal (0,0,1) that is u = (1,0,0), v = (0,1,0): an axis-aligned slice samples voxels.
struct SlicePlane {
  Vec3 center;
  Vec3 normal;
  Vec3 u;
  Vec3 v;
  uint32_t size;

  static SlicePlane Make(const Vec3& center, const Vec3& normal, uint32_t size);
  Vec3 Sample(uint32_t i, uint32_t j) const;
};

// Trilinear interpolation needs voxels floor(p) and, when p is not on the grid, floor(p) + 1 on
// each axis. A sample is inside when 0 <= p <= dim - 1 on every axis.
struct SampleCell {
  uint32_t lo[3];
  uint32_t hi[3];  // lo, or lo + 1 when the fraction is not zero
  double frac[3];
};
bool LocateSample(const Vec3& p, uint32_t dim, SampleCell* cell);

}  // namespace tipfs::bench::tvol
