// tipfs-bench-gnuld: the Gnuld workload of Chang & Gibson (OSDI 1999) and Patterson et al.
// (SOSP 1995): links the TOBJ objects given (files, or directories of *.tobj taken in sorted
// order) into a TEXE image at -o, in GNU ld's two passes (gnuld_linker.h), and prints the link's
// totals and a digest of the image to stdout; timing goes to stderr.
//
// Variants (one source):
//   original: per object, pass 1 reads the header, then the section table, then the symbol and
//     string tables (open, three dependent reads, close); after resolution, pass 2 reads each
//     object's sections and relocations and writes the image. Nothing is hinted.
//   manual: a hand-modified linker in the manner of the paper's (the TIP authors restructured
//     gnuld by hand to disclose what it could; the rounds below are our reconstruction, driven
//     by this format's dependencies). A linker cannot know where an object's symbol table is
//     before it has read the object's header, so pass 1 becomes rounds over all objects, each
//     round disclosing every read it is about to make before making them:
//       round 1: hint the header of every object (by path), then read the headers;
//       round 2: hint every section table (its place is now known), then read them;
//       round 3: hint every symbol table and string table, then read them.
//     After resolution every pass-2 read is known, so pass 2 is hinted as a whole before it
//     starts. Reads are the same bytes as the original's; only their order in pass 1 differs,
//     and the image is byte-identical.
// With --io stdio the objects are read through fseeko()+fread(), as BFD does, instead of
// lseek()+read().
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/workloads/bench_common.h"
#include "bench/workloads/gnuld_linker.h"
#include "bench/workloads/hint_window.h"

