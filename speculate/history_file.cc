#include "speculate/history_file.h"

#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "speculate/state_dir.h"

namespace tipfs::spec {

namespace {

constexpr char kMagic[8] = {'T', 'I', 'P', 'H', 'I', 'S', 'T', '1'};
constexpr const char* kSubdirectory = "history";

uint64_t Fnv(uint64_t hash, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash;
}

uint64_t FnvString(uint64_t hash, const std::string& text) {
  uint64_t length = text.size();  // the length first: ("ab", "c") is not ("a", "bc")
  return Fnv(Fnv(hash, &length, sizeof(length)), text.data(), text.size());
}

void PutU32(std::string* out, uint32_t value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}
void PutU64(std::string* out, uint64_t value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}
void PutString(std::string* out, const std::string& text) {
  PutU32(out, static_cast<uint32_t>(text.size()));
  out->append(text);
}

// Reads the fields of a recording in order; the first short or oversized field sets `problem`.
class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  bool ok() const { return problem_.empty(); }
  const std::string& problem() const { return problem_; }
  bool at_end() const { return pos_ == data_.size(); }

  uint64_t U64(const char* what) { return Fixed<uint64_t>(what); }
  uint32_t U32(const char* what) { return Fixed<uint32_t>(what); }
  std::string String(const char* what, size_t max) {
    uint32_t length = U32(what);
    if (!ok()) return "";
    if (length > max || length > data_.size() - pos_) {
      Fail(std::string(what) + " of " + std::to_string(length) + " bytes is too long");
      return "";
    }
    std::string text = data_.substr(pos_, length);
    pos_ += length;
    return text;
  }
  void Fail(const std::string& problem) {
    if (problem_.empty()) problem_ = problem;
  }

