// Crash harness on a real mount: writer processes create, write, truncate, rename, fsync and
// unlink files (and keep unlinked files open) while the daemon is killed with SIGKILL at a random
// moment. After each kill: the dead mount is detached, `tipfs fsck` may find only what a crash
// legitimately leaves (orphans, bytes past the end of a file), the volume is mounted again (which
// reclaims them), and then
//   - every file whose data and name were fsync'ed before the kill has exactly that data;
//   - an operation in flight at the kill left its file either before or after it (per byte for a
//     write or truncate, per name for a rename or unlink);
//   - after a clean unmount, fsck finds nothing: no space leaked, the tree consistent.
// Writers log what they made durable to a file outside the mount, one line per step:
//   C name seed size       created (written, fsync'ed, renamed into place, directory fsync'ed)
//   M- name offset length seed / M+ name    overwrite or extension begun / fsync'ed
//   T- name size / T+ name                  truncation begun / fsync'ed
//   R- from to / R+ from to                 rename begun / directory fsync'ed
//   U- name / U+ name                       unlink begun / directory fsync'ed
// Files of earlier trials stay and are checked again after every later kill.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

namespace fs_std = std::filesystem;

#ifndef TIPFS_CRASH_TRIALS
#define TIPFS_CRASH_TRIALS 5  // the long run builds with 50
#endif
constexpr int kWriters = 4;

// Byte `pos` of the content written with `seed`: a function of both, so any range can be
// recomputed and a byte at the wrong place is told apart.
char ContentByte(uint64_t seed, uint64_t pos) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + (pos >> 3) + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<char>(z >> (8 * (pos & 7)));
}
std::string Content(uint64_t seed, uint64_t offset, uint64_t length) {
  std::string s(length, '\0');
  for (uint64_t i = 0; i < length; ++i) s[i] = ContentByte(seed, offset + i);
  return s;
}

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1'000'000'000ll + ts.tv_nsec;
}

// ---- the writer (a child process) ----------------------------------------------------------

class Writer {
 public:
  Writer(std::string dir, std::string log, uint64_t seed)
      : dir_(std::move(dir)), log_(std::move(log)), rng_(seed), seed_(seed) {}

