#include "bench/workloads/bench_common.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>

namespace tipfs::bench {

const char* VariantName(Variant v) { return v == Variant::kManual ? "manual" : "original"; }

void AddVariantOption(CLI::App& app, Variant* variant) {
  static const std::map<std::string, Variant> kNames = {{"original", Variant::kOriginal},
                                                        {"manual", Variant::kManual}};
  app.add_option("--variant", *variant,
                 "original: no hints; manual: disclose future reads through the tipfs hint "
                 "ioctls (the speculating variant is the original under `tipfs run`)")
      ->transform(CLI::CheckedTransformer(kNames, CLI::ignore_case))
      ->default_str("original");
}

Result<uint64_t> ParseSize(std::string_view text) {
  std::string s(text);
  if (s.empty()) return Status::InvalidArgument("empty size");
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || errno != 0 || value < 0 || !std::isfinite(value)) {
    return Status::InvalidArgument("not a size: '" + s + "'");
  }
  std::string suffix(end);
  double multiplier = 1;
  if (suffix == "" || suffix == "B") {
    multiplier = 1;
  } else if (suffix == "K" || suffix == "k" || suffix == "KiB") {
    multiplier = 1024.0;
  } else if (suffix == "M" || suffix == "MiB") {
    multiplier = 1024.0 * 1024;
  } else if (suffix == "G" || suffix == "GiB") {
    multiplier = 1024.0 * 1024 * 1024;
  } else {
    return Status::InvalidArgument("unknown size suffix in '" + s + "' (use K, M or G)");
  }
  double bytes = value * multiplier;
  if (bytes > 9.0e18) return Status::InvalidArgument("size too large: '" + s + "'");
  return static_cast<uint64_t>(std::llround(bytes));
}

CLI::Option* AddSizeOption(CLI::App& app, const std::string& name, uint64_t* out,
                           const std::string& description) {
  return app
      .add_option_function<std::string>(
          name,
          [out, name](const std::string& text) {
            Result<uint64_t> size = ParseSize(text);
            if (!size.ok()) throw CLI::ValidationError(name, size.status().message());
            *out = *size;
          },
          description)
      ->type_name("SIZE");
}

int ParseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return -1;
}

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t DeriveSeed(uint64_t seed, uint64_t stream) {
  return Mix64(Mix64(seed) ^ Mix64(stream + 0x5851f42d4c957f2dull));
}

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& s : s_) {
    x += 0x9e3779b97f4a7c15ull;
    s = Mix64(x);
  }
}

static inline uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

uint64_t Rng::Below(uint64_t bound) {
  // Lemire, "Fast random integer generation in an interval", ACM TOMACS 2019.
  unsigned __int128 m = static_cast<unsigned __int128>(Next()) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = -bound % bound;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(Next()) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

double Rng::Uniform01() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

double Rng::Normal() {
  double u1 = Uniform01();
  double u2 = Uniform01();
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

void Rng::Fill(void* data, size_t n) {
  auto* out = static_cast<unsigned char*>(data);
  while (n >= 8) {
    uint64_t v = Next();
    std::memcpy(out, &v, 8);
    out += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t v = Next();
    std::memcpy(out, &v, n);
  }
}

void Hasher::Update(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_ += n;
  if (tail_size_ > 0) {
    size_t take = std::min(n, 8 - tail_size_);
    std::memcpy(tail_ + tail_size_, p, take);
    tail_size_ += take;
    p += take;
    n -= take;
    if (tail_size_ < 8) return;
    uint64_t word;
    std::memcpy(&word, tail_, 8);
    Absorb(word);
    tail_size_ = 0;
  }
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    Absorb(word);
    p += 8;
    n -= 8;
  }
  std::memcpy(tail_, p, n);
  tail_size_ = n;
}

uint64_t Hasher::Digest() const {
  uint64_t word = 0;
  std::memcpy(&word, tail_, tail_size_);
  return Mix64(Mix64(state_ ^ word) ^ total_);
}

uint64_t HashBytes(const void* data, size_t n, uint64_t seed) {
  Hasher h(seed);
  h.Update(data, n);
  return h.Digest();
}

std::string StrFormat(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

std::string Hex64(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

Status ReadFull(int fd, void* buf, size_t n, size_t* got) {
  auto* p = static_cast<char*>(buf);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::read(fd, p + done, n - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      *got = done;
      return ErrnoStatus("read");
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  *got = done;
  return Status::OK();
}

Status PreadExact(int fd, void* buf, size_t n, uint64_t offset) {
  auto* p = static_cast<char*>(buf);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("pread at " + std::to_string(offset + done));
    }
    if (r == 0) {
      return Status::IOError("short read: end of file at " + std::to_string(offset + done) +
                             ", wanted " + std::to_string(n) + " bytes at " +
                             std::to_string(offset));
    }
    done += static_cast<size_t>(r);
  }
  return Status::OK();
}

Status WriteFull(int fd, const void* buf, size_t n) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write");
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

Status PwriteFull(int fd, const void* buf, size_t n, uint64_t offset) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("pwrite at " + std::to_string(offset));
    }
    p += w;
    offset += static_cast<uint64_t>(w);
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

Result<std::string> ReadSmallFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + path);
  std::string out;
  char buf[16384];
  for (;;) {
    size_t got = 0;
    Status st = ReadFull(fd, buf, sizeof buf, &got);
    if (!st.ok()) {
      ::close(fd);
      return st.WithContext(path);
    }
    out.append(buf, got);
    if (got < sizeof buf) break;
  }
  ::close(fd);
  return out;
}

