// End-to-end tests of the workload programs on a plain directory: tiny data sets, the original
// and manual variants run as processes, outputs byte-identical, and results checked against what
// the generator planted or a direct computation. On a plain directory the manual variant's hint
// ioctls fail with ENOTTY, so it must warn once and run on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "bench/workloads/bench_common.h"
#include "bench/workloads/object_format.h"
#include "bench/workloads/volume_format.h"
#include "tests/bench/test_support.h"

namespace tipfs::bench {
namespace {

using testing::CountOccurrences;
using testing::FieldOf;
using testing::ProgramResult;
using testing::ReadFileOrDie;
using testing::RunProgram;
using testing::SplitLines;
using testing::TempDir;
using testing::WriteFileOrDie;

const std::string kGen = TIPFS_BENCH_GEN;
const std::string kAgrep = TIPFS_BENCH_AGREP;
const std::string kGnuld = TIPFS_BENCH_GNULD;
const std::string kXdataslice = TIPFS_BENCH_XDATASLICE;
const std::string kLoader = TIPFS_BENCH_LOADER;

// Runs `argv` as original and as manual; both must succeed with the same stdout. Returns it.
std::string RunBothVariants(std::vector<std::string> argv) {
  std::vector<std::string> original = argv, manual = argv;
  original.insert(original.begin() + 1, {"--variant", "original"});
  manual.insert(manual.begin() + 1, {"--variant", "manual"});
  ProgramResult a = RunProgram(original);
  ProgramResult b = RunProgram(manual);
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out) << "variants disagree";
  EXPECT_EQ(CountOccurrences(b.err, "warning: hints not supported here"), 1u) << b.err;
  EXPECT_EQ(CountOccurrences(a.err, "warning"), 0u) << a.err;
  return a.out;
}

void Generate(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kGen};
  argv.insert(argv.end(), args.begin(), args.end());
  ProgramResult r = RunProgram(argv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

std::map<std::string, std::string> ManifestValues(const std::string& path) {
  std::map<std::string, std::string> values;
  for (const std::string& line : SplitLines(ReadFileOrDie(path))) {
    std::stringstream in(line);
    std::string key, value;
    if (in >> key >> value && key != "plant" && key != "#") values[key] = value;
  }
  return values;
}

TEST(AgrepWorkloadTest, FindsExactlyThePlantedLinesInBothVariants) {
  TempDir dir;
  Generate({"agrep", "--dir", dir.path(), "--files", "30", "--total", "400K", "--seed", "3"});
  std::map<std::string, std::string> manifest = ManifestValues(dir / "agrep.manifest");
  std::set<std::string> expected, decoys;
  for (const std::string& line : SplitLines(ReadFileOrDie(dir / "agrep.manifest"))) {
    std::stringstream in(line);
    std::string tag, file, number, kind;
    if (!(in >> tag >> file >> number >> kind) || tag != "plant") continue;
    (kind == "decoy" ? decoys : expected).insert(file + ":" + number);
  }
  ASSERT_EQ(expected.size(), 14u);  // 7 exact + 7 approximate
  std::string out =
      RunBothVariants({kAgrep, "-p", manifest["pattern"], "-k", manifest["errors"], dir / "text"});
  std::vector<std::string> lines = SplitLines(out);
  ASSERT_FALSE(lines.empty());
  std::set<std::string> found;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    size_t second_colon = lines[i].find(':', lines[i].find(':') + 1);
    found.insert(lines[i].substr(0, second_colon));
  }
  EXPECT_EQ(found, expected);
  for (const std::string& decoy : decoys) EXPECT_EQ(found.count(decoy), 0u) << decoy;
  EXPECT_EQ(FieldOf(lines.back(), "matching_lines"), "14");
  EXPECT_EQ(FieldOf(lines.back(), "files"), "30");
  EXPECT_EQ(FieldOf(lines.back(), "bytes"), manifest["bytes"]);
}

TEST(AgrepWorkloadTest, ChunkSizeAndFileLimitBehaveLikeTheRealTool) {
  TempDir dir;
  Generate({"agrep", "--dir", dir.path(), "--files", "12", "--total", "200K"});
  std::string pattern = ManifestValues(dir / "agrep.manifest")["pattern"];
  ProgramResult big = RunProgram({kAgrep, "-p", pattern, dir / "text"});
  ProgramResult tiny = RunProgram({kAgrep, "-p", pattern, "--chunk", "7", dir / "text"});
  ASSERT_EQ(big.exit_code, 0) << big.err;
  EXPECT_EQ(big.out, tiny.out);  // lines split across reads are searched whole
  EXPECT_GT(std::stoull(FieldOf(tiny.err, "reads")), std::stoull(FieldOf(big.err, "reads")));
  ProgramResult first = RunProgram({kAgrep, "-p", pattern, "--files", "5", dir / "text"});
  EXPECT_EQ(FieldOf(SplitLines(first.out).back(), "files"), "5");
  ProgramResult missing = RunProgram({kAgrep, "-p", pattern, dir / "nothing-here"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("nothing-here"), std::string::npos);
}

TEST(AgrepWorkloadTest, AgreesWithTreAgrepAndGrep) {
  for (const char* tool : {"/usr/bin/tre-agrep", "/usr/bin/grep"}) {
    if (!std::filesystem::exists(tool)) GTEST_SKIP() << tool << " is not installed";
  }
  TempDir dir;
  Generate({"agrep", "--dir", dir.path(), "--files", "20", "--total", "300K", "--seed", "5"});
  std::map<std::string, std::string> manifest = ManifestValues(dir / "agrep.manifest");
  const std::string& pattern = manifest["pattern"];
  ProgramResult ours = RunProgram({kAgrep, "-p", pattern, "-k", "2", dir / "text"});
  std::vector<std::string> files;
  for (const auto& [name, contents] : testing::ReadTree(dir / "text")) {
    files.push_back(dir / ("text/" + name));
  }
  std::vector<std::string> tre = {"/usr/bin/tre-agrep", "-2", "-k", "-c", "-H", pattern};
  tre.insert(tre.end(), files.begin(), files.end());
  ProgramResult theirs = RunProgram(tre);
  uint64_t tre_total = 0;
  for (const std::string& line : SplitLines(theirs.out)) {
    tre_total += std::stoull(line.substr(line.rfind(':') + 1));
  }
  EXPECT_EQ(std::to_string(tre_total), FieldOf(SplitLines(ours.out).back(), "matching_lines"));
  ProgramResult grep = RunProgram({"/usr/bin/grep", "-r", "-c", "-F", pattern, dir / "text"});
  uint64_t grep_total = 0;
  for (const std::string& line : SplitLines(grep.out)) {
    grep_total += std::stoull(line.substr(line.rfind(':') + 1));
  }
  EXPECT_EQ(grep_total, 5u);  // the exact plants only
}

// The image's header, section table and global symbols, read independently of the linker.
struct Image {
  uint64_t symbols_offset = 0, symbol_count = 0;
  uint64_t address[5] = {}, size[5] = {};
  std::vector<std::pair<std::string, uint64_t>> symbols;
};

Image ParseImage(const std::string& bytes) {
  Image image;
  auto u = [&](size_t at) {
    return tobj::GetU64(reinterpret_cast<const unsigned char*>(&bytes[at]));
  };
  EXPECT_EQ(bytes.compare(0, 7, "TIPEXE1"), 0);
  image.symbols_offset = u(16);
  image.symbol_count = u(24);
  for (int t = 0; t < 5; ++t) {
    image.address[t] = u(64 + t * 32 + 8);
    image.size[t] = u(64 + t * 32 + 24);
  }
  size_t at = image.symbols_offset;
  for (uint64_t s = 0; s < image.symbol_count && at + 12 <= bytes.size(); ++s) {
    uint64_t address = u(at);
    uint32_t length = tobj::GetU32(reinterpret_cast<const unsigned char*>(&bytes[at + 8]));
    image.symbols.emplace_back(bytes.substr(at + 12, length), address);
    at += 12 + length;
  }
  EXPECT_EQ(at, bytes.size());
  return image;
}

TEST(GnuldWorkloadTest, LinksTheGeneratedObjectsIdenticallyInEveryVariant) {
  TempDir dir;
  Generate({"gnuld", "--dir", dir.path(), "--objects", "12", "--total", "1M", "--seed", "4"});
  std::map<std::string, std::string> manifest = ManifestValues(dir / "gnuld.manifest");
  std::string original = RunBothVariants({kGnuld, "-o", dir / "a.texe", dir / "objects"});
  std::string image = ReadFileOrDie(dir / "a.texe");
  ProgramResult manual = RunProgram(
      {kGnuld, "--variant", "manual", "--io", "stdio", "-o", dir / "b.texe", dir / "objects"});
  ASSERT_EQ(manual.exit_code, 0) << manual.err;
  EXPECT_EQ(manual.out, original);
  EXPECT_EQ(ReadFileOrDie(dir / "b.texe"), image);
  ProgramResult again = RunProgram({kGnuld, "-o", dir / "c.texe", dir / "objects"});
  EXPECT_EQ(again.out, original);  // stable across runs

  std::vector<std::string> lines = SplitLines(original);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(FieldOf(lines[0], "objects"), "12");
  EXPECT_EQ(FieldOf(lines[0], "relocations"), manifest["relocations"]);
  EXPECT_EQ(FieldOf(lines[0], "globals"), manifest["globals"]);
  EXPECT_EQ(FieldOf(lines[0], "undefined_refs"), manifest["undefined"]);
  EXPECT_EQ(FieldOf(lines[0], "unresolved"), "0");
  EXPECT_EQ(FieldOf(lines[2], "output_bytes"), std::to_string(image.size()));

  Image parsed = ParseImage(image);
  EXPECT_EQ(std::to_string(parsed.symbol_count), manifest["globals"]);
  EXPECT_EQ(std::to_string(parsed.size[0]), FieldOf(lines[1], "text"));
  EXPECT_EQ(std::to_string(parsed.size[3]), FieldOf(lines[1], "debug"));
  std::set<std::string> names;
  for (const auto& [name, address] : parsed.symbols) {
    names.insert(name);
    bool inside = false;  // every global lies in .text, .data, .rodata or .bss
    for (int t : {0, 1, 2, 4}) {
      inside |= address >= parsed.address[t] && address <= parsed.address[t] + parsed.size[t];
    }
    EXPECT_TRUE(inside) << name << " at " << address;
  }
  EXPECT_EQ(names.size(), parsed.symbols.size());  // no global twice
}

TEST(GnuldWorkloadTest, ReportsUndefinedSymbolsAndBadObjectsLikeALinker) {
  TempDir dir;
  Generate({"gnuld", "--dir", dir.path(), "--objects", "8", "--total", "512K"});
  ProgramResult partial =
      RunProgram({kGnuld, "--objects", "3", "-o", dir / "p.texe", dir / "objects"});
  EXPECT_EQ(partial.exit_code, 1);
  EXPECT_NE(partial.err.find("undefined reference to `_ZN5bench"), std::string::npos)
      << partial.err;
  ProgramResult allowed = RunProgram(
      {kGnuld, "--objects", "3", "--allow-undefined", "-o", dir / "p.texe", dir / "objects"});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
  EXPECT_NE(FieldOf(allowed.out, "unresolved"), "0");

  std::string object = ReadFileOrDie(dir / "objects/o00002.tobj");
  object[0] = 'X';
  WriteFileOrDie(dir / "objects/o00002.tobj", object);
  for (const char* variant : {"original", "manual"}) {
    ProgramResult bad =
        RunProgram({kGnuld, "--variant", variant, "-o", dir / "q.texe", dir / "objects"});
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("o00002.tobj: file format not recognized"), std::string::npos)
        << bad.err;
  }
}

// Slice statistics recomputed from the whole volume read into memory in x-major order, with the
// same plane geometry: checks the brick addressing, the run coalescing and the sampling.
struct DirectStats {
  uint64_t samples = 0;
  float min = 0, max = 0;
  double mean = 0;
};

DirectStats ComputeDirectly(const std::string& volume_path, const tvol::SlicePlane& plane) {
  std::string bytes = ReadFileOrDie(volume_path);
  Result<tvol::Header> h =
      tvol::DecodeHeader(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  EXPECT_TRUE(h.ok());
  const uint32_t n = h->dim;
  std::vector<float> grid(size_t{n} * n * n);
  for (uint32_t z = 0; z < n; ++z) {
    for (uint32_t y = 0; y < n; ++y) {
      for (uint32_t x = 0; x < n; ++x) {
        uint64_t at = tvol::BrickOffset(*h, tvol::BrickOf(*h, x, y, z)) +
                      tvol::IndexInBrick(*h, x, y, z) * sizeof(float);
        std::memcpy(&grid[(size_t{z} * n + y) * n + x], &bytes[at], sizeof(float));
      }
    }
  }
  auto v = [&](uint32_t x, uint32_t y, uint32_t z) { return grid[(size_t{z} * n + y) * n + x]; };
  DirectStats s;
  s.min = INFINITY;
  s.max = -INFINITY;
  double sum = 0;
  tvol::SampleCell c;
  for (uint32_t j = 0; j < plane.size; ++j) {
    for (uint32_t i = 0; i < plane.size; ++i) {
      if (!tvol::LocateSample(plane.Sample(i, j), n, &c)) continue;
      double value = 0;
      for (int corner = 0; corner < 8; ++corner) {
        double w = 1;
        uint32_t at[3];
        for (int axis = 0; axis < 3; ++axis) {
          bool high = corner >> axis & 1;
          w *= high ? c.frac[axis] : 1 - c.frac[axis];
          at[axis] = high ? c.hi[axis] : c.lo[axis];
        }
        value += w * v(at[0], at[1], at[2]);
      }
      float f = static_cast<float>(value);
      ++s.samples;
      sum += f;
      s.min = std::min(s.min, f);
      s.max = std::max(s.max, f);
    }
  }
  s.mean = sum / static_cast<double>(s.samples);
  return s;
}

TEST(XdatasliceWorkloadTest, SliceStatisticsMatchADirectComputation) {
  TempDir dir;
  Generate({"xdataslice", "--dir", dir.path(), "--dim", "32", "--brick", "8", "--seed", "6"});
  const std::string volume = dir / "volume.tvol";
  // An axis-aligned slice samples voxels exactly; the oblique ones interpolate.
  const std::vector<std::string> specs = {"16,16,5,0,0,1", "16,16,16,1,2,3", "10,20,12,-3,1,0.5"};
  std::vector<std::string> argv = {kXdataslice, volume};
  for (const std::string& spec : specs) argv.insert(argv.end() - 1, {"--slice", spec});
  std::vector<std::string> lines = SplitLines(RunBothVariants(argv));
  ASSERT_EQ(lines.size(), specs.size() + 1);
  for (size_t s = 0; s < specs.size(); ++s) {
    std::vector<double> v;
    std::stringstream in(specs[s]);
    for (std::string part; std::getline(in, part, ',');) v.push_back(std::stod(part));
    DirectStats want =
        ComputeDirectly(volume, tvol::SlicePlane::Make({v[0], v[1], v[2]}, {v[3], v[4], v[5]}, 32));
    const std::string& line = lines[s];
    EXPECT_EQ(FieldOf(line, "samples"), std::to_string(want.samples)) << line;
    EXPECT_NEAR(std::stod(FieldOf(line, "min")), want.min, 1e-6) << line;
    EXPECT_NEAR(std::stod(FieldOf(line, "max")), want.max, 1e-6) << line;
    EXPECT_NEAR(std::stod(FieldOf(line, "mean")), want.mean, 1e-6) << line;
  }
  EXPECT_EQ(FieldOf(lines[0], "samples"), "1024");  // the whole 32 x 32 plane z = 5
  EXPECT_EQ(FieldOf(lines[0], "bricks"), "16");     // one layer of 4 x 4 bricks
}

TEST(XdatasliceWorkloadTest, RandomSlicesAgreeAcrossVariantsAndRunLimits) {
  TempDir dir;
  Generate({"xdataslice", "--dir", dir.path(), "--dim", "64", "--brick", "8"});
  std::string out =
      RunBothVariants({kXdataslice, "--slices", "6", "--seed", "2", dir / "volume.tvol"});
  ProgramResult short_runs = RunProgram(
      {kXdataslice, "--slices", "6", "--seed", "2", "--max-run", "2K", dir / "volume.tvol"});
  ASSERT_EQ(short_runs.exit_code, 0) << short_runs.err;
  std::vector<std::string> a = SplitLines(out), b = SplitLines(short_runs.out);
  ASSERT_EQ(a.size(), 7u);
  ASSERT_EQ(b.size(), 7u);
  for (size_t i = 0; i < 6; ++i) {  // one brick per read: more runs, the same samples
    EXPECT_EQ(FieldOf(a[i], "digest"), FieldOf(b[i], "digest"));
    EXPECT_EQ(FieldOf(b[i], "runs"), FieldOf(b[i], "bricks"));
    EXPECT_LT(std::stoull(FieldOf(a[i], "runs")), std::stoull(FieldOf(a[i], "bricks")));
  }
  ProgramResult other_seed =
      RunProgram({kXdataslice, "--slices", "6", "--seed", "3", dir / "volume.tvol"});
  EXPECT_NE(FieldOf(SplitLines(other_seed.out).back(), "digest"), FieldOf(a.back(), "digest"));
}

TEST(LoaderWorkloadTest, EveryEpochReadsEverySampleOnceInItsOwnOrder) {
  TempDir dir;
  Generate({"loader", "--dir", dir.path(), "--samples", "50", "--total", "400K", "--classes", "5"});
  std::map<std::string, std::string> manifest = ManifestValues(dir / "loader.manifest");
  std::vector<std::string> lines =
      SplitLines(RunBothVariants({kLoader, "--epochs", "3", dir / "samples"}));
  ASSERT_EQ(lines.size(), 4u);
  std::set<std::string> orders;
  for (int e = 0; e < 3; ++e) {
    EXPECT_EQ(FieldOf(lines[e], "samples"), "50");
    EXPECT_EQ(FieldOf(lines[e], "bytes"), manifest["bytes"]);
    EXPECT_EQ(FieldOf(lines[e], "labels"), "10,10,10,10,10");
    orders.insert(FieldOf(lines[e], "order_digest"));
  }
  EXPECT_EQ(orders.size(), 3u);  // three different shuffles
  ProgramResult limited = RunProgram({kLoader, "--samples", "7", "--epochs", "1", dir / "samples"});
  EXPECT_EQ(FieldOf(limited.out, "samples"), "7");
}

TEST(LoaderWorkloadTest, DetectsACorruptSample) {
  TempDir dir;
  Generate({"loader", "--dir", dir.path(), "--samples", "10", "--total", "100K"});
  const std::string victim = dir / "samples/c001/s000001.smp";
  std::string bytes = ReadFileOrDie(victim);
  bytes[bytes.size() / 2] ^= 0x40;
  WriteFileOrDie(victim, bytes);
  ProgramResult r = RunProgram({kLoader, dir / "samples"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("s000001.smp: payload digest mismatch"), std::string::npos) << r.err;
}

TEST(CSourcesTest, CompileAndLinkWithTheRealToolchain) {
  if (!std::filesystem::exists("/usr/bin/cc") || !std::filesystem::exists("/usr/bin/ld")) {
    GTEST_SKIP() << "no C toolchain";
  }
  TempDir dir;
  Generate({"csrc", "--dir", dir.path(), "--files", "4", "--functions", "3", "--table-words", "64",
            "--compile"});
  ProgramResult link = RunProgram({"/usr/bin/cc", "-o", dir / "prog", dir / "csrc/obj/main.o",
                                   dir / "csrc/obj/u00000.o", dir / "csrc/obj/u00001.o",
                                   dir / "csrc/obj/u00002.o", dir / "csrc/obj/u00003.o"});
  ASSERT_EQ(link.exit_code, 0) << link.err;
  ProgramResult run1 = RunProgram({dir / "prog"});
  EXPECT_EQ(run1.exit_code, 0);
  EXPECT_EQ(run1.out.rfind("csrc checksum ", 0), 0u) << run1.out;
  // Deterministic: the same seed gives the same program, hence the same checksum.
  TempDir other;
  Generate(
      {"csrc", "--dir", other.path(), "--files", "4", "--functions", "3", "--table-words", "64"});
  EXPECT_EQ(ReadFileOrDie(dir / "csrc/src/u00002.c"), ReadFileOrDie(other / "csrc/src/u00002.c"));
}

}  // namespace
}  // namespace tipfs::bench
