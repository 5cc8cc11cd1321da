// The data sets of the bench workloads, generated deterministically from a seed, fast (tens of
// MiB per second), and cached: each generator writes a stamp naming its parameters last, and
// skips the work when the stamp it finds matches (a crash half-way leaves no stamp, so the next
// run starts over). Everything a data set holds lives under one sub-folder of the output
// directory, which a regeneration removes first; several kinds can share one directory:
//   agrep      DIR/text/dNN/fNNNNN.txt              DIR/agrep.manifest
//   gnuld      DIR/objects/oNNNNN.tobj               DIR/gnuld.manifest
//   xdataslice DIR/volume.tvol
//   loader     DIR/samples/cNNN/sNNNNNN.smp          DIR/loader.manifest
//   csrc       DIR/csrc/src/*.c, DIR/csrc/obj/*.o   DIR/csrc.manifest   (for real GNU ld)
// Single-threaded, except that csrc runs up to `jobs` compilers at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace tipfs::bench {

struct GenerateResult {
  bool cached = false;  // the stamp matched; nothing was written
  std::string summary;  // one line for stdout: what the data set holds
};

// Text files for agrep, GNU grep and tre-agrep, with a pattern planted in known lines: exactly
// (found by grep -F too), with 1..errors edits (found only by approximate search), and decoys
// with errors+1 substitutions (found by nothing). The text alphabet is lowercase letters,
// spaces and punctuation; the pattern's is uppercase letters and digits, so no line outside the
// planted ones can match within `errors` edits. The manifest lists every planted line.
struct TextParams {
  std::string dir;
  uint64_t files = 1349;  // the paper's Agrep: 1,349 files, 18.1 MB
  uint64_t total_bytes = 18u << 20;
  uint64_t seed = 1;
  uint32_t pattern_length = 10;
  uint32_t errors = 2;
  uint64_t plants = 0;  // planted lines of each kind (exact, approximate, decoy); 0: files / 4
};
Result<GenerateResult> GenerateText(const TextParams& params, bool force);

// TOBJ objects for the gnuld workload (object_format.h), sizes log-normally spread, every
// undefined symbol defined by exactly one other object, so the set links.
struct ObjectParams {
  std::string dir;
  uint64_t objects = 562;  // the paper's Gnuld: 562 object files, 60.2 MB read
  uint64_t total_bytes = 60u << 20;
  uint64_t seed = 1;
};
Result<GenerateResult> GenerateObjects(const ObjectParams& params, bool force);

// The TVOL volume for xdataslice (volume_format.h).
struct VolumeParams {
  std::string dir;
  uint32_t dim = 256;  // 512 at --scale paper
  uint32_t brick = 8;  // 2 KiB bricks (see volume_format.h)
  uint64_t seed = 1;
};
Result<GenerateResult> GenerateVolume(const VolumeParams& params, bool force);

// TSMP samples for the loader (sample_format.h), in `classes` class folders.
struct SampleParams {
  std::string dir;
  uint64_t samples = 4096;
  uint64_t total_bytes = 64u << 20;
  uint32_t classes = 16;
  uint64_t seed = 1;
};
Result<GenerateResult> GenerateSamples(const SampleParams& params, bool force);

// C sources for the real GNU ld workload: `files` translation units calling each other (each
// function calls one function of a later unit, so the program terminates), plus main.c printing
// a checksum. With `compile`, each is compiled with `cc -c -g` to DIR/csrc/obj (outside the
// mount, once; cached by the stamp). Link with `ld -r -o out.o DIR/csrc/obj/*.o` or
// `cc -o prog DIR/csrc/obj/*.o`.
struct CSourceParams {
  std::string dir;
  uint64_t files = 562;
  // With these defaults 562 units compile (gcc 12, -g -O1) to about 60 MB of objects, the
  // paper's Gnuld input; compiling them takes a minute or two, once.
  uint32_t functions = 40;       // per unit
  uint32_t table_words = 16384;  // mean constant words per unit (fattens .rodata)
  uint64_t seed = 1;
  bool compile = false;
  std::string compiler = "cc";
  uint32_t jobs = 2;
};
Result<GenerateResult> GenerateCSources(const CSourceParams& params, bool force);

// Stamp handling shared by the generators; the stamp is DIR/.tipfs-bench-<kind>.stamp.
// StartGeneration: when the stamp holds `params` (and not `force`), a result with cached = true;
// otherwise it removes the stamp and DIR/`subpath` (recursively) and returns cached = false.
// Either way the summary is `params`.
Result<GenerateResult> StartGeneration(const std::string& dir, const std::string& kind,
                                       const std::string& params, const std::string& subpath,
                                       bool force);
// Written last, when the data set is complete.
Status WriteStamp(const std::string& dir, const std::string& kind, const std::string& params);

// Sizes drawn from a log-normal distribution (sigma as given), scaled so they sum to `total`,
// each at least `minimum`: the skew of real file-size distributions (Agrawal et al., FAST 2007).
std::vector<uint64_t> LogNormalSizes(uint64_t count, uint64_t total, double sigma, uint64_t minimum,
                                     uint64_t seed);

}  // namespace tipfs::bench
