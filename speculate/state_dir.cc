#include "speculate/state_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
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

Status MakePrivateDirectory(const std::string& path) {
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + path);
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return ErrnoStatus("stat " + path);
  if (!S_ISDIR(st.st_mode)) return Status::FromErrno(ENOTDIR, path + " is not a directory");
  if (st.st_uid != geteuid()) {
    return Status::FromErrno(EPERM, path + " belongs to another user");
  }
  if ((st.st_mode & 022) != 0) {
    return Status::FromErrno(EPERM, path + " is writable by others (chmod 700 it)");
  }
  return Status::OK();
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
