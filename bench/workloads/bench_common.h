// Shared pieces of the bench workloads and their data generator: the --variant and size options,
// a seeded deterministic random generator, a streaming 64-bit digest, whole-buffer I/O loops,
// a sorted directory walk, and the run report every program prints to stderr.
// Everything here is single-threaded by design: each workload is one reading thread, like the
// programs of the paper. Nothing here touches a tipfs mount specially; hints live in hint_window.h.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace tipfs::bench {

// original: the program as the real tool would be (no hints). manual: the same program plus the
// hint calls a programmer would add. The third variant of the paper, speculating, is the
// original run under `tipfs run`, so it needs no code here.
enum class Variant { kOriginal, kManual };

const char* VariantName(Variant v);

// Adds `--variant original|manual` (default original).
void AddVariantOption(CLI::App& app, Variant* variant);

// Parses "18M", "64K", "1G", "1.5M", "4096" (binary multiples). Fails on anything else.
Result<uint64_t> ParseSize(std::string_view text);

// Adds an option taking a size with an optional K/M/G suffix.
CLI::Option* AddSizeOption(CLI::App& app, const std::string& name, uint64_t* out,
                           const std::string& description);

// Parses argv with CLI11 and returns the process exit code to use when parsing ended the program
// (help, errors), or -1 when the program should go on. Keeps CLI11's exceptions inside main().
int ParseCommandLine(CLI::App& app, int argc, char** argv);

// splitmix64's finaliser (Steele, Lea & Flood, OOPSLA 2014): a bijective 64-bit mixer.
uint64_t Mix64(uint64_t x);

// A seed for an independent sub-stream (a file, an epoch, an object) of a run's master seed.
uint64_t DeriveSeed(uint64_t seed, uint64_t stream);

// xoshiro256** (Blackman & Vigna, 2018), seeded through splitmix64. Fast enough to fill tens of
// MiB per second per core, and the same sequence on every machine for the same seed.
class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t Next();
  // Uniform in [0, bound); bound > 0. Lemire's multiply-shift, with its rare rejection step.
  uint64_t Below(uint64_t bound);
  // Uniform in [lo, hi], lo <= hi.
  uint64_t Between(uint64_t lo, uint64_t hi) { return lo + Below(hi - lo + 1); }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform01();
  // Standard normal (Box-Muller; one value per call, the pair's second value discarded so that
  // the sequence does not depend on call history).
  double Normal();
  // Fills `n` bytes with random data.
  void Fill(void* data, size_t n);

 private:
  uint64_t s_[4];
};

// Streaming 64-bit digest, eight bytes per step. Not cryptographic; it only has to make two
// different outputs disagree with overwhelming probability, and to run at memory speed.
// The digest of a byte string does not depend on how Update() calls split it.
class Hasher {
 public:
  explicit Hasher(uint64_t seed = 0) : state_(Mix64(seed ^ 0x9e3779b97f4a7c15ull)) {}

  void Update(const void* data, size_t n);
  void UpdateU64(uint64_t v) { Update(&v, sizeof v); }
  uint64_t Digest() const;

 private:
  void Absorb(uint64_t word) { state_ = Mix64(state_ ^ word) + 0x632be59bd9b4e019ull; }

  uint64_t state_;
  uint64_t total_ = 0;
  unsigned char tail_[8];
  size_t tail_size_ = 0;
};

uint64_t HashBytes(const void* data, size_t n, uint64_t seed = 0);

// printf into a std::string.
std::string StrFormat(const char* format, ...) __attribute__((format(printf, 1, 2)));

// "%016llx" of a digest.
std::string Hex64(uint64_t v);

// Reads until `n` bytes or end of file; `*got` is what was read. Retries EINTR and short reads.
Status ReadFull(int fd, void* buf, size_t n, size_t* got);
// Reads exactly `n` bytes at `offset`; end of file first is an error (EIO, "short read").
Status PreadExact(int fd, void* buf, size_t n, uint64_t offset);
Status WriteFull(int fd, const void* buf, size_t n);
Status PwriteFull(int fd, const void* buf, size_t n, uint64_t offset);

// Whole small files (stamps, manifests).
Result<std::string> ReadSmallFile(const std::string& path);
// Creates or truncates `path` and writes `n` bytes to it.
Status WriteWholeFile(const std::string& path, const void* data, size_t n);
// Writes `path` through a temporary name and rename, so a reader never sees half of it.
Status WriteFileAtomic(const std::string& path, std::string_view contents);

// Regular files below `root`, as paths relative to it, in byte-wise sorted order of the full
// relative path (the order a shell glob or `find | sort` gives). Uses d_type when the file
// system fills it, and lstat otherwise; symbolic links are not followed.
Result<std::vector<std::string>> ListFilesSorted(const std::string& root);

// Absolute, symlink-free form of `path` (realpath(3)).
Result<std::string> AbsolutePath(const std::string& path);

// Counts what a workload read, for the stderr report.
struct IoCounters {
  uint64_t read_calls = 0;
  uint64_t bytes_read = 0;
  uint64_t files_opened = 0;
};

// Prints "[program] variant=... elapsed=...s reads=... bytes=... <extra>" to stderr when the
// run ends. Timing never goes to stdout: stdout is compared across variants.
class RunReport {
 public:
  RunReport(std::string program, Variant variant);
  void Print(const IoCounters& io, const std::string& extra) const;

 private:
  std::string program_;
  Variant variant_;
  int64_t start_nanos_;
};

int64_t MonotonicNanos();

// The end of every workload: flushes stdout (the result the harness compares across variants),
// then prints the run report to stderr. Returns the exit status (1 when stdout failed).
int FinishRun(std::string_view program, const RunReport& report, const IoCounters& io,
              const std::string& extra);

// Prints "program: message" to stderr and returns exit status 1, for `return Fail(...)` in main.
int Fail(std::string_view program, const Status& status);

}  // namespace tipfs::bench