  // Runs until an operation fails (the daemon is gone). Exit status: 0 when the failure was the
  // dead connection; else 3, with "E <monotonic ns> <what> <errno>" logged: the kernel fails a
  // request the dying daemon was serving with other errnos too (EIO, ENOENT), so the test judges
  // by the time whether the error came before the kill.
  [[noreturn]] void Run() {
    log_fd_ = open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd_ < 0 || mkdir(dir_.c_str(), 0755) != 0) _exit(4);
    dir_fd_ = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd_ < 0) Die("open dir");
    for (;;) Step();
  }

 private:
  void Log(const std::string& line) {
    std::string l = line + "\n";
    if (write(log_fd_, l.data(), l.size()) != static_cast<ssize_t>(l.size())) _exit(5);
  }
  [[noreturn]] void Die(const char* what) {
    const int err = errno;
    // The daemon was killed: requests in flight are aborted, new ones find no connection.
    if (err == ENOTCONN || err == ECONNABORTED) _exit(0);
    Log("E " + std::to_string(MonotonicNanos()) + " " + what + " " + ErrnoName(err));
    _exit(3);
  }
  void Check(bool ok, const char* what) {
    if (!ok) Die(what);
  }
  std::string PathOf(const std::string& name) const { return dir_ + "/" + name; }
  void SyncDir() { Check(fsync(dir_fd_) == 0, "fsync dir"); }
  void WriteAll(int fd, const std::string& data, uint64_t offset, const char* what) {
    Check(pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset)) ==
              static_cast<ssize_t>(data.size()),
          what);
  }
  std::optional<std::string> PickFile() {
    if (files_.empty()) return std::nullopt;
    return files_[rng_() % files_.size()];
  }
  void Forget(const std::string& name) {
    for (size_t i = 0; i < files_.size(); ++i) {
      if (files_[i] == name) {
        files_.erase(files_.begin() + static_cast<long>(i));
        return;
      }
    }
  }

  void Step() {
    const int dice = static_cast<int>(rng_() % 100);
    if (dice < 25 || files_.size() < 2) return Create();
    auto name = PickFile();
    if (dice < 55) return Modify(*name);
    if (dice < 65) return Truncate(*name);
    if (dice < 78) return Rename(*name);
    if (dice < 88) return Unlink(*name);
    return KeepUnlinkedOpen();
  }

  void Create() {
    const std::string name = "f" + std::to_string(next_++);
    const std::string tmp = "tmp" + std::to_string(next_);
    const uint64_t seed = seed_ * 1000003 + next_;
    const uint64_t size = rng_() % (300 * 1024);
    int fd = open(PathOf(tmp).c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    Check(fd >= 0, "create");
    WriteAll(fd, Content(seed, 0, size), 0, "write new");
    Check(fsync(fd) == 0, "fsync new");
    close(fd);
    Check(rename(PathOf(tmp).c_str(), PathOf(name).c_str()) == 0, "rename new");
    SyncDir();
    Log("C " + name + " " + std::to_string(seed) + " " + std::to_string(size));
    files_.push_back(name);
  }

  void Modify(const std::string& name) {
    struct stat st;
    Check(stat(PathOf(name).c_str(), &st) == 0, "stat");
    const uint64_t offset = rng_() % (static_cast<uint64_t>(st.st_size) + 100 * 1024);
    const uint64_t length = 1 + rng_() % (200 * 1024);
    const uint64_t seed = rng_();
    Log("M- " + name + " " + std::to_string(offset) + " " + std::to_string(length) + " " +
        std::to_string(seed));
    int fd = open(PathOf(name).c_str(), O_WRONLY | O_CLOEXEC);
    Check(fd >= 0, "open");
    WriteAll(fd, Content(seed, offset, length), offset, "write");
    Check(fsync(fd) == 0, "fsync");
    close(fd);
    Log("M+ " + name);
  }

  void Truncate(const std::string& name) {
    struct stat st;
    Check(stat(PathOf(name).c_str(), &st) == 0, "stat");
    const uint64_t size = rng_() % (static_cast<uint64_t>(st.st_size) + 64 * 1024 + 1);
    Log("T- " + name + " " + std::to_string(size));
    int fd = open(PathOf(name).c_str(), O_WRONLY | O_CLOEXEC);
    Check(fd >= 0, "open");
    Check(ftruncate(fd, static_cast<off_t>(size)) == 0, "ftruncate");
    Check(fsync(fd) == 0, "fsync");
    close(fd);
    Log("T+ " + name);
  }

  void Rename(const std::string& name) {
    const std::string to = "f" + std::to_string(next_++);
    Log("R- " + name + " " + to);
    Check(rename(PathOf(name).c_str(), PathOf(to).c_str()) == 0, "rename");
    SyncDir();
    Log("R+ " + name + " " + to);
    Forget(name);
    files_.push_back(to);
  }

  void Unlink(const std::string& name) {
    Log("U- " + name);
    Check(unlink(PathOf(name).c_str()) == 0, "unlink");
    SyncDir();
    Log("U+ " + name);
    Forget(name);
  }

  // A file unlinked while open, written after the unlink: an orphan for the crash to leave.
  void KeepUnlinkedOpen() {
    if (open_unlinked_.size() >= 2) {
      close(open_unlinked_.front());
      open_unlinked_.erase(open_unlinked_.begin());
    }
    const std::string name = "o" + std::to_string(next_++);
    int fd = open(PathOf(name).c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    Check(fd >= 0, "create orphan");
    WriteAll(fd, Content(rng_(), 0, 100 * 1024), 0, "write orphan");
    Check(unlink(PathOf(name).c_str()) == 0, "unlink orphan");
    WriteAll(fd, Content(rng_(), 0, 50 * 1024), 100 * 1024, "write orphan");
    open_unlinked_.push_back(fd);
  }

  const std::string dir_, log_;
  std::mt19937_64 rng_;
  const uint64_t seed_;
  int log_fd_ = -1, dir_fd_ = -1;
  uint64_t next_ = 0;
  std::vector<std::string> files_;
  std::vector<int> open_unlinked_;
};

// ---- the verifier ---------------------------------------------------------------------------

// Replays one writer's log and checks its directory against it. Returns "" or the problems.
// A writer's failure logged before `killed_at` (monotonic ns) is a problem; one after it is the
// kernel failing a request of the dead daemon.
std::string VerifyWriter(const std::string& dir, const std::string& log, int64_t killed_at) {
  std::map<std::string, std::string> files;  // durable name -> durable content
  std::vector<std::string> pending;          // the last begun step, if not finished
  std::ifstream in(log);
  std::string line;
  std::string problems;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string op, name;
    words >> op >> name;
    if (op == "C") {
      uint64_t seed, size;
      words >> seed >> size;
      files[name] = Content(seed, 0, size);
    } else if (op == "E") {
      if (std::stoll(name) < killed_at) problems += "writer failed before the kill: " + line + "\n";
    } else if (op.size() == 2 && op[1] == '-') {
      pending = {op, name};
      std::string w;
      while (words >> w) pending.push_back(w);
    } else if (op.size() == 2 && op[1] == '+') {
      const std::vector<std::string> step = pending;
      pending.clear();
      if (step.empty() || step[0][0] != op[0]) return "log out of order at: " + line;
      if (op == "M+") {
        const uint64_t offset = std::stoull(step[2]), length = std::stoull(step[3]);
        std::string& data = files[name];
        if (data.size() < offset + length) data.resize(offset + length, '\0');
        data.replace(offset, length, Content(std::stoull(step[4]), offset, length));
      } else if (op == "T+") {
        files[name].resize(std::stoull(step[2]), '\0');
      } else if (op == "R+") {
        files[step[2]] = files[name];
        files.erase(name);
      } else if (op == "U+") {
        files.erase(name);
      }
    }
  }
  auto read = [&](const std::string& name) -> std::optional<std::string> {
    std::ifstream f(dir + "/" + name, std::ios::binary);
    if (!f) return std::nullopt;
    std::ostringstream out;
    out << f.rdbuf();
    return out.str();
  };
  // Names the unfinished step may have changed.
  std::set<std::string> uncertain;
  if (!pending.empty()) {
    uncertain.insert(pending[1]);
    if (pending[0] == "R-") uncertain.insert(pending[2]);
  }
  for (const auto& [name, want] : files) {
    if (uncertain.count(name) != 0) continue;
    auto got = read(name);
    if (!got) {
      problems += name + ": fsync'ed, but missing\n";
    } else if (*got != want) {
      problems += name + ": fsync'ed with " + std::to_string(want.size()) + " bytes, reads " +
                  std::to_string(got->size()) + " bytes that differ\n";
    }
  }
  if (pending.empty()) return problems;
  const std::string& op = pending[0];
  const std::string& name = pending[1];
  auto old_data = files.find(name);
  if (old_data == files.end()) return problems + "log names unknown file " + name + "\n";
  const std::string before = old_data->second;
  auto got = read(name);
  if (op == "M-" || op == "T-") {
    std::string after = before;
    if (op == "M-") {
      const uint64_t offset = std::stoull(pending[2]), length = std::stoull(pending[3]);
      if (after.size() < offset + length) after.resize(offset + length, '\0');
      after.replace(offset, length, Content(std::stoull(pending[4]), offset, length));
    } else {
      after.resize(std::stoull(pending[2]), '\0');
    }
    if (!got) return problems + name + ": missing after an interrupted " + op + "\n";
    const size_t lo = std::min(before.size(), after.size());
    const size_t hi = std::max(before.size(), after.size());
    if (got->size() < lo || got->size() > hi) {
      return problems + name + ": " + std::to_string(got->size()) + " bytes after an interrupted " +
             op + " from " + std::to_string(before.size()) + " to " + std::to_string(after.size()) +
             "\n";
    }
    for (size_t i = 0; i < got->size(); ++i) {
      const char b = i < before.size() ? before[i] : 0;
      const char a = i < after.size() ? after[i] : 0;
      if ((*got)[i] != b && (*got)[i] != a) {
        return problems + name + ": byte " + std::to_string(i) +
               " is neither before nor after the interrupted " + op + "\n";
      }
    }
  } else if (op == "R-") {
    auto moved = read(pending[2]);
    if (got.has_value() == moved.has_value()) {
      return problems + "rename " + name + " -> " + pending[2] +
             " interrupted: " + (got ? "both names exist" : "neither name exists") + "\n";
    }
    if ((got ? *got : *moved) != before) {
      return problems + "rename " + name + " -> " + pending[2] + " interrupted: data differs\n";
    }
  } else if (op == "U-") {
    if (got && *got != before) return problems + name + ": unlink interrupted: data differs\n";
  }
  return problems;
}

