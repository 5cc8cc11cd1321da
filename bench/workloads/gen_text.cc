// The agrep / GNU grep / tre-agrep data set (see generators.h for the guarantees).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/workloads/bench_common.h"
#include "bench/workloads/generators.h"

namespace tipfs::bench {
namespace {

constexpr char kPatternAlphabet[] = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
constexpr uint64_t kFilesPerFolder = 64;
constexpr size_t kVocabulary = 4096;
constexpr size_t kZipfTableSize = 1 << 16;

enum class PlantKind { kExact, kApproximate, kDecoy };
const char* PlantKindName(PlantKind k) {
  return k == PlantKind::kExact ? "exact" : k == PlantKind::kApproximate ? "approx" : "decoy";
}

struct Plant {
  double position;  // fraction of the file's target size where the planted line goes
  PlantKind kind;
};

char RandomLowercase(Rng& rng) { return static_cast<char>('a' + rng.Below(26)); }

// A word list and a table that draws from it with Zipf-like frequencies (rank r has weight
// 1 / (r + 1)), so the text has the skewed letter and word statistics of prose.
class WordSource {
 public:
  explicit WordSource(Rng& rng) {
    words_.reserve(kVocabulary);
    for (size_t w = 0; w < kVocabulary; ++w) {
      // Short words are frequent: take the smaller of two draws.
      size_t length = 1 + std::min(rng.Below(10), rng.Below(12));
      std::string word;
      for (size_t c = 0; c < length; ++c) word.push_back(RandomLowercase(rng));
      words_.push_back(std::move(word));
    }
    double harmonic = 0;
    for (size_t r = 0; r < kVocabulary; ++r) harmonic += 1.0 / static_cast<double>(r + 1);
    table_.reserve(kZipfTableSize);
    for (size_t r = 0; r < kVocabulary && table_.size() < kZipfTableSize; ++r) {
      double share = (1.0 / static_cast<double>(r + 1)) / harmonic;
      size_t slots = std::max<size_t>(1, static_cast<size_t>(share * kZipfTableSize));
      for (size_t s = 0; s < slots && table_.size() < kZipfTableSize; ++s) {
        table_.push_back(static_cast<uint32_t>(r));
      }
    }
  }
  const std::string& Draw(Rng& rng) const { return words_[table_[rng.Below(table_.size())]]; }

 private:
  std::vector<std::string> words_;
  std::vector<uint32_t> table_;
};

// The text planted for one line. Approximate plants get 1..errors edits that use lowercase
// letters only, with insertions strictly inside, so the exact pattern never appears in them;
// decoys get errors + 1 substitutions at distinct places, leaving too few pattern characters
// for any alignment within `errors` edits.
std::string PlantText(const std::string& pattern, uint32_t errors, PlantKind kind, Rng& rng) {
  std::string text = pattern;
  if (kind == PlantKind::kApproximate) {
    uint64_t edits = 1 + rng.Below(errors);
    for (uint64_t e = 0; e < edits; ++e) {
      uint64_t op = rng.Below(3);
      if (op == 0) {
        text[rng.Below(text.size())] = RandomLowercase(rng);
      } else if (op == 1 || text.size() <= 2) {
        text.insert(text.begin() + static_cast<long>(1 + rng.Below(text.size() - 1)),
                    RandomLowercase(rng));
      } else {
        text.erase(text.begin() + static_cast<long>(rng.Below(text.size())));
      }
    }
  } else if (kind == PlantKind::kDecoy) {
    std::vector<size_t> positions(text.size());
    for (size_t i = 0; i < positions.size(); ++i) positions[i] = i;
    for (uint32_t e = 0; e <= errors; ++e) {
      size_t pick = e + rng.Below(positions.size() - e);
      std::swap(positions[e], positions[pick]);
      text[positions[e]] = RandomLowercase(rng);
    }
  }
  return text;
}

// One line of 20..89 characters of words, with the plant (if any) as one of its words.
void AppendLine(const WordSource& words, const std::string* plant, Rng& rng, std::string* out) {
  size_t target = 20 + rng.Below(70);
  size_t start = out->size();
  size_t plant_after_words = plant ? rng.Below(8) : 0;
  size_t word_count = 0;
  bool planted = plant == nullptr;
  while (out->size() - start < target || !planted) {
    if (word_count > 0) out->push_back(' ');
    if (!planted && word_count == plant_after_words) {
      out->append(*plant);
      planted = true;
    } else {
      out->append(words.Draw(rng));
      uint64_t r = rng.Below(16);
      if (r == 0) out->push_back(',');
      if (r == 1) out->push_back('.');
    }
    ++word_count;
  }
  out->push_back('\n');
}

std::string TextParamString(const TextParams& p, uint64_t plants) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "agrep v1 files=%llu total=%llu seed=%llu pattern_length=%u errors=%u plants=%llu",
                static_cast<unsigned long long>(p.files),
                static_cast<unsigned long long>(p.total_bytes),
                static_cast<unsigned long long>(p.seed), p.pattern_length, p.errors,
                static_cast<unsigned long long>(plants));
  return buf;
}

}  // namespace

