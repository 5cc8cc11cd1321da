// The gnuld data set: TOBJ objects (object_format.h) that link (see generators.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/workloads/bench_common.h"
#include "bench/workloads/generators.h"
#include "bench/workloads/object_format.h"

namespace tipfs::bench {
namespace {

using namespace tobj;

// Share of an object's bytes per part, roughly those of a 1990s object compiled with -g, where
// debugging information is the largest part (the paper's 562 objects averaged 107 KB).
constexpr double kTextShare = 0.20, kDataShare = 0.05, kRodataShare = 0.06, kDebugShare = 0.35;
constexpr double kBssShare = 0.03;
constexpr double kRelTextShare = 0.05, kRelDataShare = 0.02, kRelDebugShare = 0.07;
constexpr double kSymtabShare = 0.09;

// Section indices in the objects this generator writes (readers follow the table instead).
enum : uint32_t {
  kSecNull,
  kSecText,
  kSecData,
  kSecRodata,
  kSecDebug,
  kSecBss,
  kSecRelText,
  kSecRelData,
  kSecRelDebug,
  kSecSymtab,
  kSecStrtab,
  kSectionCount
};

uint64_t Align16(uint64_t v) { return (v + 15) & ~uint64_t{15}; }
uint64_t Share(uint64_t size, double share) {
  return std::max<uint64_t>(64, Align16(static_cast<uint64_t>(static_cast<double>(size) * share)));
}

// Symbol counts of one object follow from its size alone, so every object knows how many
// globals every other object defines before any is generated.
struct ObjectPlan {
  uint64_t size;
  uint64_t symbols;  // including the null symbol 0
  uint64_t globals;  // defined here
  uint64_t undefined;
  uint64_t locals;
};

ObjectPlan PlanObject(uint64_t size, bool alone) {
  ObjectPlan plan;
  plan.size = size;
  plan.symbols = std::max<uint64_t>(16, static_cast<uint64_t>(size * kSymtabShare) / kSymbolBytes);
  plan.globals = std::max<uint64_t>(2, plan.symbols * 3 / 10);
  plan.undefined = alone ? 0 : plan.symbols / 4;
  plan.locals = plan.symbols - 1 - plan.globals - plan.undefined;
  return plan;
}

std::string GlobalName(uint64_t object, uint64_t index) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "_ZN5bench4unit%05llu4funcE%05lluEv",
                static_cast<unsigned long long>(object), static_cast<unsigned long long>(index));
  return buf;
}

struct Totals {
  uint64_t bytes = 0, symbols = 0, globals = 0, undefined = 0, relocations = 0;
};

