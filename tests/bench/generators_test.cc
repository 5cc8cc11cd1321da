// The data generators: deterministic from the seed, cached by their stamp, and holding what
// their manifests promise (planted lines where the manifest says, sizes adding up).
#include "bench/workloads/generators.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "bench/workloads/bench_common.h"
#include "tests/bench/test_support.h"

namespace tipfs::bench {
namespace {

using testing::ReadFileOrDie;
using testing::ReadTree;
using testing::SplitLines;
using testing::TempDir;

int64_t MtimeNanos(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

TEST(GeneratorsTest, LogNormalSizesAddUpAndRespectTheMinimum) {
  std::vector<uint64_t> sizes = LogNormalSizes(1349, 18u << 20, 1.0, 64, 7);
  uint64_t total = 0, largest = 0, smallest = UINT64_MAX;
  for (uint64_t s : sizes) {
    total += s;
    largest = std::max(largest, s);
    smallest = std::min(smallest, s);
  }
  EXPECT_EQ(total, 18u << 20);
  EXPECT_GE(smallest, 64u);
  EXPECT_GT(largest, 10 * (total / sizes.size()));  // a realistic long tail
  EXPECT_EQ(sizes, LogNormalSizes(1349, 18u << 20, 1.0, 64, 7));
}

TEST(GeneratorsTest, TextIsDeterministicAndPlantsAreWhereTheManifestSays) {
  TempDir a, b;
  TextParams params;
  params.files = 40;
  params.total_bytes = 300 * 1024;
  params.seed = 9;
  params.dir = a.path();
  ASSERT_TRUE(GenerateText(params, false).ok());
  params.dir = b.path();
  ASSERT_TRUE(GenerateText(params, false).ok());
  EXPECT_EQ(ReadTree(a / "text"), ReadTree(b / "text"));

  std::string pattern;
  std::map<std::string, int> kinds;
  std::set<std::pair<std::string, int>> planted_lines;
  for (const std::string& line : SplitLines(ReadFileOrDie(a / "agrep.manifest"))) {
    std::vector<std::string> f;
    std::stringstream in(line);
    for (std::string w; in >> w;) f.push_back(w);
    if (f.size() == 2 && f[0] == "pattern") pattern = f[1];
    if (f.size() != 5 || f[0] != "plant") continue;
    ++kinds[f[3]];
    int number = std::stoi(f[2]);
    planted_lines.insert({f[1], number});
    std::vector<std::string> lines = SplitLines(ReadFileOrDie(a / ("text/" + f[1])));
    ASSERT_LE(number, static_cast<int>(lines.size()));
    const std::string& text = lines[number - 1];
    std::set<std::string> words;
    std::stringstream split(text);
    for (std::string w; split >> w;) words.insert(w);
    EXPECT_TRUE(words.count(f[4]))
        << "plant '" << f[4] << "' missing from " << f[1] << ":" << number;
    EXPECT_EQ(text.find(pattern) != std::string::npos, f[3] == "exact") << text;
  }
  ASSERT_EQ(pattern.size(), 10u);
  EXPECT_EQ(kinds["exact"], 10);  // files / 4 of each kind
  EXPECT_EQ(kinds["approx"], 10);
  EXPECT_EQ(kinds["decoy"], 10);
  // Outside the planted lines, no character of the pattern's alphabet appears at all.
  for (const auto& [name, contents] : ReadTree(a / "text")) {
    std::vector<std::string> lines = SplitLines(contents);
    for (size_t i = 0; i < lines.size(); ++i) {
      if (planted_lines.count({name, static_cast<int>(i + 1)})) continue;
      for (char c : lines[i]) {
        ASSERT_FALSE(std::isupper(static_cast<unsigned char>(c)) ||
                     std::isdigit(static_cast<unsigned char>(c)))
            << name << ":" << i + 1;
      }
    }
  }
}

TEST(GeneratorsTest, StampSkipsRegenerationUntilParametersChange) {
  TempDir dir;
  SampleParams params;
  params.dir = dir.path();
  params.samples = 20;
  params.total_bytes = 100 * 1024;
  Result<GenerateResult> first = GenerateSamples(params, false);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->cached);
  const std::string sample = dir / "samples/c003/s000003.smp";
  int64_t mtime = MtimeNanos(sample);
  std::string before = ReadFileOrDie(sample);

  Result<GenerateResult> second = GenerateSamples(params, false);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->cached);
  EXPECT_EQ(second->summary, first->summary);
  EXPECT_EQ(MtimeNanos(sample), mtime);

  params.seed = 2;  // a different data set: regenerated, different bytes
  Result<GenerateResult> third = GenerateSamples(params, false);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->cached);
  EXPECT_NE(ReadFileOrDie(sample), before);

  params.samples = 10;  // fewer samples: the old ones are gone
  ASSERT_TRUE(GenerateSamples(params, false).ok());
  EXPECT_EQ(ReadTree(dir / "samples").size(), 10u);

  Result<GenerateResult> forced = GenerateSamples(params, true);
  ASSERT_TRUE(forced.ok());
  EXPECT_FALSE(forced->cached);
}

TEST(GeneratorsTest, ObjectsAndVolumeAreDeterministic) {
  TempDir a, b;
  ObjectParams objects;
  objects.objects = 6;
  objects.total_bytes = 256 * 1024;
  VolumeParams volume;
  volume.dim = 16;
  volume.brick = 4;
  for (const TempDir* dir : {&a, &b}) {
    objects.dir = dir->path();
    volume.dir = dir->path();
    ASSERT_TRUE(GenerateObjects(objects, false).ok());
    ASSERT_TRUE(GenerateVolume(volume, false).ok());
  }
  EXPECT_EQ(ReadTree(a / "objects"), ReadTree(b / "objects"));
  EXPECT_EQ(ReadFileOrDie(a / "volume.tvol"), ReadFileOrDie(b / "volume.tvol"));
  EXPECT_EQ(ReadFileOrDie(a / "volume.tvol").size(), 4096u + 16 * 16 * 16 * 4);
  EXPECT_EQ(ReadTree(a / "objects").size(), 6u);
}

TEST(GeneratorsTest, RejectsImpossibleParameters) {
  TempDir dir;
  TextParams text;
  text.dir = dir.path();
  text.pattern_length = 3;  // decoys need errors + 2 characters
  EXPECT_EQ(GenerateText(text, false).error(), EINVAL);
  VolumeParams volume;
  volume.dir = dir.path();
  volume.dim = 30;  // not a multiple of the brick
  EXPECT_EQ(GenerateVolume(volume, false).error(), EINVAL);
}

}  // namespace
}  // namespace tipfs::bench
