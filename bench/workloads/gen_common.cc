// Stamps and size distributions shared by the generators (see generators.h).
#include <cmath>
#include <filesystem>
#include <system_error>

#include "bench/workloads/bench_common.h"
#include "bench/workloads/generators.h"

namespace tipfs::bench {

static std::string StampPath(const std::string& dir, const std::string& kind) {
  return dir + "/.tipfs-bench-" + kind + ".stamp";
}

Status WriteStamp(const std::string& dir, const std::string& kind, const std::string& params) {
  return WriteFileAtomic(StampPath(dir, kind), params + "\n");
}

Result<GenerateResult> StartGeneration(const std::string& dir, const std::string& kind,
                                       const std::string& params, const std::string& subpath,
                                       bool force) {
  GenerateResult result;
  result.summary = params;
  Result<std::string> stamp = ReadSmallFile(StampPath(dir, kind));
  if (!force && stamp.ok() && *stamp == params + "\n") {
    result.cached = true;
    return result;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::FromErrno(ec.value(), "create " + dir + ": " + ec.message());
  std::filesystem::remove(StampPath(dir, kind), ec);
  if (ec) return Status::FromErrno(ec.value(), "remove old stamp in " + dir + ": " + ec.message());
  std::filesystem::remove_all(dir + "/" + subpath, ec);
  if (ec) {
    return Status::FromErrno(ec.value(), "remove old " + dir + "/" + subpath + ": " + ec.message());
  }
  return result;
}

std::vector<uint64_t> LogNormalSizes(uint64_t count, uint64_t total, double sigma, uint64_t minimum,
                                     uint64_t seed) {
  std::vector<uint64_t> sizes(count, minimum);
  if (count == 0 || total <= count * minimum) return sizes;
  Rng rng(seed);
  std::vector<double> weights(count);
  double sum = 0;
  for (double& w : weights) {
    w = std::exp(sigma * rng.Normal());
    sum += w;
  }
  // Spread what is left above the minimum in proportion to the weights; the rounding remainder
  // goes to the last file, so the sizes add up to `total` exactly.
  uint64_t spare = total - count * minimum;
  uint64_t assigned = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t extra =
        static_cast<uint64_t>(std::floor(weights[i] / sum * static_cast<double>(spare)));
    if (assigned + extra > spare) extra = spare - assigned;
    sizes[i] += extra;
    assigned += extra;
  }
  sizes.back() += spare - assigned;
  return sizes;
}

}  // namespace tipfs::bench
