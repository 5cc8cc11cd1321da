#include "speculate/history.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "speculate/raw_syscall.h"
#include "tipfs/hint.h"

namespace tipfs::spec {

namespace {

int64_t MtimeNanos(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// The watched mount `path` lies on, and the path relative to its root; -1 if none.
int MountOf(const MountWatch& watch, const std::string& path, std::string* relative) {
  for (int i = 0; i < watch.mount_count(); ++i) {
    const size_t n = strlen(watch.mount_path(i));
    if (path.compare(0, n, watch.mount_path(i)) == 0 && path.size() > n && path[n] == '/') {
      *relative = path.substr(n + 1);
      return i;
    }
  }
  return -1;
}

}  // namespace

// ---- recording ---------------------------------------------------------------------------

void HistoryRecorder::Start(const std::string& executable, const std::vector<std::string>& argv,
                            const std::string& cwd) {
  recording_ = Recording{};
  file_index_.clear();
  full_ = false;
  path_bytes_ = 0;
  size_t command_bytes = cwd.size();
  for (const std::string& arg : argv) command_bytes += arg.size();
  // A command too long to be kept is not recorded at all (it could not be recognised).
  enabled_ = command_bytes <= kMaxHistoryCommandBytes && executable.size() <= 4096;
  if (!enabled_) return;
  recording_.executable = executable;
  recording_.argv = argv;
  recording_.cwd = cwd;
}

void HistoryRecorder::OnRead(int fd, uint64_t dev, uint64_t ino, uint64_t offset, uint64_t length) {
  if (!enabled_ || length == 0) return;
  uint32_t index;
  auto known = file_index_.find({dev, ino});
  if (known != file_index_.end()) {
    index = known->second;
  } else {
    if (full_) return;
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    char target[4096];
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    // Without atime (RawFstatWithoutAtime): this file was just read, and a FUSE kernel marks its
    // atime stale after every read it sends, so fstat(2) would wait for a GETATTR round trip in
    // the program's thread (bench/rados/README.md, "What the speculating run waited on").
    struct stat st;
    if (n <= 0 || target[0] != '/' || RawFstatWithoutAtime(fd, &st) != 0) return;
    std::string path(target, static_cast<size_t>(n));
    if (recording_.files.size() >= kMaxHistoryFiles ||
        path_bytes_ + path.size() > kMaxHistoryPathBytes) {
      full_ = true;
      return;
    }
    index = static_cast<uint32_t>(recording_.files.size());
    recording_.files.push_back(
        RecordedFile{path, ino, static_cast<uint64_t>(st.st_size), MtimeNanos(st)});
    path_bytes_ += path.size();
    file_index_.emplace(std::make_pair(dev, ino), index);
  }
  if (!recording_.reads.empty()) {
    RecordedRead& last = recording_.reads.back();
    // Sequential (or overlapping) reads of one file are one recorded read.
    if (last.file == index && offset >= last.offset && offset <= last.offset + last.length) {
      last.length = std::max(last.offset + last.length, offset + length) - last.offset;
      return;
    }
  }
  if (recording_.reads.size() >= kMaxHistoryReads) {
    full_ = true;
    return;
  }
  recording_.reads.push_back(RecordedRead{index, offset, length});
}

void HistoryRecorder::Save(uint64_t key) {
  if (!enabled_) return;
  if (recording_.reads.empty()) {
    // Nothing read from the mount this time: the last run's reads are not this command's any more.
    std::string path = HistoryPath(key);
    if (!path.empty()) unlink(path.c_str());
    return;
  }
  (void)SaveRecording(key, recording_);  // the next run records again if this fails
}

// ---- replay ------------------------------------------------------------------------------

HistoryReplay::~HistoryReplay() { free(request_); }

void HistoryReplay::Start(uint64_t key, const Recording& expected_command, const MountWatch* watch,
                          const HintSink* sink, uint32_t max_ahead_reads,
                          uint64_t max_ahead_bytes) {
  active_ = false;
  counters_ = HistoryCounters{};
  Result<Recording> loaded = LoadRecording(key);
  if (!loaded.ok()) return;  // nothing recorded (the first run), or a damaged file: no replay
  // The key is a hash: the recording must be of this very command.
  if (loaded->executable != expected_command.executable || loaded->argv != expected_command.argv ||
      loaded->cwd != expected_command.cwd) {
    return;
  }
  if (request_ == nullptr) {
    request_ = static_cast<tipfs_hint_paths*>(malloc(sizeof(tipfs_hint_paths)));
    if (request_ == nullptr) return;
  }
  recording_ = std::move(*loaded);
  sink_ = sink;
  max_ahead_reads_ = std::max<uint32_t>(max_ahead_reads, 1);
  max_ahead_bytes_ = max_ahead_bytes;
  files_.assign(recording_.files.size(), File{});
  file_index_.clear();
  for (size_t i = 0; i < recording_.files.size(); ++i) {
    File& file = files_[i];
    file.mount = MountOf(*watch, recording_.files[i].path, &file.path);
    if (file.mount < 0) continue;
    // The program's reads of the file mark its place in the recording, changed or not.
    file_index_.emplace(std::make_pair(watch->mount_dev(file.mount), recording_.files[i].ino),
                        static_cast<uint32_t>(i));
  }
  counters_.entries = recording_.reads.size();
  next_ = issued_ = 0;
  ahead_bytes_ = 0;
  misses_ = 0;
  active_ = true;
  Refill();
}

void HistoryReplay::Refill() {
  int mount = -1;
  tipfs_hint_paths_init(request_, TIPFS_SOURCE_HISTORY, kHistoryStream, 0);
  in_request_.clear();
  size_t checks = 0;
  while (issued_ < recording_.reads.size() && issued_ - next_ < max_ahead_reads_ &&
         ahead_bytes_ < max_ahead_bytes_) {
    const RecordedRead& read = recording_.reads[issued_];
    const File& file = files_[read.file];
    if (!file.checked && checks++ >= kHistoryChecksPerRefill) break;
    if (Hintable(issued_)) {
      if (mount != file.mount && !in_request_.empty()) Send(mount);
      mount = file.mount;
      if (tipfs_hint_paths_add(request_, file.path.c_str(), read.offset, read.length) != 0) {
        Send(mount);
        if (tipfs_hint_paths_add(request_, file.path.c_str(), read.offset, read.length) != 0) {
          ++counters_.refused;  // a path no record can hold
        } else {
          in_request_.push_back(issued_);
        }
      } else {
        in_request_.push_back(issued_);
      }
    }
    ahead_bytes_ += read.length;
    ++issued_;
  }
  if (!in_request_.empty()) Send(mount);
}

bool HistoryReplay::Hintable(size_t index) {
  File& file = files_[recording_.reads[index].file];
  if (!file.checked) {
    file.checked = true;
    const RecordedFile& recorded = recording_.files[recording_.reads[index].file];
    struct stat st;
    file.unchanged = file.mount >= 0 &&
                     RawStatWithoutAtime(AT_FDCWD, recorded.path.c_str(), 0, &st) == 0 &&
                     S_ISREG(st.st_mode) && st.st_ino == recorded.ino &&
                     static_cast<uint64_t>(st.st_size) == recorded.size &&
                     MtimeNanos(st) == recorded.mtime_nanos;
    if (!file.unchanged) ++counters_.files_changed;
  }
  return file.unchanged;
}

void HistoryReplay::Send(int mount) {
  if (sink_->SendPathHints(mount, request_) == 0) {
    for (size_t index : in_request_) {
      ++counters_.hints;
      counters_.hint_bytes += recording_.reads[index].length;
    }
  } else {
    // One record refused (a file this process may not read, one removed since) refuses the whole
    // call: send them one by one, so that the others are still hinted.
    for (size_t index : in_request_) {
      const RecordedRead& read = recording_.reads[index];
      tipfs_hint_paths_init(request_, TIPFS_SOURCE_HISTORY, kHistoryStream, 0);
      if (tipfs_hint_paths_add(request_, files_[read.file].path.c_str(), read.offset,
                               read.length) == 0 &&
          sink_->SendPathHints(mount, request_) == 0) {
        ++counters_.hints;
        counters_.hint_bytes += read.length;
      } else {
        ++counters_.refused;
      }
    }
  }
  tipfs_hint_paths_init(request_, TIPFS_SOURCE_HISTORY, kHistoryStream, 0);
  in_request_.clear();
}

void HistoryReplay::OnRead(uint64_t dev, uint64_t ino, uint64_t offset, uint64_t length) {
  if (!active_) return;
  const uint64_t end = offset + length;
  auto known = file_index_.find({dev, ino});
  if (known != file_index_.end()) {
    const uint32_t file = known->second;
    auto overlaps = [&](size_t i) {
      const RecordedRead& r = recording_.reads[i];
      return r.file == file && offset < r.offset + r.length && end > r.offset;
    };
    const size_t limit = std::min(recording_.reads.size(), next_ + kHistoryMatchWindow);
    for (size_t j = next_; j < limit; ++j) {
      if (!overlaps(j)) continue;
      // Found: the recorded reads before it were skipped; it is done once read to its end.
      size_t reached = end >= recording_.reads[j].offset + recording_.reads[j].length ? j + 1 : j;
      for (size_t k = next_; k < reached && k < issued_; ++k) {
        ahead_bytes_ -= recording_.reads[k].length;
      }
      next_ = reached;
      issued_ = std::max(issued_, next_);
      misses_ = 0;
      Refill();
      if (next_ >= recording_.reads.size()) active_ = false;  // replayed to its end
      return;
    }
    if (next_ > 0 && overlaps(next_ - 1)) return;  // the last recorded read again: neutral
  }
  if (++misses_ >= kHistoryMissesToCancel) Cancel();
}

void HistoryReplay::Cancel() {
  for (size_t k = next_; k < issued_; ++k) {
    if (files_[recording_.reads[k].file].unchanged) ++counters_.cancelled;
  }
  if (issued_ > next_) sink_->CancelStream(kHistoryStream);
  active_ = false;
}

void HistoryReplay::Stop() {
  if (!active_) return;
  // At the program's end what is still disclosed will not be read: dropped, but not counted as
  // cancelled by a mismatch.
  if (issued_ > next_) sink_->CancelStream(kHistoryStream);
  active_ = false;
}

}  // namespace tipfs::spec
