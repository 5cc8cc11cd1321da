// tipfs-bench-agrep: the agrep workload of Chang & Gibson (OSDI 1999) and Patterson et al.
// (SOSP 1995). Searches every file under the given paths for lines within k errors of a pattern,
// reading each file in order the way agrep does (open, read() fixed-size chunks, search, close),
// and prints the matching lines as "relative/path:line-number:line" plus one summary line.
//
// Variants (one source): original reads with no hints. manual first discloses every file it is
// about to search (TIPFS_IOC_HINT_PATHS, whole files, in search order, batched), as the paper's
// hinted agrep did: agrep knows its whole file list from the command line before it reads a byte.
// The output is the same byte for byte; only stderr differs (timing, hint counters, warnings).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/workloads/approximate_matcher.h"
#include "bench/workloads/bench_common.h"
#include "bench/workloads/hint_window.h"

namespace tipfs::bench {
namespace {

constexpr char kProgram[] = "tipfs-bench-agrep";

struct Options {
  Variant variant = Variant::kOriginal;
  std::string pattern;
  int errors = 2;
  uint64_t chunk_bytes = 64 * 1024;
  uint64_t max_files = 0;  // 0: all
  std::vector<std::string> paths;
};

// One file to search: where to open it, and how to name it in the output.
struct SearchFile {
  std::string open_path;
  std::string display_name;
};

Result<std::vector<SearchFile>> CollectFiles(const Options& options) {
  std::vector<SearchFile> files;
  for (const std::string& root : options.paths) {
    struct stat st;
    if (::stat(root.c_str(), &st) != 0) return ErrnoStatus("stat " + root);
    if (!S_ISDIR(st.st_mode)) {
      files.push_back({root, root});
      continue;
    }
    Result<std::vector<std::string>> listed = ListFilesSorted(root);
    if (!listed.ok()) return listed.status();
    for (std::string& relative : *listed) {
      // Names relative to the directory argument, so a search of the same tree on a backing
      // directory and on a tipfs mount prints the same text.
      files.push_back({root + "/" + relative, relative});
    }
  }
  if (options.max_files > 0 && files.size() > options.max_files) files.resize(options.max_files);
  return files;
}

// Streams lines of a file through the matcher, reading fixed-size chunks with read(2).
class FileSearcher {
 public:
  FileSearcher(const ApproximateMatcher& matcher, size_t chunk_bytes)
      : matcher_(matcher), chunk_bytes_(chunk_bytes), buffer_(chunk_bytes * 2) {}