Status WriteWholeFile(const std::string& path, const void* data, size_t n) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("create " + path);
  Status st = WriteFull(fd, data, n);
  if (::close(fd) != 0 && st.ok()) st = ErrnoStatus("close " + path);
  return st.WithContext(path);
}

Status WriteFileAtomic(const std::string& path, std::string_view contents) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("create " + tmp);
  Status st = WriteFull(fd, contents.data(), contents.size());
  if (st.ok() && ::fsync(fd) != 0) st = ErrnoStatus("fsync " + tmp);
  if (::close(fd) != 0 && st.ok()) st = ErrnoStatus("close " + tmp);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = ErrnoStatus("rename to " + path);
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

static Status WalkDirectory(const std::string& root, const std::string& relative,
                            std::vector<std::string>* out) {
  std::string dir_path = relative.empty() ? root : root + "/" + relative;
  DIR* dir = ::opendir(dir_path.c_str());
  if (dir == nullptr) return ErrnoStatus("opendir " + dir_path);
  std::vector<std::pair<std::string, bool>> entries;  // name, is directory
  for (;;) {
    errno = 0;
    struct dirent* entry = ::readdir(dir);
    if (entry == nullptr) {
      if (errno != 0) {
        Status st = ErrnoStatus("readdir " + dir_path);
        ::closedir(dir);
        return st;
      }
      break;
    }
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    unsigned char type = entry->d_type;
    if (type == DT_UNKNOWN) {
      struct stat st;
      if (::fstatat(::dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
    }
    if (type == DT_DIR || type == DT_REG) entries.emplace_back(std::move(name), type == DT_DIR);
  }
  ::closedir(dir);
  std::sort(entries.begin(), entries.end());
  for (const auto& [name, is_dir] : entries) {
    std::string child = relative.empty() ? name : relative + "/" + name;
    if (is_dir) {
      TIPFS_RETURN_IF_ERROR(WalkDirectory(root, child, out));
    } else {
      out->push_back(std::move(child));
    }
  }
  return Status::OK();
}

Result<std::vector<std::string>> ListFilesSorted(const std::string& root) {
  std::vector<std::string> files;
  TIPFS_RETURN_IF_ERROR(WalkDirectory(root, "", &files));
  // Sort the full relative paths so that the order is the same as `find | sort` whatever the
  // directory nesting ("a/b" vs "a.txt").
  std::sort(files.begin(), files.end());
  return files;
}

Result<std::string> AbsolutePath(const std::string& path) {
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (resolved == nullptr) return ErrnoStatus("realpath " + path);
  std::string out(resolved);
  std::free(resolved);
  return out;
}

int64_t MonotonicNanos() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

RunReport::RunReport(std::string program, Variant variant)
    : program_(std::move(program)), variant_(variant), start_nanos_(MonotonicNanos()) {}

void RunReport::Print(const IoCounters& io, const std::string& extra) const {
  double elapsed = static_cast<double>(MonotonicNanos() - start_nanos_) / 1e9;
  std::fprintf(stderr, "[%s] variant=%s elapsed=%.3fs reads=%llu bytes_read=%llu opens=%llu%s%s\n",
               program_.c_str(), VariantName(variant_), elapsed,
               static_cast<unsigned long long>(io.read_calls),
               static_cast<unsigned long long>(io.bytes_read),
               static_cast<unsigned long long>(io.files_opened), extra.empty() ? "" : " ",
               extra.c_str());
}

int FinishRun(std::string_view program, const RunReport& report, const IoCounters& io,
              const std::string& extra) {
  if (std::fflush(stdout) != 0) return Fail(program, ErrnoStatus("write stdout"));
  report.Print(io, extra);
  return 0;
}

int Fail(std::string_view program, const Status& status) {
  std::fflush(stdout);
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(program.size()), program.data(),
               status.ToString().c_str());
  return 1;
}

}  // namespace tipfs::bench