// Builds object `index` in memory: contents, relocations, symbols, strings, section table.
std::vector<unsigned char> BuildObject(uint64_t index, const std::vector<ObjectPlan>& plans,
                                       uint64_t seed, Totals* totals) {
  const ObjectPlan& plan = plans[index];
  Rng rng(DeriveSeed(seed, 5000 + index));
  Section sections[kSectionCount];
  const uint64_t content_size[] = {0,
                                   Share(plan.size, kTextShare),
                                   Share(plan.size, kDataShare),
                                   Share(plan.size, kRodataShare),
                                   Share(plan.size, kDebugShare),
                                   Share(plan.size, kBssShare)};
  const uint32_t content_type[] = {kNull, kText, kData, kRodata, kDebug, kBss};
  for (uint32_t s = kSecText; s <= kSecBss; ++s) {
    sections[s].type = content_type[s];
    sections[s].size = content_size[s];
    sections[s].align = 16;
  }
  // Relocation counts.
  const uint32_t rel_target[] = {kSecText, kSecData, kSecDebug};
  const double rel_share[] = {kRelTextShare, kRelDataShare, kRelDebugShare};
  for (int r = 0; r < 3; ++r) {
    Section& rel = sections[kSecRelText + r];
    rel.type = kRelocations;
    rel.info = rel_target[r];
    rel.link = kSecSymtab;
    rel.align = 16;
    rel.entries =
        std::max<uint64_t>(1, static_cast<uint64_t>(plan.size * rel_share[r]) / kRelocationBytes);
    rel.size = rel.entries * kRelocationBytes;
  }
  // Symbols and their names.
  std::string strtab(1, '\0');
  std::vector<Symbol> symbols(1);  // symbol 0: null
  auto add_name = [&strtab](const std::string& name, Symbol* symbol) {
    symbol->name_offset = static_cast<uint32_t>(strtab.size());
    symbol->name_length = static_cast<uint32_t>(name.size());
    strtab += name;
    strtab.push_back('\0');
  };
  auto defined_in = [&](Symbol* symbol) {
    const uint32_t choices[] = {kSecText, kSecText, kSecData, kSecRodata, kSecBss};
    symbol->section = static_cast<uint16_t>(choices[rng.Below(5)]);
    symbol->value = rng.Below(sections[symbol->section].size / 16) * 16;
  };
  for (uint64_t l = 0; l < plan.locals; ++l) {
    Symbol symbol;
    std::string name = ".L" + std::to_string(l) + "_";
    for (uint64_t c = 0, n = 4 + rng.Below(20); c < n; ++c) name.push_back('a' + rng.Below(26));
    add_name(name, &symbol);
    defined_in(&symbol);
    symbols.push_back(symbol);
  }
  for (uint64_t g = 0; g < plan.globals; ++g) {
    Symbol symbol;
    add_name(GlobalName(index, g), &symbol);
    symbol.binding = kGlobal;
    defined_in(&symbol);
    symbols.push_back(symbol);
  }
  for (uint64_t u = 0; u < plan.undefined; ++u) {
    uint64_t other = rng.Below(plans.size() - 1);
    if (other >= index) ++other;
    Symbol symbol;
    add_name(GlobalName(other, rng.Below(plans[other].globals)), &symbol);
    symbol.binding = kGlobal;
    symbols.push_back(symbol);
  }
  sections[kSecSymtab] =
      Section{kSymtab, kSecStrtab, 0, 16, 0, symbols.size() * kSymbolBytes, symbols.size()};
  sections[kSecStrtab] = Section{kStrtab, 0, 0, 1, 0, strtab.size(), 0};

  // Place the parts: header, contents, relocations, symtab, strtab, section table.
  uint64_t offset = kHeaderBytes;
  for (uint32_t s = kSecText; s < kSectionCount; ++s) {
    if (s == kSecBss) continue;
    offset = Align16(offset);
    sections[s].offset = offset;
    offset += sections[s].size;
  }
  const uint64_t table_offset = Align16(offset);
  const uint64_t file_size = table_offset + kSectionCount * kSectionBytes;
  std::vector<unsigned char> image(file_size, 0);
  EncodeHeader(Header{kSectionCount, table_offset, file_size}, image.data());
  for (uint32_t s = kSecText; s <= kSecDebug; ++s) {
    rng.Fill(image.data() + sections[s].offset, sections[s].size);
  }
  for (int r = 0; r < 3; ++r) {
    const Section& rel = sections[kSecRelText + r];
    const uint64_t target_size = sections[rel.info].size;
    for (uint64_t e = 0; e < rel.entries; ++e) {
      Relocation relocation;
      uint64_t pick = rng.Below(10);
      relocation.type = rel.info == kSecText   ? (pick < 8 ? kPc32 : kAbs64)
                        : rel.info == kSecData ? kAbs64
                                               : (pick < 7 ? kAbs32 : kAbs64);
      relocation.offset = rng.Below(target_size - 7) & ~uint64_t{7};
      relocation.symbol = static_cast<uint32_t>(1 + rng.Below(symbols.size() - 1));
      relocation.addend = static_cast<int64_t>(rng.Below(129)) - 64;
      EncodeRelocation(relocation, image.data() + rel.offset + e * kRelocationBytes);
    }
    totals->relocations += rel.entries;
  }
  for (size_t i = 0; i < symbols.size(); ++i) {
    EncodeSymbol(symbols[i], image.data() + sections[kSecSymtab].offset + i * kSymbolBytes);
  }
  std::copy(strtab.begin(), strtab.end(), image.begin() + sections[kSecStrtab].offset);
  for (uint32_t s = 0; s < kSectionCount; ++s) {
    EncodeSection(sections[s], image.data() + table_offset + s * kSectionBytes);
  }
  totals->bytes += file_size;
  totals->symbols += symbols.size();
  totals->globals += plan.globals;
  totals->undefined += plan.undefined;
  return image;
}

}  // namespace

Result<GenerateResult> GenerateObjects(const ObjectParams& p, bool force) {
  if (p.objects == 0) return Status::InvalidArgument("--objects must be at least 1");
  char buf[160];
  std::snprintf(buf, sizeof buf, "gnuld v1 objects=%llu total=%llu seed=%llu",
                static_cast<unsigned long long>(p.objects),
                static_cast<unsigned long long>(p.total_bytes),
                static_cast<unsigned long long>(p.seed));
  const std::string params = buf;
  Result<GenerateResult> result = StartGeneration(p.dir, "gnuld", params, "objects", force);
  if (!result.ok() || result->cached) return result;
  const std::string folder = p.dir + "/objects";
  if (::mkdir(folder.c_str(), 0755) != 0) return ErrnoStatus("mkdir " + folder);

  // Objects smaller than 8 KiB would be all minimum-sized parts; the spread is milder than for
  // text files because compilation units are more alike than documents.
  std::vector<uint64_t> sizes =
      LogNormalSizes(p.objects, p.total_bytes, 0.8, 8192, DeriveSeed(p.seed, 3));
  std::vector<ObjectPlan> plans;
  for (uint64_t size : sizes) plans.push_back(PlanObject(size, p.objects == 1));

  Totals totals;
  for (uint64_t i = 0; i < p.objects; ++i) {
    std::vector<unsigned char> image = BuildObject(i, plans, p.seed, &totals);
    char name[32];
    std::snprintf(name, sizeof name, "o%05llu.tobj", static_cast<unsigned long long>(i));
    std::string path = folder + "/" + name;
    TIPFS_RETURN_IF_ERROR(WriteWholeFile(path, image.data(), image.size()));
  }
  std::snprintf(buf, sizeof buf,
                "objects %llu\nbytes %llu\nsymbols %llu\nglobals %llu\nundefined %llu\n"
                "relocations %llu\n",
                static_cast<unsigned long long>(p.objects),
                static_cast<unsigned long long>(totals.bytes),
                static_cast<unsigned long long>(totals.symbols),
                static_cast<unsigned long long>(totals.globals),
                static_cast<unsigned long long>(totals.undefined),
                static_cast<unsigned long long>(totals.relocations));
  TIPFS_RETURN_IF_ERROR(WriteFileAtomic(p.dir + "/gnuld.manifest", "# " + params + "\n" + buf));
  TIPFS_RETURN_IF_ERROR(WriteStamp(p.dir, "gnuld", params));
  return result;
}

}  // namespace tipfs::bench
