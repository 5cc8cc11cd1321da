#include "speculate/state_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace tipfs::spec {

namespace {

std::string Variable(const char* name) {
  const char* value = getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

// A file or directory of the state directory is the user's own: owned by the effective user (a
// recording another user made names that user's files; running as root with someone's HOME must
// not use or replace theirs) and writable by nobody else (who could have planted it).
Status CheckOwn(const std::string& path, const struct stat& st) {
  if (st.st_uid != geteuid()) {
    return Status::FromErrno(
        EPERM, path + " belongs to another user (uid " + std::to_string(st.st_uid) + ")");
  }
  if ((st.st_mode & 022) != 0) {
    return Status::FromErrno(EPERM, path + " is writable by others (chmod go-w it)");
  }
  return Status::OK();
}

Status CheckPrivateDirectory(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return ErrnoStatus("stat " + path);
  if (!S_ISDIR(st.st_mode)) return Status::FromErrno(ENOTDIR, path + " is not a directory");
  return CheckOwn(path, st);
}

Status MakePrivateDirectory(const std::string& path) {
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + path);
  return CheckPrivateDirectory(path);
}

Result<std::string> ReadAndClose(int fd, const std::string& path) {
  std::string data;
  char buffer[65536];
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status status = ErrnoStatus("read " + path);
      close(fd);
      return status;
    }
    if (n == 0) break;
    data.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return data;
}

}  // namespace

std::string StateDirectoryPath() {
  if (std::string dir = Variable("TIPSPEC_STATE_DIR"); !dir.empty()) return dir;
  if (std::string xdg = Variable("XDG_STATE_HOME"); !xdg.empty() && xdg[0] == '/') {
    return xdg + "/tipfs";
  }
  std::string home = Variable("HOME");
  if (home.empty()) {
    if (const passwd* pw = getpwuid(geteuid()); pw != nullptr && pw->pw_dir != nullptr) {
      home = pw->pw_dir;
    }
  }
  if (home.empty()) return "";
  return home + "/.local/state/tipfs";
}

Result<std::string> StateSubdirectory(const std::string& sub) {
  std::string top = StateDirectoryPath();
  if (top.empty()) return Status::NotFound("no home directory for the tipfs state directory");
  // The parents ($HOME/.local/state) are made like `mkdir -p`, with the user's umask; only
  // tipfs's own directories must be private.
  for (size_t slash = top.find('/', 1); slash != std::string::npos;
       slash = top.find('/', slash + 1)) {
    std::string parent = top.substr(0, slash);
    if (mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + parent);
  }
  TIPFS_RETURN_IF_ERROR(MakePrivateDirectory(top));
  std::string dir = top + "/" + sub;
  TIPFS_RETURN_IF_ERROR(MakePrivateDirectory(dir));
  return dir;
}

Status WritePrivateFile(const std::string& path, const std::string& data) {
  std::string temporary = path + ".tmp." + std::to_string(getpid());
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoStatus("create " + temporary);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status status = ErrnoStatus("write " + temporary);
      close(fd);
      unlink(temporary.c_str());
      return status;
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    Status status = ErrnoStatus("sync " + temporary);
    unlink(temporary.c_str());
    return status;
  }
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    Status status = ErrnoStatus("rename " + temporary + " to " + path);
    unlink(temporary.c_str());
    return status;
  }
  return Status::OK();
}

Result<std::string> ReadWholeFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ErrnoStatus("open " + path);
  return ReadAndClose(fd, path);
}

Result<std::string> ReadPrivateFile(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string top = StateDirectoryPath();
  if (!top.empty() && top != dir) TIPFS_RETURN_IF_ERROR(CheckPrivateDirectory(top));
  TIPFS_RETURN_IF_ERROR(CheckPrivateDirectory(dir));
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus("open " + path);
  struct stat st;
  Status status = fstat(fd, &st) != 0 ? ErrnoStatus("stat " + path)
                  : !S_ISREG(st.st_mode)
                      ? Status::FromErrno(EINVAL, path + " is not a regular file")
                      : CheckOwn(path, st);
  if (!status.ok()) {
    close(fd);
    return status;
  }
  return ReadAndClose(fd, path);
}

Result<size_t> ClearStateSubdirectory(const std::string& sub) {
  const std::string top = StateDirectoryPath();
  if (top.empty()) return Status::NotFound("no home directory for the tipfs state directory");
  const std::string dir = top + "/" + sub;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return size_t{0};
    return ErrnoStatus("open " + dir);
  }
  size_t removed = 0;
  Status status;
  while (dirent* entry = readdir(d)) {
    if (entry->d_name[0] == '.' && (entry->d_name[1] == '\0' || strcmp(entry->d_name, "..") == 0)) {
      continue;
    }
    const std::string path = dir + "/" + entry->d_name;
    if (unlink(path.c_str()) == 0) {
      ++removed;
    } else if (status.ok()) {
      status = ErrnoStatus("remove " + path);
    }
  }
  closedir(d);
  if (!status.ok()) return status;
  return removed;
}

Result<size_t> ClearSiteFiles() {
  Result<size_t> sites = ClearStateSubdirectory(kSitesSubdirectory);
  if (!sites.ok()) return sites.status();
  Result<size_t> refuted = ClearStateSubdirectory(kRefutedSitesSubdirectory);
  if (!refuted.ok()) return refuted.status();
  return *sites + *refuted;
}

void PruneOldest(const std::string& dir, size_t max_files) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::pair<int64_t, std::string>> files;
  while (dirent* entry = readdir(d)) {
    std::string path = dir + "/" + entry->d_name;
    struct stat st;
    if (entry->d_name[0] == '.' || lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    files.emplace_back(static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                       path);
  }
  closedir(d);
  if (files.size() <= max_files) return;
  std::sort(files.begin(), files.end());
  for (size_t i = 0; i + max_files < files.size(); ++i) unlink(files[i].second.c_str());
}

}  // namespace tipfs::spec