namespace tipfs::bench {
namespace {

constexpr char kProgram[] = "tipfs-bench-gnuld";

struct Options {
  Variant variant = Variant::kOriginal;
  std::vector<std::string> inputs;
  std::string output;
  uint64_t max_objects = 0;
  bool allow_undefined = false;
  ObjectIo io = ObjectIo::kReadCalls;
};

Result<std::vector<InputObject>> CollectObjects(const Options& options) {
  std::vector<InputObject> objects;
  for (const std::string& input : options.inputs) {
    struct stat st;
    if (::stat(input.c_str(), &st) != 0) return ErrnoStatus("stat " + input);
    if (!S_ISDIR(st.st_mode)) {
      objects.push_back(InputObject{input, input});
      continue;
    }
    Result<std::vector<std::string>> listed = ListFilesSorted(input);
    if (!listed.ok()) return listed.status();
    for (const std::string& relative : *listed) {
      if (relative.size() < 5 || relative.compare(relative.size() - 5, 5, ".tobj") != 0) continue;
      objects.push_back(InputObject{input + "/" + relative, relative});
    }
  }
  if (options.max_objects > 0 && objects.size() > options.max_objects) {
    objects.resize(options.max_objects);
  }
  if (objects.empty()) return Status::InvalidArgument("no input objects");
  return objects;
}

// Runs `step` on every object, each opened for the step and closed after it.
template <typename Step>
Status ForEachObject(Linker& linker, const Options& options, IoCounters* io, Step step) {
  for (size_t i = 0; i < linker.object_count(); ++i) {
    Result<std::unique_ptr<ObjectReader>> reader =
        ObjectReader::Open(linker.object(i).path, options.io, io);
    if (!reader.ok()) return reader.status();
    TIPFS_RETURN_IF_ERROR(step(i, **reader));
  }
  return Status::OK();
}

// The manual variant's disclosure of one round: `reads(i)` for every object, by absolute path.
template <typename Reads>
Status HintRound(Linker& linker, const std::vector<std::string>& absolute, HintWindow* window,
                 Reads reads) {
  for (size_t i = 0; i < linker.object_count(); ++i) {
    for (const ReadRange& range : reads(i))
      window->AddPath(absolute[i], range.offset, range.length);
  }
  window->Disclose();
  return Status::OK();
}

uint64_t TotalLength(const std::vector<ReadRange>& ranges) {
  uint64_t total = 0;
  for (const ReadRange& r : ranges) total += r.length;
  return total;
}

int Run(const Options& options) {
  RunReport report(kProgram, options.variant);
  Result<std::vector<InputObject>> inputs = CollectObjects(options);
  if (!inputs.ok()) return Fail(kProgram, inputs.status());
  Linker linker(std::move(*inputs), options.allow_undefined);
  IoCounters io;
  Status st;
  std::string hint_summary;

  if (options.variant == Variant::kOriginal) {
    st = ForEachObject(linker, options, &io, [&](size_t i, ObjectReader& reader) {
      TIPFS_RETURN_IF_ERROR(linker.LoadHeader(i, reader));
      TIPFS_RETURN_IF_ERROR(linker.LoadSectionTable(i, reader));
      return linker.LoadSymbols(i, reader);
    });
    if (st.ok()) st = linker.ResolveAndLayout();
    if (st.ok()) st = linker.BeginOutput(options.output);
    if (st.ok()) {
      st = ForEachObject(linker, options, &io, [&](size_t i, ObjectReader& reader) {
        return linker.LinkObject(i, reader);
      });
    }
    if (st.ok()) st = linker.FinishOutput();
    if (!st.ok()) return Fail(kProgram, st);
  } else {
    std::vector<std::string> absolute;
    for (size_t i = 0; i < linker.object_count(); ++i) {
      Result<std::string> path = AbsolutePath(linker.object(i).path);
      if (!path.ok()) return Fail(kProgram, path.status());
      absolute.push_back(*path);
    }
    int mount_fd = ::open(linker.object(0).path.c_str(), O_RDONLY | O_CLOEXEC);
    if (mount_fd < 0) return Fail(kProgram, ErrnoStatus("open " + linker.object(0).path));
    HintWindow window(kProgram, mount_fd);
    // Round 1: headers.
    st = HintRound(linker, absolute, &window,
                   [](size_t) { return std::vector<ReadRange>{Linker::HeaderRead()}; });
    if (st.ok()) {
      st = ForEachObject(linker, options, &io, [&](size_t i, ObjectReader& reader) {
        TIPFS_RETURN_IF_ERROR(linker.LoadHeader(i, reader));
        window.Consumed(Linker::HeaderRead().length);
        return Status::OK();
      });
    }
    // Round 2: section tables, whose places the headers gave.
    if (st.ok()) {
      st = HintRound(linker, absolute, &window,
                     [&](size_t i) { return std::vector<ReadRange>{linker.SectionTableRead(i)}; });
    }
    if (st.ok()) {
      st = ForEachObject(linker, options, &io, [&](size_t i, ObjectReader& reader) {
        TIPFS_RETURN_IF_ERROR(linker.LoadSectionTable(i, reader));
        window.Consumed(linker.SectionTableRead(i).length);
        return Status::OK();
      });
    }
    // Round 3: symbol and string tables, whose places the section tables gave.
    if (st.ok()) {
      st = HintRound(linker, absolute, &window, [&](size_t i) { return linker.SymbolReads(i); });
    }
    if (st.ok()) {
      st = ForEachObject(linker, options, &io, [&](size_t i, ObjectReader& reader) {
        TIPFS_RETURN_IF_ERROR(linker.LoadSymbols(i, reader));
        window.Consumed(TotalLength(linker.SymbolReads(i)));
        return Status::OK();
      });
    }
    if (st.ok()) st = linker.ResolveAndLayout();
    if (st.ok()) st = linker.BeginOutput(options.output);
    // Pass 2: every read is known now; disclose them all, then link.
    if (st.ok()) {
      st = HintRound(linker, absolute, &window, [&](size_t i) { return linker.Pass2Reads(i); });
    }
    if (st.ok()) {
      st = ForEachObject(linker, options, &io, [&](size_t i, ObjectReader& reader) {
        TIPFS_RETURN_IF_ERROR(linker.LinkObject(i, reader));
        window.Consumed(TotalLength(linker.Pass2Reads(i)));
        return Status::OK();
      });
    }
    if (st.ok()) st = linker.FinishOutput();
    ::close(mount_fd);
    if (!st.ok()) return Fail(kProgram, st);
    hint_summary = window.Summary();
  }

  const LinkTotals& t = linker.totals();
  std::printf(
      "gnuld: objects=%llu symbols=%llu globals=%llu undefined_refs=%llu unresolved=%llu "
      "relocations=%llu\n",
      static_cast<unsigned long long>(t.objects), static_cast<unsigned long long>(t.symbols),
      static_cast<unsigned long long>(t.globals), static_cast<unsigned long long>(t.undefined_refs),
      static_cast<unsigned long long>(t.unresolved),
      static_cast<unsigned long long>(t.relocations));
  std::printf("gnuld: text=%llu data=%llu rodata=%llu debug=%llu bss=%llu\n",
              static_cast<unsigned long long>(t.section_size[0]),
              static_cast<unsigned long long>(t.section_size[1]),
              static_cast<unsigned long long>(t.section_size[2]),
              static_cast<unsigned long long>(t.section_size[3]),
              static_cast<unsigned long long>(t.section_size[4]));
  std::printf("gnuld: output_bytes=%llu output_digest=%s\n",
              static_cast<unsigned long long>(t.output_bytes), Hex64(t.output_digest).c_str());
  return FinishRun(kProgram, report, io, hint_summary);
}

}  // namespace
}  // namespace tipfs::bench

int main(int argc, char** argv) {
  using namespace tipfs::bench;
  Options options;
  CLI::App app{
      "gnuld-like linker over TOBJ objects (tipfs benchmark workload).\n"
      "Prints link totals and the image digest; timing goes to stderr."};
  AddVariantOption(app, &options.variant);
  app.add_option("-o,--output", options.output, "the linked image to write")->required();
  app.add_option("--objects", options.max_objects, "link only the first N objects (0: all)")
      ->capture_default_str();
  app.add_flag("--allow-undefined", options.allow_undefined,
               "resolve undefined symbols to 0 instead of failing (with --objects)");
  std::string io = "read";
  app.add_option("--io", io, "read: lseek()+read(); stdio: fseeko()+fread() as BFD")
      ->check(CLI::IsMember({"read", "stdio"}))
      ->capture_default_str();
  app.add_option("inputs", options.inputs, "object files or directories of *.tobj")->required();
  int exit_code = ParseCommandLine(app, argc, argv);
  if (exit_code >= 0) return exit_code;
  options.io = io == "stdio" ? ObjectIo::kStdio : ObjectIo::kReadCalls;
  return Run(options);
}