  // Searches one file; `on_chunk(bytes)` is told of every read so hints can be accounted.
  template <typename OnChunk>
  Status Search(const SearchFile& file, IoCounters* io, OnChunk on_chunk) {
    int fd = ::open(file.open_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open " + file.open_path);
    ++io->files_opened;
    size_t carried = 0;  // bytes of an unfinished line kept at the front of buffer_
    uint64_t line_number = 0;
    Status status;
    for (;;) {
      if (buffer_.size() < carried + chunk_bytes_) buffer_.resize(carried + chunk_bytes_);
      ssize_t got = ::read(fd, buffer_.data() + carried, chunk_bytes_);
      if (got < 0) {
        if (errno == EINTR) continue;
        status = ErrnoStatus("read " + file.open_path);
        break;
      }
      ++io->read_calls;
      io->bytes_read += static_cast<uint64_t>(got);
      on_chunk(static_cast<uint64_t>(got));
      size_t filled = carried + static_cast<size_t>(got);
      if (got == 0) {
        if (carried > 0) SearchLine(file, ++line_number, buffer_.data(), carried);
        break;
      }
      const char* begin = buffer_.data();
      const char* end = begin + filled;
      const char* line = begin;
      while (const char* newline = static_cast<const char*>(
                 std::memchr(line, '\n', static_cast<size_t>(end - line)))) {
        SearchLine(file, ++line_number, line, static_cast<size_t>(newline - line));
        line = newline + 1;
      }
      carried = static_cast<size_t>(end - line);
      std::memmove(buffer_.data(), line, carried);
    }
    ::close(fd);
    lines_ += line_number;
    return status;
  }

  uint64_t lines() const { return lines_; }
  uint64_t matching_lines() const { return matching_lines_; }

 private:
  void SearchLine(const SearchFile& file, uint64_t line_number, const char* text, size_t size) {
    if (!matcher_.Matches(std::string_view(text, size))) return;
    ++matching_lines_;
    std::printf("%s:%llu:", file.display_name.c_str(),
                static_cast<unsigned long long>(line_number));
    std::fwrite(text, 1, size, stdout);
    std::fputc('\n', stdout);
  }

  const ApproximateMatcher& matcher_;
  size_t chunk_bytes_;
  std::vector<char> buffer_;
  uint64_t lines_ = 0;
  uint64_t matching_lines_ = 0;
};

// The manual variant's disclosure: every file, whole, in the order it will be searched.
// Paths must be absolute inside the mount, so each is resolved once; sizes come from stat(2)
// (metadata only) because the window accounts outstanding bytes against the mount's cap.
Status DiscloseAllFiles(const std::vector<SearchFile>& files, HintWindow* window) {
  for (const SearchFile& file : files) {
    Result<std::string> absolute = AbsolutePath(file.open_path);
    if (!absolute.ok()) return absolute.status();
    struct stat st;
    if (::stat(absolute->c_str(), &st) != 0) return ErrnoStatus("stat " + *absolute);
    window->AddPath(*absolute, 0, static_cast<uint64_t>(st.st_size));
    if (!window->active()) break;
  }
  window->Disclose();
  return Status::OK();
}

int Run(const Options& options) {
  RunReport report(kProgram, options.variant);
  Result<ApproximateMatcher> matcher = ApproximateMatcher::Create(options.pattern, options.errors);
  if (!matcher.ok()) return Fail(kProgram, matcher.status());
  Result<std::vector<SearchFile>> files = CollectFiles(options);
  if (!files.ok()) return Fail(kProgram, files.status());

  int mount_fd = -1;
  std::optional<HintWindow> window;
  if (options.variant == Variant::kManual) {
    mount_fd = ::open(options.paths.front().c_str(), O_RDONLY | O_CLOEXEC);
    if (mount_fd < 0) return Fail(kProgram, ErrnoStatus("open " + options.paths.front()));
    window.emplace(kProgram, mount_fd);
    Status st = DiscloseAllFiles(*files, &*window);
    if (!st.ok()) return Fail(kProgram, st);
  }

  IoCounters io;
  FileSearcher searcher(*matcher, options.chunk_bytes);
  for (const SearchFile& file : *files) {
    Status st = searcher.Search(file, &io, [&](uint64_t bytes) {
      if (window) window->Consumed(bytes);
    });
    if (!st.ok()) return Fail(kProgram, st);
  }
  std::printf("agrep: files=%zu bytes=%llu lines=%llu matching_lines=%llu errors=%d pattern=%s\n",
              files->size(), static_cast<unsigned long long>(io.bytes_read),
              static_cast<unsigned long long>(searcher.lines()),
              static_cast<unsigned long long>(searcher.matching_lines()), options.errors,
              options.pattern.c_str());
  if (mount_fd >= 0) ::close(mount_fd);
  return FinishRun(kProgram, report, io, window ? window->Summary() : "");
}

}  // namespace
}  // namespace tipfs::bench

int main(int argc, char** argv) {
  using namespace tipfs::bench;
  Options options;
  CLI::App app{
      "agrep-like approximate search over many files (tipfs benchmark workload).\n"
      "Prints matching lines as path:line:text, then a summary line; timing goes to stderr."};
  AddVariantOption(app, &options.variant);
  app.add_option("-p,--pattern", options.pattern, "literal pattern, 1..63 bytes")->required();
  app.add_option("-k,--errors", options.errors, "maximum edit distance (0..8)")
      ->check(CLI::Range(0, 8))
      ->capture_default_str();
  AddSizeOption(app, "--chunk", &options.chunk_bytes, "bytes per read() call (default 64K)");
  app.add_option("--files", options.max_files, "search only the first N files (0: all)")
      ->capture_default_str();
  app.add_option("paths", options.paths, "files or directories (searched recursively, sorted)")
      ->required();
  int exit_code = ParseCommandLine(app, argc, argv);
  if (exit_code >= 0) return exit_code;
  if (options.chunk_bytes == 0)
    return Fail("tipfs-bench-agrep", tipfs::Status::InvalidArgument("--chunk must be > 0"));
  return Run(options);
}
