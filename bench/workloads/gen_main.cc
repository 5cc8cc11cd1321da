// tipfs-bench-gen: makes the bench workloads' data sets, deterministic from --seed and cached
// (see generators.h). One line describing the data set goes to stdout; notes to stderr.
//   tipfs-bench-gen agrep --dir D --files 1349 --total 18M --seed 1
//   tipfs-bench-gen gnuld --dir D --objects 562 --total 60M
//   tipfs-bench-gen xdataslice --dir D [--dim 256 | --scale paper]
//   tipfs-bench-gen loader --dir D --samples 4096 --total 64M
//   tipfs-bench-gen csrc --dir D --files 562 --compile
#include <cstdio>
#include <string>

#include "bench/workloads/bench_common.h"
#include "bench/workloads/generators.h"

namespace {

constexpr char kProgram[] = "tipfs-bench-gen";

int Report(const tipfs::Result<tipfs::bench::GenerateResult>& result, const std::string& dir) {
  if (!result.ok()) return tipfs::bench::Fail(kProgram, result.status());
  std::printf("%s\n", result->summary.c_str());
  std::fprintf(stderr, "%s: %s in %s\n", kProgram,
               result->cached ? "cached (stamp matches), nothing written" : "generated",
               dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tipfs::bench;
  CLI::App app{"Generates the tipfs benchmark data sets (deterministic, cached by a stamp)."};
  app.require_subcommand(1);
  bool force = false;
  app.add_flag("--force", force, "regenerate even when the stamp matches");

  TextParams text;
  CLI::App* agrep = app.add_subcommand("agrep", "text files for agrep, GNU grep and tre-agrep");
  agrep->add_option("--dir", text.dir, "output directory")->required();
  agrep->add_option("--files", text.files, "number of files")->capture_default_str();
  AddSizeOption(*agrep, "--total", &text.total_bytes, "total bytes (default 18M)");
  agrep->add_option("--seed", text.seed)->capture_default_str();
  agrep->add_option("--pattern-length", text.pattern_length)->capture_default_str();
  agrep->add_option("--errors", text.errors, "edits allowed by the search")->capture_default_str();
  agrep->add_option("--plants", text.plants, "planted lines per kind (0: files/4)")
      ->capture_default_str();

  ObjectParams objects;
  CLI::App* gnuld = app.add_subcommand("gnuld", "TOBJ object files for the gnuld workload");
  gnuld->add_option("--dir", objects.dir, "output directory")->required();
  gnuld->add_option("--objects", objects.objects)->capture_default_str();
  AddSizeOption(*gnuld, "--total", &objects.total_bytes, "total bytes (default 60M)");
  gnuld->add_option("--seed", objects.seed)->capture_default_str();

  VolumeParams volume;
  std::string scale = "default";
  CLI::App* xds = app.add_subcommand("xdataslice", "the 3-D volume for xdataslice");
  xds->add_option("--dir", volume.dir, "output directory")->required();
  xds->add_option("--dim", volume.dim, "voxels per axis (default 256)");
  xds->add_option("--scale", scale, "default: 256^3 (64 MiB); paper: 512^3 (512 MiB)")
      ->check(CLI::IsMember({"default", "paper"}));
  xds->add_option("--brick", volume.brick, "voxels per brick axis")->capture_default_str();
  xds->add_option("--seed", volume.seed)->capture_default_str();

  SampleParams samples;
  CLI::App* loader = app.add_subcommand("loader", "training samples for the loader workload");
  loader->add_option("--dir", samples.dir, "output directory")->required();
  loader->add_option("--samples", samples.samples)->capture_default_str();
  AddSizeOption(*loader, "--total", &samples.total_bytes, "total bytes (default 64M)");
  loader->add_option("--classes", samples.classes)->capture_default_str();
  loader->add_option("--seed", samples.seed)->capture_default_str();

  CSourceParams csrc;
  CLI::App* c = app.add_subcommand("csrc", "C sources (and objects) for the real GNU ld");
  c->add_option("--dir", csrc.dir, "output directory (keep it off the mount with --compile)")
      ->required();
  c->add_option("--files", csrc.files, "translation units")->capture_default_str();
  c->add_option("--functions", csrc.functions, "functions per unit")->capture_default_str();
  c->add_option("--table-words", csrc.table_words, "constant words per unit")
      ->capture_default_str();
  c->add_option("--seed", csrc.seed)->capture_default_str();
  c->add_flag("--compile", csrc.compile, "compile each unit with CC -c -g -O1");
  c->add_option("--cc", csrc.compiler, "compiler")->capture_default_str();
  c->add_option("--jobs", csrc.jobs, "compilers at once")->capture_default_str();

  int exit_code = ParseCommandLine(app, argc, argv);
  if (exit_code >= 0) return exit_code;
  if (agrep->parsed()) return Report(GenerateText(text, force), text.dir);
  if (gnuld->parsed()) return Report(GenerateObjects(objects, force), objects.dir);
  if (xds->parsed()) {
    if (xds->count("--dim") == 0 && scale == "paper") volume.dim = 512;
    return Report(GenerateVolume(volume, force), volume.dir);
  }
  if (loader->parsed()) return Report(GenerateSamples(samples, force), samples.dir);
  return Report(GenerateCSources(csrc, force), csrc.dir);
}