Result<GenerateResult> GenerateText(const TextParams& p, bool force) {
  if (p.files == 0) return Status::InvalidArgument("--files must be at least 1");
  if (p.errors > 8) return Status::InvalidArgument("--errors must be 0..8");
  if (p.pattern_length < p.errors + 2 || p.pattern_length > 63) {
    return Status::InvalidArgument("--pattern-length must be errors+2 .. 63");
  }
  const uint64_t plants = p.plants > 0 ? p.plants : std::max<uint64_t>(1, p.files / 4);
  const std::string params = TextParamString(p, plants);
  Rng rng(DeriveSeed(p.seed, 1));
  std::string pattern;
  for (uint32_t i = 0; i < p.pattern_length; ++i) {
    pattern.push_back(kPatternAlphabet[rng.Below(sizeof kPatternAlphabet - 1)]);
  }
  Result<GenerateResult> result = StartGeneration(p.dir, "agrep", params, "text", force);
  if (!result.ok()) return result;
  result->summary += " pattern=" + pattern;
  if (result->cached) return result;
  if (::mkdir((p.dir + "/text").c_str(), 0755) != 0) return ErrnoStatus("mkdir " + p.dir + "/text");

  WordSource words(rng);
  std::vector<uint64_t> sizes =
      LogNormalSizes(p.files, p.total_bytes, 1.0, 64, DeriveSeed(p.seed, 2));
  std::vector<std::vector<Plant>> plants_by_file(p.files);
  for (PlantKind kind : {PlantKind::kExact, PlantKind::kApproximate, PlantKind::kDecoy}) {
    for (uint64_t i = 0; i < plants; ++i) {
      plants_by_file[rng.Below(p.files)].push_back(Plant{rng.Uniform01(), kind});
    }
  }

  std::string manifest = "# " + params + "\npattern " + pattern + "\nerrors " +
                         std::to_string(p.errors) + "\nfiles " + std::to_string(p.files) + "\n";
  std::string text;
  uint64_t total_written = 0;
  for (uint64_t f = 0; f < p.files; ++f) {
    char folder[32], name[64];
    std::snprintf(folder, sizeof folder, "d%02llu",
                  static_cast<unsigned long long>(f / kFilesPerFolder));
    std::snprintf(name, sizeof name, "%s/f%05llu.txt", folder, static_cast<unsigned long long>(f));
    if (f % kFilesPerFolder == 0 && ::mkdir((p.dir + "/text/" + folder).c_str(), 0755) != 0) {
      return ErrnoStatus("mkdir " + p.dir + "/text/" + folder);
    }
    std::vector<Plant>& file_plants = plants_by_file[f];
    std::sort(file_plants.begin(), file_plants.end(),
              [](const Plant& a, const Plant& b) { return a.position < b.position; });
    Rng file_rng(DeriveSeed(p.seed, 1000 + f));
    text.clear();
    size_t next_plant = 0;
    uint64_t line_number = 0;
    const double target = static_cast<double>(sizes[f]);
    while (text.size() < sizes[f] || next_plant < file_plants.size()) {
      std::string plant_text;
      bool plant_here =
          next_plant < file_plants.size() &&
          (file_plants[next_plant].position * target <= static_cast<double>(text.size()) ||
           text.size() >= sizes[f]);
      ++line_number;
      if (plant_here) {
        PlantKind kind = file_plants[next_plant++].kind;
        plant_text = PlantText(pattern, p.errors, kind, file_rng);
        manifest += "plant " + std::string(name) + " " + std::to_string(line_number) + " " +
                    PlantKindName(kind) + " " + plant_text + "\n";
      }
      AppendLine(words, plant_here ? &plant_text : nullptr, file_rng, &text);
    }
    std::string path = p.dir + "/text/" + name;
    TIPFS_RETURN_IF_ERROR(WriteWholeFile(path, text.data(), text.size()));
    total_written += text.size();
  }
  manifest += "bytes " + std::to_string(total_written) + "\n";
  TIPFS_RETURN_IF_ERROR(WriteFileAtomic(p.dir + "/agrep.manifest", manifest));
  TIPFS_RETURN_IF_ERROR(WriteStamp(p.dir, "agrep", params));
  std::fprintf(stderr, "agrep data: %llu bytes in %llu files\n",
               static_cast<unsigned long long>(total_written),
               static_cast<unsigned long long>(p.files));
  return result;
}

}  // namespace tipfs::bench
