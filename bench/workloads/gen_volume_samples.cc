// The xdataslice volume and the loader's samples (see generators.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "bench/workloads/bench_common.h"
#include "bench/workloads/generators.h"
#include "bench/workloads/sample_format.h"
#include "bench/workloads/volume_format.h"

namespace tipfs::bench {

Result<GenerateResult> GenerateVolume(const VolumeParams& p, bool force) {
  if (p.dim == 0 || p.brick == 0 || p.dim % p.brick != 0 || p.dim > 4096) {
    return Status::InvalidArgument("--dim must be a multiple of --brick, at most 4096");
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "xdataslice v1 dim=%u brick=%u seed=%llu", p.dim, p.brick,
                static_cast<unsigned long long>(p.seed));
  const std::string params = buf;
  Result<GenerateResult> result =
      StartGeneration(p.dir, "xdataslice", params, "volume.tvol", force);
  if (!result.ok() || result->cached) return result;

  tvol::Header header;
  header.dim = p.dim;
  header.brick = p.brick;
  header.seed = p.seed;
  header.value_min = std::numeric_limits<float>::max();
  header.value_max = std::numeric_limits<float>::lowest();
  const std::string path = p.dir + "/volume.tvol";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("create " + path);
  tvol::Field field(p.seed, p.dim);
  const uint32_t nb = header.bricks_per_axis();
  const uint32_t b = p.brick;
  // One row of bricks along x at a time: contiguous in the file, one write.
  std::vector<float> row(static_cast<size_t>(nb) * b * b * b);
  uint64_t offset = tvol::kHeaderBytes;
  Status st;
  for (uint32_t bz = 0; bz < nb && st.ok(); ++bz) {
    for (uint32_t by = 0; by < nb && st.ok(); ++by) {
      size_t k = 0;
      for (uint32_t bx = 0; bx < nb; ++bx) {
        for (uint32_t z = bz * b; z < (bz + 1) * b; ++z) {
          for (uint32_t y = by * b; y < (by + 1) * b; ++y) {
            for (uint32_t x = bx * b; x < (bx + 1) * b; ++x) {
              float v = field.Value(x, y, z);
              header.value_min = std::min(header.value_min, v);
              header.value_max = std::max(header.value_max, v);
              row[k++] = v;
            }
          }
        }
      }
      st = PwriteFull(fd, row.data(), row.size() * sizeof(float), offset);
      offset += row.size() * sizeof(float);
    }
  }
  if (st.ok()) {
    unsigned char encoded[tvol::kHeaderBytes];
    tvol::EncodeHeader(header, encoded);
    st = PwriteFull(fd, encoded, sizeof encoded, 0);
  }
  if (::close(fd) != 0 && st.ok()) st = ErrnoStatus("close " + path);
  TIPFS_RETURN_IF_ERROR(st.WithContext(path));
  TIPFS_RETURN_IF_ERROR(WriteStamp(p.dir, "xdataslice", params));
  return result;
}

Result<GenerateResult> GenerateSamples(const SampleParams& p, bool force) {
  if (p.samples == 0 || p.classes == 0) {
    return Status::InvalidArgument("--samples and --classes must be at least 1");
  }
  char buf[192];
  std::snprintf(buf, sizeof buf, "loader v1 samples=%llu total=%llu classes=%u seed=%llu",
                static_cast<unsigned long long>(p.samples),
                static_cast<unsigned long long>(p.total_bytes), p.classes,
                static_cast<unsigned long long>(p.seed));
  const std::string params = buf;
  Result<GenerateResult> result = StartGeneration(p.dir, "loader", params, "samples", force);
  if (!result.ok() || result->cached) return result;
  const std::string root = p.dir + "/samples";
  if (::mkdir(root.c_str(), 0755) != 0) return ErrnoStatus("mkdir " + root);
  for (uint32_t c = 0; c < p.classes; ++c) {
    std::string folder = StrFormat("%s/c%03u", root.c_str(), c);
    if (::mkdir(folder.c_str(), 0755) != 0) return ErrnoStatus("mkdir " + folder);
  }
  // Encoded images are less skewed than documents: sigma 0.6, at least 1 KiB.
  std::vector<uint64_t> sizes = LogNormalSizes(p.samples, p.total_bytes, 0.6,
                                               tsmp::kHeaderBytes + 1024, DeriveSeed(p.seed, 4));
  std::vector<unsigned char> file;
  uint64_t total = 0;
  for (uint64_t i = 0; i < p.samples; ++i) {
    file.assign(sizes[i], 0);
    Rng rng(DeriveSeed(p.seed, 100000 + i));
    unsigned char* payload = file.data() + tsmp::kHeaderBytes;
    const uint64_t payload_bytes = sizes[i] - tsmp::kHeaderBytes;
    rng.Fill(payload, payload_bytes);
    tsmp::Header header;
    header.index = static_cast<uint32_t>(i);
    header.label = static_cast<uint32_t>(i % p.classes);
    header.payload_bytes = payload_bytes;
    header.payload_digest = HashBytes(payload, payload_bytes, i);
    tsmp::EncodeHeader(header, file.data());
    std::string path = StrFormat("%s/c%03u/s%06llu.smp", root.c_str(), header.label,
                                 static_cast<unsigned long long>(i));
    TIPFS_RETURN_IF_ERROR(WriteWholeFile(path, file.data(), file.size()));
    total += file.size();
  }
  std::string manifest = "# " + params + "\nsamples " + std::to_string(p.samples) + "\nbytes " +
                         std::to_string(total) + "\nclasses " + std::to_string(p.classes) + "\n";
  TIPFS_RETURN_IF_ERROR(WriteFileAtomic(p.dir + "/loader.manifest", manifest));
  TIPFS_RETURN_IF_ERROR(WriteStamp(p.dir, "loader", params));
  return result;
}

}  // namespace tipfs::bench
