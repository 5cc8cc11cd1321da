#include "util/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace tipfs {
namespace {

// All of `contents` at the descriptor's offset: retries short writes and EINTR.
Status WriteAll(int fd, std::string_view contents, const std::string& path) {
  while (!contents.empty()) {
    const ssize_t n = ::write(fd, contents.data(), contents.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("write " + path);
    if (n == 0) return Status::IOError("write " + path + ": no progress (0 bytes written)");
    contents.remove_prefix(static_cast<size_t>(n));
  }
  return Status::OK();
}

Status SyncDirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + dir);
  Status st = ::fsync(fd) == 0 ? Status::OK() : ErrnoStatus("fsync " + dir);
  ::close(fd);
  return st;
}

}  // namespace

Status WriteFileDurably(const std::string& path, std::string_view contents) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("create " + tmp);
  Status st = WriteAll(fd, contents, tmp);
  if (st.ok() && ::fsync(fd) != 0) st = ErrnoStatus("fsync " + tmp);
  // close can report a deferred write error (NFS, some FUSE file systems): it counts.
  if (::close(fd) != 0 && st.ok()) st = ErrnoStatus("close " + tmp);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = ErrnoStatus("rename " + tmp);
  if (!st.ok()) {
    (void)::unlink(tmp.c_str());
    return st;
  }
  return SyncDirectoryOf(path);
}

}  // namespace tipfs
