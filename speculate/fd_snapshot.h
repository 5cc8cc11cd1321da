// FdSnapshot: where the program's open files and directories stand, taken by the program just
// before it forks a speculating child. The child's memory is a copy of the program's at the
// fork, so the child reads its shadow offsets from here and the program never waits for it.
// Only hint accuracy depends on these positions, never the program's data: the sandbox keeps the
// child off every description it shares (seccomp_filter.h).
//
// Positions are read without changing anything: lseek(fd, 0, SEEK_CUR) for regular files (it
// only reads f_pos, on every file system), /proc/self/fdinfo for directories (on ext4 any lseek
// of a directory resets its readdir cookie); nothing else is touched. Async-signal-safe
// (RawSyscall, no allocation); one snapshot per thread at a time.
#pragma once

#include <cstdint>

namespace tipfs::spec {

class HintSink;

struct FdPosition {
  int32_t fd;
  uint64_t dev;
  uint64_t ino;
  int64_t position;
};

struct FdSnapshot {
  static constexpr int kMaxEntries = 1024;

  // Records every regular file and directory among the caller's descriptors but the sink's.
  // Beyond kMaxEntries the rest is left out (the child then looks for itself).
  void Take(const HintSink& sink);
  // The recorded position of fd if it still names the same file; -1 otherwise.
  int64_t Find(int fd, uint64_t dev, uint64_t ino) const;

  int count = 0;
  FdPosition entries[kMaxEntries];  // in the order /proc/self/fd lists them
};

// A directory's position from /proc/self/fdinfo/FD; -1 when it cannot be read.
int64_t DirectoryPosition(int fd);

}  // namespace tipfs::spec
