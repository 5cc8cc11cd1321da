#include "tests/support/fs_inspect.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "tests/support/mount_fixture.h"

namespace tipfs::testing {

std::string ErrnoName(int err) {
  if (err == 0) return "OK";
  const char* name = strerrorname_np(err);
  return name != nullptr ? name : "errno" + std::to_string(err);
}

// ---- processes and mounts ----

pid_t ReadDaemonPid(const std::string& disk0) {
  std::ifstream in(disk0 + "/tipfs.pid");
  pid_t pid = 0;
  if (!(in >> pid)) return 0;
  return pid;
}

bool ProcessAlive(pid_t pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A zombie still answers kill(0); its state letter in /proc/<pid>/stat says it is gone.
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.empty()) return false;
  size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return true;
  char state = text[paren + 2];
  return state != 'Z' && state != 'X';
}

bool WaitForProcessExit(pid_t pid, double seconds) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (ProcessAlive(pid)) {
    // Our own child (a foreground daemon) needs reaping to disappear.
    waitpid(pid, nullptr, WNOHANG);
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::vector<pid_t> ProcessesMentioning(const std::string& text) {
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  const pid_t self = getpid();
  while (dirent* d = readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(d->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self) continue;
    std::ifstream in(std::string("/proc/") + d->d_name + "/cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    // The shell that popen started for this very check would match too; only real processes
    // that are alive count.
    if (cmdline.find(text) != std::string::npos && ProcessAlive(static_cast<pid_t>(pid))) {
      pids.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(proc);
  return pids;
}

std::string ProcessesUsing(const std::string& path) {
  std::string report;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return report;
  const std::string prefix = path + "/";
  while (dirent* d = readdir(proc)) {
    char* end = nullptr;
    std::strtol(d->d_name, &end, 10);
    if (*end != '\0') continue;
    const std::string base = std::string("/proc/") + d->d_name;
    std::vector<std::string> links = {base + "/cwd", base + "/root"};
    if (DIR* fds = opendir((base + "/fd").c_str())) {
      while (dirent* f = readdir(fds)) {
        if (f->d_name[0] != '.') links.push_back(base + "/fd/" + f->d_name);
      }
      closedir(fds);
    }
    for (const std::string& link : links) {
      char target[PATH_MAX + 1];
      ssize_t n = readlink(link.c_str(), target, PATH_MAX);
      if (n <= 0) continue;
      const std::string text(target, static_cast<size_t>(n));
      if (text != path && text.rfind(prefix, 0) != 0) continue;
      std::ifstream comm(base + "/comm");
      std::string name;
      std::getline(comm, name);
      report += std::string(d->d_name) + " (" + name + "): " + link.substr(base.size() + 1) +
                " -> " + text + "\n";
    }
  }
  closedir(proc);
  return report;
}

std::string UnmountRetryingWhileBusy(TipfsMount& mount, int attempts) {
  std::string error;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    error = mount.Unmount();
    if (error.empty()) return "";
    if (error.find("busy") == std::string::npos) return error;
    const std::string users = ProcessesUsing(mount.mountpoint());
    std::fprintf(stderr, "note: unmount of %s busy (attempt %d); users: %s\n",
                 mount.mountpoint().c_str(), attempt + 1,
                 users.empty() ? "none found" : users.c_str());
    error += " users: " + (users.empty() ? std::string("none found") : users);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return error;
}

namespace {

// Undoes the octal escapes (\040 for space) of /proc/self/mountinfo.
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      out.push_back(static_cast<char>(std::strtol(field.substr(i + 1, 3).c_str(), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

std::string Canonical(const std::string& path) {
  char resolved[PATH_MAX];
  // realpath of a dead FUSE mount fails (ENOTCONN); the path as given is then the best guess.
  if (realpath(path.c_str(), resolved) != nullptr) return resolved;
  return std::filesystem::path(path).lexically_normal().string();
}

}  // namespace

bool IsMountPoint(const std::string& path) {
  const std::string wanted = Canonical(path);
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, mountpoint;
    fields >> id >> parent >> devno >> root >> mountpoint;
    if (Unescape(mountpoint) == wanted) return true;
  }
  return false;
}

void ExpectTerminatedDaemonUnmounts(pid_t daemon, const std::string& mountpoint) {
  EXPECT_EQ(kill(daemon, SIGTERM), 0) << ErrnoName(errno);
  EXPECT_TRUE(WaitForProcessExit(daemon, 60)) << "daemon " << daemon << " outlived SIGTERM";
  if (IsMountPoint(mountpoint)) {
    ADD_FAILURE() << "the daemon exited on SIGTERM but left the mount behind";
    LazyUnmount(mountpoint);
  }
}

void LazyUnmount(const std::string& path) {
  if (geteuid() == 0) {
    umount2(path.c_str(), MNT_DETACH);
  } else {
    RunCommand("fusermount3 -uz " + ShellQuote(path));
  }
}

CommandResult RunSplit(const std::string& command) {
  char dir_pattern[] = "/tmp/tipfs-cmd-XXXXXX";
  CommandResult result;
  if (mkdtemp(dir_pattern) == nullptr) return result;
  const std::string dir = dir_pattern;
  const std::string full = "( " + command + " ) >" + dir + "/out 2>" + dir + "/err </dev/null";
  int status = std::system(full.c_str());
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream out(dir + "/out"), err(dir + "/err");
  result.out.assign(std::istreambuf_iterator<char>(out), std::istreambuf_iterator<char>());
  result.err.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return result;
}

std::string ShellQuote(const std::string& word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

// ---- backing disks ----

std::string ObjectPath(const std::string& disk, uint64_t ino) {
  char rel[40];
  std::snprintf(rel, sizeof(rel), "%02x/%016" PRIx64, static_cast<unsigned>(ino & 0xff), ino);
  return disk + "/objects/" + rel;
}

std::map<std::string, uint64_t> ObjectFiles(const std::string& disk) {
  std::map<std::string, uint64_t> files;
  const std::filesystem::path objects = disk + "/objects";
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(objects, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    files[std::filesystem::relative(it->path(), objects).string()] = st.st_size;
  }
  return files;
}

uint64_t ObjectBytes(const std::string& disk) {
  uint64_t total = 0;
  for (const auto& [path, size] : ObjectFiles(disk)) total += size;
  return total;
}

std::string DiskListing(const std::string& dir, const std::vector<std::string>& skip_sizes_under) {
  std::vector<std::string> lines;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (lstat(it->path().c_str(), &st) != 0) continue;
    const std::string rel = std::filesystem::relative(it->path(), dir).string();
    bool live = false;
    for (const std::string& prefix : skip_sizes_under) live |= rel.rfind(prefix + "/", 0) == 0;
    std::string line = rel + " ";
    if (S_ISDIR(st.st_mode)) {
      line += "dir";
    } else if (S_ISREG(st.st_mode)) {
      line += "file";
      if (!live) line += " " + std::to_string(st.st_size);
      if (it->path().filename() == "tipfs-label") line += " " + HashFile(it->path().string());
    } else {
      line += "other";
    }
    lines.push_back(line);
  }
  if (ec) lines.push_back("(listing error: " + ec.message() + ")");
  std::sort(lines.begin(), lines.end());
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

// ---- files ----

std::string ReadFileOrDie(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ADD_FAILURE() << "open " << path << ": " << ErrnoName(errno);
    return "";
  }
  std::string data;
  char buffer[1 << 16];
  while (true) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      ADD_FAILURE() << "read " << path << ": " << ErrnoName(errno);
      break;
    }
    if (n == 0) break;
    data.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return data;
}

bool WriteFileBytes(const std::string& path, const std::string& bytes, mode_t mode) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      close(fd);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return close(fd) == 0;
}

std::string HashBytes(const std::string& bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016" PRIx64, hash);
  return text;
}

std::string HashFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return "unreadable:" + ErrnoName(errno);
  uint64_t hash = 0xcbf29ce484222325ull;
  char buffer[1 << 16];
  std::string error;
  while (true) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      error = "read error:" + ErrnoName(errno);
      break;
    }
    if (n == 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      hash ^= static_cast<unsigned char>(buffer[i]);
      hash *= 0x100000001b3ull;
    }
  }
  close(fd);
  if (!error.empty()) return error;
  char text[17];
  std::snprintf(text, sizeof(text), "%016" PRIx64, hash);
  return text;
}

std::string PatternBytes(size_t length, uint64_t seed) {
  std::string out(length, '\0');
  uint64_t state = seed;
  for (size_t i = 0; i < length; i += 8) {
    // splitmix64 (Steele, Lea, Flood 2014).
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(&out[i], &z, std::min<size_t>(8, length - i));
  }
  return out;
}

// ---- tree snapshots ----

namespace {

std::string TimeText(const timespec& ts) {
  return std::to_string(ts.tv_sec) + "." + std::to_string(ts.tv_nsec);
}

std::string XattrText(const std::string& path) {
  std::vector<char> names(llistxattr(path.c_str(), nullptr, 0) + 1);
  ssize_t n = llistxattr(path.c_str(), names.data(), names.size());
  if (n < 0) return " xattrs:" + ErrnoName(errno);
  std::set<std::string> sorted;
  for (ssize_t i = 0; i < n; i += static_cast<ssize_t>(std::strlen(&names[i])) + 1) {
    sorted.insert(&names[i]);
  }
  std::string text;
  for (const std::string& name : sorted) {
    if (name.rfind("user.", 0) != 0) continue;  // security.* etc. differ between file systems
    ssize_t size = lgetxattr(path.c_str(), name.c_str(), nullptr, 0);
    std::string value(size > 0 ? static_cast<size_t>(size) : 0, '\0');
    if (size > 0) size = lgetxattr(path.c_str(), name.c_str(), value.data(), value.size());
    text += " " + name + "=" + (size < 0 ? ErrnoName(errno) : HashBytes(value));
  }
  return text;
}

}  // namespace

std::vector<std::string> SnapshotTree(const std::string& root, const SnapshotOptions& options) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    paths.push_back(std::filesystem::relative(it->path(), root).string());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> lines;
  if (ec) lines.push_back("(walk error under " + root + ": " + ec.message() + ")");
  std::map<std::pair<dev_t, ino_t>, std::string> first_path_of_inode;
  for (const std::string& rel : paths) {
    const std::string path = root + "/" + rel;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) {
      lines.push_back(rel + " lstat:" + ErrnoName(errno));
      continue;
    }
    const bool dir = S_ISDIR(st.st_mode);
    char mode[16];
    std::snprintf(mode, sizeof(mode), "%06o", st.st_mode);
    std::string line = rel + " mode=" + mode;
    if (options.inode_numbers) line += " ino=" + std::to_string(st.st_ino);
    if (options.owner)
      line += " uid=" + std::to_string(st.st_uid) + " gid=" + std::to_string(st.st_gid);
    if (!dir || options.dir_nlink) line += " nlink=" + std::to_string(st.st_nlink);
    if (!dir) line += " size=" + std::to_string(st.st_size);
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) line += " rdev=" + std::to_string(st.st_rdev);
    if (dir ? options.dir_mtime : options.mtime) line += " mtime=" + TimeText(st.st_mtim);
    if (options.atime) line += " atime=" + TimeText(st.st_atim);
    if (options.ctime) line += " ctime=" + TimeText(st.st_ctim);
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX + 1];
      ssize_t n = readlink(path.c_str(), target, PATH_MAX);
      line += " -> " + (n < 0 ? ErrnoName(errno) : std::string(target, static_cast<size_t>(n)));
    } else if (S_ISREG(st.st_mode)) {
      if (options.contents) line += " data=" + HashFile(path);
      if (st.st_nlink > 1) {
        auto [it, fresh] = first_path_of_inode.emplace(std::make_pair(st.st_dev, st.st_ino), rel);
        if (!fresh) line += " linkof=" + it->second;
      }
    }
    if (options.xattrs && !S_ISLNK(st.st_mode) && !S_ISFIFO(st.st_mode)) {
      line += XattrText(path);
    }
    lines.push_back(line);
  }
  return lines;
}

std::string DiffLines(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::multiset<std::string> sa(a.begin(), a.end()), sb(b.begin(), b.end());
  std::string text;
  int shown = 0;
  for (const std::string& line : a) {
    if (sb.count(line) == 0 && shown++ < 40) text += "- " + line + "\n";
  }
  for (const std::string& line : b) {
    if (sa.count(line) == 0 && shown++ < 40) text += "+ " + line + "\n";
  }
  if (shown > 40) text += "... (" + std::to_string(shown - 40) + " more)\n";
  return text;
}

}  // namespace tipfs::testing
