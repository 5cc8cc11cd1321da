// Recordings of the reads a program made of files on a tipfs mount, kept between runs so that the
// next run of the same command can disclose them ahead of the program (source `history`). One
// file per command in the state directory (state_dir.h) as history/<key>, mode 0600 in the 0700
// directory, written atomically (temporary file + rename) over the last run's. The key is the
// executable's build-id and path, the argument list and the working directory (HistoryKey); the
// file repeats the arguments and directory, and a recording whose own do not match is not used.
//
// Bounds (so a recording can never grow without limit): at most kMaxHistoryReads coalesced reads,
// kMaxHistoryFiles files and kMaxHistoryPathBytes bytes of paths per recording (a run reading
// more keeps its first ones), commands of at most kMaxHistoryCommandBytes of arguments and
// directory, so a file is under 1 MiB; at most kMaxRecordings files (the oldest saved is removed
// first). Not thread-safe (plain values and file I/O).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace tipfs::spec {

inline constexpr size_t kMaxHistoryReads = 16384;
inline constexpr size_t kMaxHistoryFiles = 4096;
inline constexpr size_t kMaxHistoryPathBytes = 384 << 10;
inline constexpr size_t kMaxHistoryCommandBytes = 64 << 10;
inline constexpr size_t kMaxRecordings = 128;

// A file as the program found it when it first read it in the recorded run.
struct RecordedFile {
  std::string path;  // absolute, on the mount
  uint64_t ino = 0;
  uint64_t size = 0;
  int64_t mtime_nanos = 0;
};

// One read, or several sequential reads of a file coalesced.
struct RecordedRead {
  uint32_t file = 0;  // index into Recording::files
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct Recording {
  std::string executable;  // /proc/self/exe of the recorded run
  std::vector<std::string> argv;
  std::string cwd;
  std::vector<RecordedFile> files;
  std::vector<RecordedRead> reads;
  uint64_t bytes() const;  // the bytes of data its reads cover
};

// The directories programs make temporary files in: $TMPDIR (when absolute), /tmp and /var/tmp.
std::vector<std::string> TemporaryDirectories();
// The arguments as the history sees them (the key, and what the recording repeats): in a path
// right below one of `temporary_directories` (the whole argument, or after '=', '@', ',', ':'
// and the like, as in -plugin-opt=-fresolution=/tmp/ccAbC12d.res), each run of letters, digits
// and '_' that looks like the random part mkstemp(3) fills in is replaced by as many 'X's: a run
// of at least 6 with a digit or an upper-case letter, or one that starts with gcc's "cc" (8 or
// more) or Python's and mktemp(1)'s "tmp" (9 or more). So gcc's collect2 and ld, given new
// temporary names each run, are the same command each run; /tmp/results and /tmp/outputs stay
// two commands, and so does everything outside those directories.
std::vector<std::string> StableArguments(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& temporary_directories);

// The key of this command: the executable's `main_id` (build-id hash) and path, its arguments (as
// StableArguments gives them: the caller passes those) and working directory.
uint64_t HistoryKey(uint64_t main_id, const std::string& executable,
                    const std::vector<std::string>& argv, const std::string& cwd);
// Where the recording of `key` is kept (empty without a state directory).
std::string HistoryPath(uint64_t key);

std::string FormatRecording(const Recording& recording);
// Corruption naming the problem for anything that is not a well-formed recording within bounds.
Result<Recording> ParseRecording(const std::string& data);

// NotFound when nothing is recorded for `key`.
Result<Recording> LoadRecording(uint64_t key);
// Replaces the recording of `key`, then drops the oldest recordings past kMaxRecordings.
Status SaveRecording(uint64_t key, const Recording& recording);

// Every recording (its file name, the file's size, and what it holds); files that are not
// recordings are listed with `problem` set.
struct RecordingEntry {
  std::string name;
  uint64_t file_bytes = 0;
  int64_t saved_seconds = 0;  // mtime
  Recording recording;
  std::string problem;
};
Result<std::vector<RecordingEntry>> ListRecordings();
// Removes every recording; returns how many.
Result<size_t> ClearRecordings();

}  // namespace tipfs::spec
