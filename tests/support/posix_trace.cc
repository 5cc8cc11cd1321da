#include "tests/support/posix_trace.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tests/support/fs_inspect.h"

namespace tipfs::testing {
namespace {

char TypeLetter(mode_t mode) {
  if (S_ISREG(mode)) return 'f';
  if (S_ISDIR(mode)) return 'd';
  if (S_ISLNK(mode)) return 'l';
  if (S_ISFIFO(mode)) return 'p';
  if (S_ISCHR(mode)) return 'c';
  if (S_ISBLK(mode)) return 'b';
  if (S_ISSOCK(mode)) return 's';
  return '?';
}

char DirentLetter(unsigned char type) {
  switch (type) {
    case DT_REG:
      return 'f';
    case DT_DIR:
      return 'd';
    case DT_LNK:
      return 'l';
    case DT_FIFO:
      return 'p';
    case DT_CHR:
      return 'c';
    case DT_BLK:
      return 'b';
    case DT_SOCK:
      return 's';
    default:
      return 'u';  // DT_UNKNOWN: legal, but both file systems here know their types
  }
}

std::string StatText(const struct stat& st) {
  char text[160];
  std::snprintf(text, sizeof(text), "%c %04o nlink=%lu uid=%u gid=%u", TypeLetter(st.st_mode),
                st.st_mode & 07777, static_cast<unsigned long>(st.st_nlink), st.st_uid, st.st_gid);
  std::string out = text;
  if (!S_ISDIR(st.st_mode)) out += " size=" + std::to_string(st.st_size);
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
    out += " rdev=" + std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
  }
  return out;
}

bool After(const timespec& a, const timespec& b) {  // a > b
  return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
}
bool Same(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

std::string Classify(const timespec& now_value, const timespec& before, const timespec& t0) {
  if (Same(now_value, before)) return "same";
  if (!After(t0, now_value)) return "now";
  return "other";
}

}  // namespace

std::string PosixTrace::P(std::string_view rel) const { return root_ + "/" + std::string(rel); }

long PosixTrace::Do(const std::string& step, const std::function<long()>& op, bool record_value) {
  errno = 0;
  long rc = op();
  int err = errno;
  if (rc < 0) {
    lines_.push_back(step + ": " + ErrnoName(err));
  } else if (record_value) {
    lines_.push_back(step + ": ok=" + std::to_string(rc));
  } else {
    lines_.push_back(step + ": ok");
  }
  return rc;
}

void PosixTrace::Note(const std::string& step, const std::string& value) {
  lines_.push_back(step + ": " + value);
}

void PosixTrace::Stat(const std::string& step, std::string_view rel, bool follow) {
  struct stat st;
  int rc = follow ? stat(P(rel).c_str(), &st) : lstat(P(rel).c_str(), &st);
  Note(step, rc == 0 ? StatText(st) : ErrnoName(errno));
}

void PosixTrace::FStat(const std::string& step, int fd) {
  struct stat st;
  Note(step, fstat(fd, &st) == 0 ? StatText(st) : ErrnoName(errno));
}

void PosixTrace::Contents(const std::string& step, std::string_view rel) {
  int fd = open(P(rel).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Note(step, "open " + ErrnoName(errno));
  std::string data;
  char buffer[1 << 16];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) data.append(buffer, static_cast<size_t>(n));
  int err = errno;
  close(fd);
  if (n < 0) return Note(step, "read " + ErrnoName(err));
  Note(step, std::to_string(data.size()) + " bytes " + HashBytes(data));
}

void PosixTrace::Listing(const std::string& step, std::string_view rel) {
  DIR* dir = opendir(P(rel).c_str());
  if (dir == nullptr) return Note(step, "opendir " + ErrnoName(errno));
  std::vector<std::string> entries;
  errno = 0;
  while (dirent* d = readdir(dir))
    entries.push_back(std::string(d->d_name) + ":" + DirentLetter(d->d_type));
  int err = errno;
  closedir(dir);
  if (err != 0) return Note(step, "readdir " + ErrnoName(err));
  std::sort(entries.begin(), entries.end());
  std::string text;
  for (const std::string& e : entries) text += (text.empty() ? "" : " ") + e;
  Note(step, text);
}

PosixTrace::Mark PosixTrace::MarkTimes(std::string_view rel) {
  Mark mark;
  struct stat st;
  if (lstat(P(rel).c_str(), &st) != 0) {
    mark.error = errno;
    return mark;
  }
  mark.atime = st.st_atim;
  mark.mtime = st.st_mtim;
  mark.ctime = st.st_ctim;
  timespec newest = st.st_ctim;
  for (const timespec& t : {st.st_atim, st.st_mtim}) {
    if (After(t, newest)) newest = t;
  }
  timespec now;
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  // Times set into the future by the script are not waited for.
  if (newest.tv_sec > now.tv_sec + 2) newest = now;
  while (!After(now, newest)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    clock_gettime(CLOCK_REALTIME_COARSE, &now);
  }
  mark.t0 = now;
  return mark;
}

void PosixTrace::TimesSince(const std::string& step, std::string_view rel, const Mark& mark) {
  if (mark.error != 0) return Note(step, "mark " + ErrnoName(mark.error));
  struct stat st;
  if (lstat(P(rel).c_str(), &st) != 0) return Note(step, ErrnoName(errno));
  Note(step, "a=" + Classify(st.st_atim, mark.atime, mark.t0) +
                 " m=" + Classify(st.st_mtim, mark.mtime, mark.t0) +
                 " c=" + Classify(st.st_ctim, mark.ctime, mark.t0));
}

void PosixTrace::AsUser(uid_t uid, gid_t gid, const std::function<void(PosixTrace&)>& script) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Note("as uid " + std::to_string(uid), "pipe failed");
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string text;
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) {
      text = "dropping privileges failed: " + ErrnoName(errno) + "\n";
    } else {
      PosixTrace child(root_);
      script(child);
      for (const std::string& line : child.lines()) text += line + "\n";
    }
    size_t done = 0;
    while (done < text.size()) {
      ssize_t n = write(fds[1], text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof(buffer))) > 0)
    text.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    lines_.push_back("[uid " + std::to_string(uid) + "] " + text.substr(start, end - start));
    start = end + 1;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    Note("as uid " + std::to_string(uid), "child status " + std::to_string(status));
  }
}

void ExpectSameBehaviour(const std::string& native_root, const std::string& mount_root,
                         const std::function<void(PosixTrace&)>& script) {
  PosixTrace native(native_root);
  script(native);
  PosixTrace mounted(mount_root);
  script(mounted);
  const auto& a = native.lines();
  const auto& b = mounted.lines();
  if (std::getenv("TIPFS_TRACE") != nullptr) {
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      std::printf("%3zu native: %s\n    tipfs:  %s\n", i, i < a.size() ? a[i].c_str() : "-",
                  i < b.size() ? b[i].c_str() : "-");
    }
  }
  ASSERT_EQ(a.size(), b.size()) << "the script recorded a different number of steps";
  int mismatches = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    ++mismatches;
    ADD_FAILURE() << "step " << i << " differs\n  native: " << a[i] << "\n  tipfs:  " << b[i];
  }
  if (mismatches == 0) SUCCEED() << a.size() << " steps agree";
}

}  // namespace tipfs::testing