// ---- the test -------------------------------------------------------------------------------

class CrashMountTest : public MountedTest {
 protected:
  std::string Tipfs(const std::string& args, int* exit_code) {
    CommandResult r = RunSplit(TipfsBinary() + " " + args);
    *exit_code = r.exit_code;
    return r.out + r.err;
  }

  // fsck of the unmounted volume; "" when its findings are all in `allowed` kinds.
  std::string Fsck(const std::vector<std::string>& allowed, int* exit_code) {
    const std::string out = Tipfs("fsck " + mount_->disks()[0], exit_code);
    std::istringstream lines(out);
    std::string line, unexpected;
    while (std::getline(lines, line)) {
      if (line.rfind("[", 0) != 0) continue;
      bool ok = false;
      for (const std::string& kind : allowed) ok |= line.rfind("[" + kind + "]", 0) == 0;
      if (!ok) unexpected += line + "\n";
    }
    if (*exit_code != 0 && *exit_code != 4) unexpected += out;
    return unexpected;
  }
};

TEST_F(CrashMountTest, FsyncedDataSurvivesSigkillOfTheDaemon) {
  std::mt19937_64 rng(0xC0FFEE);
  struct WriterRun {
    std::string dir, log;
    int64_t killed_at = 0;
  };
  std::vector<WriterRun> writers;
  int leftovers = 0;
  for (int trial = 0; trial < TIPFS_CRASH_TRIALS; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    std::vector<pid_t> children;
    for (int w = 0; w < kWriters; ++w) {
      const std::string name = "t" + std::to_string(trial) + "w" + std::to_string(w);
      writers.push_back(WriterRun{Path(name), mount_->root() + "/" + name + ".log"});
      const uint64_t seed = rng();
      pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) Writer(writers.back().dir, writers.back().log, seed).Run();
      children.push_back(pid);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + rng() % 1500));
    const pid_t daemon = ReadDaemonPid(mount_->disks()[0]);
    ASSERT_TRUE(ProcessAlive(daemon));
    const int64_t killed_at = MonotonicNanos();
    for (size_t i = writers.size() - kWriters; i < writers.size(); ++i) {
      writers[i].killed_at = killed_at;
    }
    ASSERT_EQ(kill(daemon, SIGKILL), 0);
    ASSERT_TRUE(WaitForProcessExit(daemon, 30));
    for (pid_t child : children) {
      int status = 0;
      ASSERT_EQ(waitpid(child, &status, 0), child);
      EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3))
          << "writer " << child << " ended with status " << status;
    }
    LazyUnmount(mount_->mountpoint());
    ASSERT_FALSE(IsMountPoint(mount_->mountpoint()));

    // What a killed daemon may leave: orphans and bytes past the end of files. Nothing else.
    int code = 0;
    EXPECT_EQ(Fsck({"orphan", "object-too-long"}, &code), "");
    leftovers += code == 4;

    ASSERT_EQ(mount_->Mount(), "");
    // This trial's writers after every kill; all earlier ones every fifth kill and after the
    // last (they must survive later kills too, but checking them all each time is quadratic).
    const bool all = trial % 5 == 4 || trial == TIPFS_CRASH_TRIALS - 1;
    for (size_t i = all ? 0 : writers.size() - kWriters; i < writers.size(); ++i) {
      const WriterRun& w = writers[i];
      const std::string problems = VerifyWriter(w.dir, w.log, w.killed_at);
      EXPECT_EQ(problems, "") << "writer " << w.dir;
      if (!problems.empty() && std::getenv("TIPFS_KEEP_LOGS") != nullptr) {
        fs_std::copy_file(w.log,
                          std::string(std::getenv("TIPFS_KEEP_LOGS")) + "/" +
                              fs_std::path(w.log).filename().string(),
                          fs_std::copy_options::overwrite_existing);
      }
    }
    // A clean unmount after the recovering mount: nothing leaked, nothing left to repair.
    ASSERT_EQ(mount_->Unmount(), "");
    EXPECT_EQ(Fsck({}, &code), "");
    EXPECT_EQ(code, 0);
    ASSERT_EQ(mount_->Mount(), "");
    if (HasFailure()) break;
  }
  size_t steps = 0;
  for (const WriterRun& w : writers) {
    std::ifstream in(w.log);
    std::string line;
    while (std::getline(in, line)) ++steps;
  }
  std::printf(
      "%d kills, %zu logged writer steps; fsck found crash leftovers (orphans, bytes "
      "past the end) after %d\n",
      TIPFS_CRASH_TRIALS, steps, leftovers);
}

}  // namespace
}  // namespace tipfs::testing
