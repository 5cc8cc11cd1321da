// tipfs-bench-loader: a training-data loader, the modern case of a read order known ahead of
// time (not in the paper). Each epoch reads every sample file once in a shuffled order (a fixed
// seed per epoch, as data loaders seed their samplers), the way a Python loader reads a file
// (open, fstat, read the whole file in one call, close), verifies each sample's digest (the
// stand-in for decoding), and prints per epoch the samples and bytes read, the label counts and
// a digest of (sample, payload digest) in read order.
//
// Variants (one source): original reads with no hints. manual discloses the whole epoch's order
// at the start of the epoch (TIPFS_IOC_HINT_PATHS, whole files, batched), which a loader knows
// as soon as its sampler has shuffled. Output is byte-identical; stderr differs.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "bench/workloads/bench_common.h"
#include "bench/workloads/hint_window.h"
#include "bench/workloads/sample_format.h"

namespace tipfs::bench {
namespace {

constexpr char kProgram[] = "tipfs-bench-loader";

struct Options {
  Variant variant = Variant::kOriginal;
  std::string dir;
  uint32_t epochs = 2;
  uint64_t seed = 1;
  uint64_t max_samples = 0;
};

// Fisher-Yates with the epoch's own seed: the order depends only on (seed, epoch, count).
std::vector<uint32_t> EpochOrder(uint64_t count, uint64_t seed, uint32_t epoch) {
  std::vector<uint32_t> order(count);
  std::iota(order.begin(), order.end(), 0u);
  Rng rng(DeriveSeed(seed, 0x65706f6368ull + epoch));
  for (uint64_t i = count; i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  return order;
}

// Reads one sample file whole and checks it; returns its header.
Result<tsmp::Header> LoadSample(const std::string& path, std::vector<unsigned char>* buffer,
                                IoCounters* io) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + path);
  ++io->files_opened;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status status = ErrnoStatus("fstat " + path);
    ::close(fd);
    return status;
  }
  // One byte more than the size, so that end of file shows in the same call when the size holds.
  buffer->resize(static_cast<size_t>(st.st_size) + 1);
  size_t got = 0;
  Status status = ReadFull(fd, buffer->data(), buffer->size(), &got);
  ::close(fd);
  if (!status.ok()) return status.WithContext(path);
  ++io->read_calls;
  io->bytes_read += got;
  Result<tsmp::Header> header = tsmp::DecodeHeader(buffer->data(), got);
  if (!header.ok()) return header.status().WithContext(path);
  if (HashBytes(buffer->data() + tsmp::kHeaderBytes, header->payload_bytes, header->index) !=
      header->payload_digest) {
    return Status::Corruption(path + ": payload digest mismatch (corrupt sample)");
  }
  return header;
}

int Run(const Options& options) {
  RunReport report(kProgram, options.variant);
  Result<std::vector<std::string>> listed = ListFilesSorted(options.dir);
  if (!listed.ok()) return Fail(kProgram, listed.status());
  std::vector<std::string> paths;
  for (const std::string& relative : *listed) {
    if (relative.size() > 4 && relative.compare(relative.size() - 4, 4, ".smp") == 0) {
      paths.push_back(options.dir + "/" + relative);
    }
  }
  if (options.max_samples > 0 && paths.size() > options.max_samples) {
    paths.resize(options.max_samples);
  }
  if (paths.empty()) return Fail(kProgram, Status::NotFound("no *.smp samples in " + options.dir));

  int mount_fd = -1;
  std::optional<HintWindow> window;
  std::vector<std::string> absolute;
  std::vector<uint64_t> sizes;
  if (options.variant == Variant::kManual) {
    mount_fd = ::open(options.dir.c_str(), O_RDONLY | O_CLOEXEC);
    if (mount_fd < 0) return Fail(kProgram, ErrnoStatus("open " + options.dir));
    window.emplace(kProgram, mount_fd);
    for (const std::string& path : paths) {
      Result<std::string> abs = AbsolutePath(path);
      struct stat st;
      if (!abs.ok()) return Fail(kProgram, abs.status());
      if (::stat(abs->c_str(), &st) != 0) return Fail(kProgram, ErrnoStatus("stat " + *abs));
      absolute.push_back(*abs);
      sizes.push_back(static_cast<uint64_t>(st.st_size));
    }
  }

  IoCounters io;
  std::vector<unsigned char> buffer;
  Hasher run_digest(options.seed);
  for (uint32_t epoch = 0; epoch < options.epochs; ++epoch) {
    std::vector<uint32_t> order = EpochOrder(paths.size(), options.seed, epoch);
    if (window) {
      for (uint32_t k : order) window->AddPath(absolute[k], 0, sizes[k]);
      window->Disclose();
    }
    Hasher epoch_digest(epoch);
    std::vector<uint64_t> labels;
    uint64_t epoch_bytes = io.bytes_read;
    for (uint32_t k : order) {
      uint64_t before = io.bytes_read;
      Result<tsmp::Header> sample = LoadSample(paths[k], &buffer, &io);
      if (!sample.ok()) return Fail(kProgram, sample.status());
      if (window) window->Consumed(io.bytes_read - before);
      epoch_digest.UpdateU64(sample->index);
      epoch_digest.UpdateU64(sample->payload_digest);
      if (sample->label >= labels.size()) labels.resize(sample->label + 1, 0);
      ++labels[sample->label];
    }
    epoch_bytes = io.bytes_read - epoch_bytes;
    std::string label_text;
    for (size_t l = 0; l < labels.size(); ++l) {
      label_text += (l ? "," : "") + std::to_string(labels[l]);
    }
    std::printf("epoch %u samples=%zu bytes=%llu labels=%s order_digest=%s\n", epoch, order.size(),
                static_cast<unsigned long long>(epoch_bytes), label_text.c_str(),
                Hex64(epoch_digest.Digest()).c_str());
    run_digest.UpdateU64(epoch_digest.Digest());
  }
  std::printf("loader: epochs=%u samples=%zu bytes=%llu digest=%s\n", options.epochs, paths.size(),
              static_cast<unsigned long long>(io.bytes_read), Hex64(run_digest.Digest()).c_str());
  if (mount_fd >= 0) ::close(mount_fd);
  return FinishRun(kProgram, report, io, window ? window->Summary() : "");
}

}  // namespace
}  // namespace tipfs::bench

int main(int argc, char** argv) {
  using namespace tipfs::bench;
  Options options;
  CLI::App app{
      "Shuffled-epoch training-data loader (tipfs benchmark workload).\n"
      "Prints per-epoch sample counts and digests; timing goes to stderr."};
  AddVariantOption(app, &options.variant);
  app.add_option("--epochs", options.epochs)->capture_default_str();
  app.add_option("--seed", options.seed, "seed of the epoch orders")->capture_default_str();
  app.add_option("--samples", options.max_samples, "use only the first N samples (0: all)")
      ->capture_default_str();
  app.add_option("dir", options.dir, "the samples directory (DIR/samples)")->required();
  int exit_code = ParseCommandLine(app, argc, argv);
  if (exit_code >= 0) return exit_code;
  return Run(options);
}
