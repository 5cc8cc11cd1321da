#include "speculate/fd_snapshot.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "speculate/mount_watch.h"
#include "speculate/raw_syscall.h"

namespace tipfs::spec {

int64_t DirectoryPosition(int fd) {
  LineBuilder path;
  path.Add("/proc/self/fdinfo/").Add(static_cast<uint64_t>(fd));
  long info =
      RawSyscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path.data()), O_RDONLY | O_CLOEXEC);
  if (info < 0) return -1;
  char text[512];
  long n = RawSyscall(SYS_pread64, info, reinterpret_cast<long>(text), sizeof(text) - 1, 0);
  RawSyscall(SYS_close, info);
  if (n <= 0) return -1;
  text[n] = '\0';
  if (strncmp(text, "pos:", 4) != 0) return -1;  // the first line: "pos:\t123"
  const char* p = text + 4;
  while (*p == ' ' || *p == '\t') ++p;
  if (*p < '0' || *p > '9') return -1;
  int64_t position = 0;
  for (; *p >= '0' && *p <= '9'; ++p) position = position * 10 + (*p - '0');
  return position;
}

void FdSnapshot::Take(const HintSink& sink) {
  count = 0;
  long dir = RawSyscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/proc/self/fd"),
                        O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  alignas(8) char buffer[4096];
  for (;;) {
    long n = RawSyscall(SYS_getdents64, dir, reinterpret_cast<long>(buffer), sizeof(buffer));
    if (n <= 0) break;
    for (long pos = 0; pos < n && count < kMaxEntries;) {
      auto* entry = reinterpret_cast<struct dirent64*>(buffer + pos);
      pos += entry->d_reclen;
      if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
      long fd = 0;
      for (const char* c = entry->d_name; *c != '\0' && fd < (1L << 30); ++c) {
        fd = fd * 10 + (*c - '0');
      }
      if (fd == dir || sink.OwnsFd(static_cast<int>(fd))) continue;
      struct stat st;
      // Without atime: the file the program just read has a stale one (a GETATTR per fork).
      if (RawFstatWithoutAtime(static_cast<int>(fd), &st) != 0) continue;
      int64_t position = -1;
      if (S_ISREG(st.st_mode)) {
        position = RawSyscall(SYS_lseek, fd, 0, SEEK_CUR);
      } else if (S_ISDIR(st.st_mode)) {
        position = DirectoryPosition(static_cast<int>(fd));
      }
      if (position < 0) continue;
      entries[count++] = FdPosition{static_cast<int32_t>(fd), st.st_dev, st.st_ino, position};
    }
  }
  RawSyscall(SYS_close, dir);
}

int64_t FdSnapshot::Find(int fd, uint64_t dev, uint64_t ino) const {
  for (int i = 0; i < count; ++i) {
    const FdPosition& e = entries[i];
    if (e.fd == fd) return e.dev == dev && e.ino == ino ? e.position : -1;
  }
  return -1;
}

}  // namespace tipfs::spec