 private:
  template <typename T>
  T Fixed(const char* what) {
    T value = 0;
    if (!ok()) return value;
    if (data_.size() - pos_ < sizeof(T)) {
      Fail(std::string("truncated at ") + what);
      return value;
    }
    memcpy(&value, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  const std::string& data_;
  size_t pos_ = sizeof(kMagic);
  std::string problem_;
};

bool NameCharacter(char c) { return isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether `run` (letters, digits, '_') looks like mkstemp's random part: glibc, gcc's
// make_temp_file, Python's tempfile and mktemp(1) fill 6, 6, 8 and 10 characters from letters and
// digits; random ones nearly always hold a digit or an upper-case letter, and the rare all
// lower-case draw is still caught behind the "cc" and "tmp" prefixes of gcc's and Python's names.
bool LooksRandom(std::string_view run) {
  if (run.size() < 6) return false;
  for (char c : run) {
    if (isdigit(static_cast<unsigned char>(c)) || isupper(static_cast<unsigned char>(c))) {
      return true;
    }
  }
  return (run.substr(0, 2) == "cc" && run.size() >= 8) ||
         (run.substr(0, 3) == "tmp" && run.size() >= 9);
}

// Replaces the random-looking runs of the path component that starts at `begin` of `arg`.
void StabilizeComponent(std::string* arg, size_t begin) {
  size_t end = begin;
  while (end < arg->size() && strchr("/,:;= ", (*arg)[end]) == nullptr) ++end;
  for (size_t i = begin; i < end;) {
    if (!NameCharacter((*arg)[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < end && NameCharacter((*arg)[j])) ++j;
    if (LooksRandom(std::string_view(*arg).substr(i, j - i))) arg->replace(i, j - i, j - i, 'X');
    i = j;
  }
}

}  // namespace

std::vector<std::string> TemporaryDirectories() {
  std::vector<std::string> dirs;
  if (const char* tmpdir = getenv("TMPDIR"); tmpdir != nullptr && tmpdir[0] == '/') {
    std::string dir = tmpdir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (dir.size() > 1) dirs.push_back(dir);
  }
  for (const char* dir : {"/tmp", "/var/tmp"}) {
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  }
  return dirs;
}

std::vector<std::string> StableArguments(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& temporary_directories) {
  std::vector<std::string> stable = argv;
  for (std::string& arg : stable) {
    for (const std::string& dir : temporary_directories) {
      const std::string prefix = dir + "/";
      for (size_t at = arg.find(prefix); at != std::string::npos; at = arg.find(prefix, at + 1)) {
        // The path starts the argument, follows a separator or an option's letters (-o/tmp/...,
        // -fresolution=/tmp/..., @/tmp/...); /home/u/tmp/... is not in /tmp.
        const size_t token = arg.find_last_of(" =,:;@", at == 0 ? 0 : at - 1);
        const size_t start = token == std::string::npos || at == 0 ? 0 : token + 1;
        const std::string_view before = std::string_view(arg).substr(start, at - start);
        if (before.empty() || (before[0] == '-' && before.find('/') == std::string_view::npos)) {
          StabilizeComponent(&arg, at + prefix.size());
        }
      }
    }
  }
  return stable;
}

uint64_t Recording::bytes() const {
  uint64_t total = 0;
  for (const RecordedRead& read : reads) total += read.length;
  return total;
}

uint64_t HistoryKey(uint64_t main_id, const std::string& executable,
                    const std::vector<std::string>& argv, const std::string& cwd) {
  uint64_t key = Fnv(14695981039346656037ull, &main_id, sizeof(main_id));
  key = FnvString(key, executable);
  uint64_t count = argv.size();
  key = Fnv(key, &count, sizeof(count));
  for (const std::string& arg : argv) key = FnvString(key, arg);
  return FnvString(key, cwd);
}

std::string HistoryPath(uint64_t key) {
  std::string top = StateDirectoryPath();
  if (top.empty()) return "";
  char name[32];
  snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(key));
  return top + "/" + kSubdirectory + "/" + name;
}

std::string FormatRecording(const Recording& recording) {
  std::string out(kMagic, sizeof(kMagic));
  PutString(&out, recording.executable);
  PutU32(&out, static_cast<uint32_t>(recording.argv.size()));
  for (const std::string& arg : recording.argv) PutString(&out, arg);
  PutString(&out, recording.cwd);
  PutU32(&out, static_cast<uint32_t>(recording.files.size()));
  for (const RecordedFile& file : recording.files) {
    PutString(&out, file.path);
    PutU64(&out, file.ino);
    PutU64(&out, file.size);
    PutU64(&out, static_cast<uint64_t>(file.mtime_nanos));
  }
  PutU32(&out, static_cast<uint32_t>(recording.reads.size()));
  for (const RecordedRead& read : recording.reads) {
    PutU32(&out, read.file);
    PutU64(&out, read.offset);
    PutU64(&out, read.length);
  }
  return out;
}

Result<Recording> ParseRecording(const std::string& data) {
  if (data.size() < sizeof(kMagic) || memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
    return Status::Corruption("not a tipfs history recording (bad magic)");
  }
  Reader in(data);
  Recording r;
  size_t command_bytes = 0;
  r.executable = in.String("executable", 4096);
  const uint32_t argc = in.U32("argument count");
  if (in.ok() && argc > kMaxHistoryCommandBytes / sizeof(uint32_t)) in.Fail("too many arguments");
  for (uint32_t i = 0; i < argc && in.ok(); ++i) {
    r.argv.push_back(in.String("argument", kMaxHistoryCommandBytes));
    command_bytes += r.argv.back().size();
  }
  r.cwd = in.String("working directory", 4096);
  command_bytes += r.cwd.size();
  if (in.ok() && command_bytes > kMaxHistoryCommandBytes) in.Fail("command too long");
  const uint32_t files = in.U32("file count");
  if (in.ok() && files > kMaxHistoryFiles) in.Fail(std::to_string(files) + " files");
  size_t path_bytes = 0;
  for (uint32_t i = 0; i < files && in.ok(); ++i) {
    RecordedFile file;
    file.path = in.String("path", 4095);
    file.ino = in.U64("inode");
    file.size = in.U64("size");
    file.mtime_nanos = static_cast<int64_t>(in.U64("mtime"));
    path_bytes += file.path.size();
    r.files.push_back(std::move(file));
  }
  if (in.ok() && path_bytes > kMaxHistoryPathBytes) in.Fail("paths too long");
  const uint32_t reads = in.U32("read count");
  if (in.ok() && reads > kMaxHistoryReads) in.Fail(std::to_string(reads) + " reads");
  for (uint32_t i = 0; i < reads && in.ok(); ++i) {
    RecordedRead read;
    read.file = in.U32("read's file");
    read.offset = in.U64("offset");
    read.length = in.U64("length");
    if (in.ok() && read.file >= r.files.size())
      in.Fail("a read names file " + std::to_string(read.file));
    r.reads.push_back(read);
  }
  if (in.ok() && !in.at_end()) in.Fail("trailing bytes");
  if (!in.ok()) return Status::Corruption("history recording: " + in.problem());
  return r;
}

Result<Recording> LoadRecording(uint64_t key) {
  std::string path = HistoryPath(key);
  if (path.empty()) return Status::NotFound("no state directory");
  Result<std::string> data = ReadPrivateFile(path);
  if (!data.ok()) return data.status();
  Result<Recording> recording = ParseRecording(*data);
  if (!recording.ok()) return recording.status().WithContext(path);
  return recording;
}

Status SaveRecording(uint64_t key, const Recording& recording) {
  Result<std::string> dir = StateSubdirectory(kSubdirectory);
  if (!dir.ok()) return dir.status();
  TIPFS_RETURN_IF_ERROR(WritePrivateFile(HistoryPath(key), FormatRecording(recording)));
  PruneOldest(*dir, kMaxRecordings);
  return Status::OK();
}

Result<std::vector<RecordingEntry>> ListRecordings() {
  std::vector<RecordingEntry> entries;
  std::string top = StateDirectoryPath();
  if (top.empty()) return Status::NotFound("no home directory for the tipfs state directory");
  std::string dir = top + "/" + kSubdirectory;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return entries;
    return ErrnoStatus("open " + dir);
  }
  while (dirent* entry = readdir(d)) {
    if (entry->d_name[0] == '.') continue;
    std::string path = dir + "/" + entry->d_name;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    RecordingEntry listed;
    listed.name = entry->d_name;
    listed.file_bytes = static_cast<uint64_t>(st.st_size);
    listed.saved_seconds = st.st_mtim.tv_sec;
    Result<std::string> data = ReadPrivateFile(path);
    Result<Recording> recording =
        data.ok() ? ParseRecording(*data) : Result<Recording>(data.status());
    if (recording.ok()) {
      listed.recording = std::move(*recording);
    } else {
      listed.problem = recording.status().message();
    }
    entries.push_back(std::move(listed));
  }
  closedir(d);
  std::sort(entries.begin(), entries.end(), [](const RecordingEntry& a, const RecordingEntry& b) {
    return a.saved_seconds != b.saved_seconds ? a.saved_seconds < b.saved_seconds : a.name < b.name;
  });
  return entries;
}

Result<size_t> ClearRecordings() { return ClearStateSubdirectory(kSubdirectory); }

}  // namespace tipfs::spec
