#include "bench/workloads/volume_format.h"

#include <cmath>
#include <cstring>

#include "bench/workloads/bench_common.h"

namespace tipfs::bench::tvol {

// Header: magic[8] dim:u32 brick:u32 data_offset:u64 seed:u64 value_min:f32 value_max:f32,
// zero to kHeaderBytes.
void EncodeHeader(const Header& header, unsigned char* out) {
  std::memset(out, 0, kHeaderBytes);
  std::memcpy(out, kMagic, 8);
  std::memcpy(out + 8, &header.dim, 4);
  std::memcpy(out + 12, &header.brick, 4);
  uint64_t data_offset = kHeaderBytes;
  std::memcpy(out + 16, &data_offset, 8);
  std::memcpy(out + 24, &header.seed, 8);
  std::memcpy(out + 32, &header.value_min, 4);
  std::memcpy(out + 36, &header.value_max, 4);
}

Result<Header> DecodeHeader(const unsigned char* in, uint64_t file_size) {
  if (std::memcmp(in, kMagic, 8) != 0) return Status::Corruption("not a TVOL volume");
  Header header;
  uint64_t data_offset;
  std::memcpy(&header.dim, in + 8, 4);
  std::memcpy(&header.brick, in + 12, 4);
  std::memcpy(&data_offset, in + 16, 8);
  std::memcpy(&header.seed, in + 24, 8);
  std::memcpy(&header.value_min, in + 32, 4);
  std::memcpy(&header.value_max, in + 36, 4);
  if (data_offset != kHeaderBytes) return Status::Corruption("unsupported TVOL data offset");
  if (header.dim == 0 || header.dim > 8192 || header.brick == 0 || header.dim % header.brick != 0) {
    return Status::Corruption("bad TVOL geometry");
  }
  if (header.file_size() != file_size) {
    return Status::Corruption("TVOL file is " + std::to_string(file_size) + " bytes, expected " +
                              std::to_string(header.file_size()));
  }
  return header;
}

Field::Field(uint64_t seed, uint32_t dim) : seed_(seed), dim_(dim) {
  Rng rng(DeriveSeed(seed, 0x766f6cull));
  auto axis_table = [dim](auto fn) {
    std::vector<double> table(dim);
    for (uint32_t t = 0; t < dim; ++t) table[t] = fn(static_cast<double>(t) / dim);
    return table;
  };
  double fx = 1 + rng.Below(4), fy = 1 + rng.Below(4), fz = 1 + rng.Below(3);
  double phase = rng.Uniform01() * 2 * M_PI;
  wave_x_ = axis_table([&](double t) { return std::sin(2 * M_PI * fx * t + phase); });
  wave_y_ = axis_table([&](double t) { return std::cos(2 * M_PI * fy * t); });
  wave_z_ = axis_table([&](double t) { return 0.5 * std::sin(2 * M_PI * fz * t); });
  for (int b = 0; b < kBlobs; ++b) {
    double sigma = 0.05 + 0.15 * rng.Uniform01();
    for (int axis = 0; axis < 3; ++axis) {
      double center = 0.15 + 0.7 * rng.Uniform01();
      blob_[b][axis] = axis_table([&](double t) {
        double d = (t - center) / sigma;
        return std::exp(-0.5 * d * d);
      });
    }
    blob_weight_[b] = (rng.Below(2) == 0 ? -1.0 : 1.0) * (0.5 + rng.Uniform01());
  }
}

float Field::Value(uint32_t x, uint32_t y, uint32_t z) const {
  double value = wave_x_[x] * wave_y_[y] + wave_z_[z];
  for (int b = 0; b < kBlobs; ++b) {
    value += blob_weight_[b] * blob_[b][0][x] * blob_[b][1][y] * blob_[b][2][z];
  }
  uint64_t h = Mix64(seed_ ^ ((uint64_t{z} * dim_ + y) * dim_ + x));
  value += 0.05 * (static_cast<double>(h >> 11) * 0x1.0p-53 * 2 - 1);
  return static_cast<float>(value);
}

static Vec3 Scale(const Vec3& a, double s) { return {a[0] * s, a[1] * s, a[2] * s}; }
static double Dot(const Vec3& a, const Vec3& b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
static Vec3 Cross(const Vec3& a, const Vec3& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
static Vec3 Normalized(const Vec3& a) { return Scale(a, 1.0 / std::sqrt(Dot(a, a))); }

SlicePlane SlicePlane::Make(const Vec3& center, const Vec3& normal, uint32_t size) {
  SlicePlane plane;
  plane.center = center;
  plane.normal = Normalized(normal);
  plane.size = size;
  int least = 0;
  for (int axis = 1; axis < 3; ++axis) {
    if (std::fabs(plane.normal[axis]) < std::fabs(plane.normal[least])) least = axis;
  }
  Vec3 axis_vector = {0, 0, 0};
  axis_vector[least] = 1;
  Vec3 projected = axis_vector;
  double along = Dot(axis_vector, plane.normal);
  for (int k = 0; k < 3; ++k) projected[k] -= along * plane.normal[k];
  plane.u = Normalized(projected);
  plane.v = Cross(plane.normal, plane.u);
  return plane;
}

Vec3 SlicePlane::Sample(uint32_t i, uint32_t j) const {
  // Integer half: sample offsets stay whole numbers, so an axis-aligned plane through a voxel
  // centre samples voxels exactly (no interpolation), which the tests rely on.
  double half = static_cast<double>(size / 2);
  double a = static_cast<double>(i) - half;
  double b = static_cast<double>(j) - half;
  return {center[0] + a * u[0] + b * v[0], center[1] + a * u[1] + b * v[1],
          center[2] + a * u[2] + b * v[2]};
}

bool LocateSample(const Vec3& p, uint32_t dim, SampleCell* cell) {
  const double last = static_cast<double>(dim - 1);
  for (int axis = 0; axis < 3; ++axis) {
    if (!(p[axis] >= 0.0 && p[axis] <= last)) return false;
    double floor_value = std::floor(p[axis]);
    cell->lo[axis] = static_cast<uint32_t>(floor_value);
    cell->frac[axis] = p[axis] - floor_value;
    cell->hi[axis] = cell->frac[axis] > 0 ? cell->lo[axis] + 1 : cell->lo[axis];
  }
  return true;
}

}  // namespace tipfs::bench::tvol
