// Load: 16 processes work on one mount at once for a bounded time (30 s; TIPFS_LOAD_SECONDS
// changes it): each keeps a model of its own directory and creates, writes, appends, truncates,
// reads back (with hints by descriptor and by path first), renames, links, unlinks, makes and
// removes directories, sets xattrs and fsyncs; all of them also race each other in one shared
// directory, where only the errnos such races give on a local file system are allowed; and three
// of them read their files through `tipfs run` (speculation) over and over. At the end every
// process checks everything it owns against its model, nothing may have deadlocked (a watchdog
// names the operation a stuck process was in), and after unmounting fsck finds nothing. Meanwhile
// libtipspec's sandbox tests run again under this load, and afterwards the control files any user
// may read must not name any file.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"
#include "tipfs/hint.h"

namespace tipfs::testing {
namespace {

constexpr int kWorkers = 16;
#ifdef TIPFS_SANITIZED
constexpr int kSpeculating = 0;  // see tests/reliability/CMakeLists.txt
#else
constexpr int kSpeculating = 3;  // the last three run their reads under `tipfs run`
#endif
constexpr size_t kSlotBytes = 160;
constexpr char kDistinctName[] = "name-that-no-counter-may-show";

int LoadSeconds() {
  const char* env = std::getenv("TIPFS_LOAD_SECONDS");
  return env != nullptr ? std::max(1, std::atoi(env)) : 30;
}

int64_t NowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec;
}

// One worker process. `slot` (shared memory) always says what it is doing, for the watchdog.
class Worker {
 public:
  Worker(int id, std::string mount, std::string result, char* slot, int64_t deadline)
      : id_(id),
        mount_(std::move(mount)),
        dir_(mount_ + "/w" + std::to_string(id)),
        shared_(mount_ + "/shared"),
        result_(std::move(result)),
        slot_(slot),
        deadline_(deadline),
        rng_(1000 + id) {}

  [[noreturn]] void Run() {
    Check(mkdir(dir_.c_str(), 0755) == 0, "mkdir own", dir_);
    while (NowSeconds() < deadline_ && errors_.size() < 5) {
      Step();
      ++ops_;
    }
    Doing("final check");
    VerifyAll();
    Finish();
  }

  [[noreturn]] void RunSpeculating(const std::string& tipfs) {
    Check(mkdir(dir_.c_str(), 0755) == 0, "mkdir own", dir_);
    std::string names;
    for (int i = 0; i < 8; ++i) {
      const std::string path = dir_ + "/s" + std::to_string(i);
      Check(WriteFileBytes(path, PatternBytes(128 * 1024 * (1 + i % 4), 5000 + id_ * 10 + i)),
            "write", path);
      names += " " + ShellQuote(path);
    }
    const std::string plain = RunSplit("sha256sum" + names).out;
    while (NowSeconds() < deadline_ && errors_.size() < 5) {
      Doing("tipfs run sha256sum");
      CommandResult r =
          RunSplit(tipfs + " run --mount " + ShellQuote(mount_) + " -- sha256sum" + names);
      if (r.exit_code != 0 || r.out != plain) {
        errors_.push_back("tipfs run sha256sum: exit " + std::to_string(r.exit_code) + ", " +
                          (r.out == plain ? "same sums" : "different sums: " + r.out) + r.err);
      }
      ++ops_;
    }
    Finish();
  }

 private:
  void Doing(const std::string& what) { std::snprintf(slot_, kSlotBytes, "%.150s", what.c_str()); }
  bool Check(bool ok, const std::string& op, const std::string& path) {
    if (!ok) errors_.push_back(op + " " + path + ": " + ErrnoName(errno));
    return ok;
  }
  // A race in the shared directory may fail only as rename/unlink/... would on a local disk.
  void Racy(int rc, const std::string& op, const std::string& path, std::set<int> allowed) {
    if (rc != 0 && allowed.count(errno) == 0)
      errors_.push_back(op + " " + path + ": " + ErrnoName(errno));
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string RandomName() {
    if (files_.empty()) return "";
    auto it = files_.begin();
    std::advance(it, rng_() % files_.size());
    return it->first;
  }
  std::string Content(size_t size) { return PatternBytes(size, rng_()); }

  void Step() {
    const int dice = static_cast<int>(rng_() % 100);
    if (dice < 14 || files_.size() < 3) return Create();
    const std::string name = RandomName();
    if (dice < 28) return Overwrite(name);
    if (dice < 33) return Truncate(name);
    if (dice < 53) return ReadBack(name, /*hint=*/dice % 2 == 0);
    if (dice < 57) return HintPathsAndRead();
    if (dice < 62) return Rename(name);
    if (dice < 67) return Unlink(name);
    if (dice < 70) return Link(name);
    if (dice < 72) return Symlink(name);
    if (dice < 75) return Xattr(name);
    if (dice < 78) return Subdirectory();
    if (dice < 82) return Listing();
    if (dice < 88) return Shared();
    return Sync(name);
  }

  void Create() {
    const std::string name = "f" + std::to_string(serial_++);
    Doing("create " + name);
    auto data = std::make_shared<std::string>(Content(rng_() % (1 << 20)));
    if (!Check(WriteFileBytes(Path(name), *data), "create", Path(name))) return;
    files_[name] = data;
  }

  void Overwrite(const std::string& name) {
    std::string& data = *files_[name];
    const uint64_t offset = rng_() % (data.size() + 64 * 1024);
    const std::string bytes = Content(1 + rng_() % (256 * 1024));
    Doing("pwrite " + name);
    int fd = open(Path(name).c_str(), O_WRONLY | O_CLOEXEC);
    if (!Check(fd >= 0, "open", Path(name))) return;
    Check(pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)) ==
              static_cast<ssize_t>(bytes.size()),
          "pwrite", Path(name));
    close(fd);
    if (data.size() < offset + bytes.size()) data.resize(offset + bytes.size(), '\0');
    data.replace(offset, bytes.size(), bytes);
  }

  void Truncate(const std::string& name) {
    std::string& data = *files_[name];
    const uint64_t size = rng_() % (data.size() + 100'000);
    Doing("truncate " + name);
    if (Check(truncate(Path(name).c_str(), static_cast<off_t>(size)) == 0, "truncate",
              Path(name))) {
      data.resize(size, '\0');
    }
  }

  void ReadBack(const std::string& name, bool hint) {
    const std::string& want = *files_[name];
    Doing("read " + name);
    int fd = open(Path(name).c_str(), O_RDONLY | O_CLOEXEC);
    if (!Check(fd >= 0, "open", Path(name))) return;
    if (hint && !want.empty()) {
      Check(tipfs_hint_range(fd, 0, 0) == 0 || errno == EDQUOT || errno == ENOBUFS, "hint",
            Path(name));
    }
    std::string got;
    std::vector<char> buffer(1 + rng_() % (300 * 1024));
    ssize_t n;
    while ((n = read(fd, buffer.data(), buffer.size())) > 0) got.append(buffer.data(), n);
    Check(n == 0, "read", Path(name));
    close(fd);
    if (n == 0 && got != want) {
      errors_.push_back("read " + Path(name) + ": " + std::to_string(got.size()) +
                        " bytes differ from the " + std::to_string(want.size()) + " written");
    }
  }

  void HintPathsAndRead() {
    std::vector<std::string> paths = {mount_ + "/" + kDistinctName};
    for (int i = 0; i < 4 && !files_.empty(); ++i) paths.push_back(Path(RandomName()));
    std::vector<const char*> c_paths;
    for (const std::string& p : paths) c_paths.push_back(p.c_str());
    Doing("hint paths");
    int fd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (!Check(fd >= 0, "open dir", dir_)) return;
    Check(tipfs_hint_files(fd, c_paths.data(), c_paths.size(), TIPFS_SOURCE_MANUAL) == 0 ||
              errno == EDQUOT || errno == ENOBUFS,
          "hint paths", dir_);
    close(fd);
    for (size_t i = 1; i < paths.size(); ++i) ReadBack(paths[i].substr(dir_.size() + 1), false);
  }

  void Rename(const std::string& name) {
    const std::string to = rng_() % 3 == 0 ? RandomName() : "f" + std::to_string(serial_++);
    if (to == name) return;
    Doing("rename " + name + " " + to);
    if (Check(rename(Path(name).c_str(), Path(to).c_str()) == 0, "rename", Path(name))) {
      // rename(2) between two links of one file does nothing: both names stay.
      auto target = files_.find(to);
      if (target != files_.end() && target->second == files_[name]) return;
      files_[to] = files_[name];
      files_.erase(name);
    }
  }

  void Unlink(const std::string& name) {
    Doing("unlink " + name);
    if (Check(unlink(Path(name).c_str()) == 0, "unlink", Path(name))) files_.erase(name);
  }

  void Link(const std::string& name) {
    const std::string to = "l" + std::to_string(serial_++);
    Doing("link " + name);
    if (Check(link(Path(name).c_str(), Path(to).c_str()) == 0, "link", Path(name))) {
      files_[to] = files_[name];  // one content, two names
    }
  }

  void Symlink(const std::string& name) {
    const std::string link_name = "sym" + std::to_string(serial_++);
    Doing("symlink " + name);
    if (!Check(symlink(name.c_str(), Path(link_name).c_str()) == 0, "symlink", Path(link_name)))
      return;
    char target[256];
    ssize_t n = readlink(Path(link_name).c_str(), target, sizeof(target));
    if (Check(n >= 0, "readlink", Path(link_name)) && std::string(target, n) != name) {
      errors_.push_back("readlink " + Path(link_name) + " gave " + std::string(target, n));
    }
    Check(unlink(Path(link_name).c_str()) == 0, "unlink symlink", Path(link_name));
  }

  void Xattr(const std::string& name) {
    const std::string value = Content(1 + rng_() % 200);
    Doing("xattr " + name);
    if (!Check(setxattr(Path(name).c_str(), "user.load", value.data(), value.size(), 0) == 0,
               "setxattr", Path(name))) {
      return;
    }
    char got[256];
    ssize_t n = getxattr(Path(name).c_str(), "user.load", got, sizeof(got));
    if (Check(n >= 0, "getxattr", Path(name)) && std::string(got, n) != value) {
      errors_.push_back("getxattr " + Path(name) + " gave other bytes");
    }
  }

  void Subdirectory() {
    const std::string sub = Path("d" + std::to_string(serial_++));
    Doing("subdirectory");
    if (!Check(mkdir(sub.c_str(), 0755) == 0, "mkdir", sub)) return;
    Check(WriteFileBytes(sub + "/x", "inside"), "write", sub + "/x");
    Check(rmdir(sub.c_str()) != 0 && errno == ENOTEMPTY, "rmdir of a non-empty directory", sub);
    Check(unlink((sub + "/x").c_str()) == 0, "unlink", sub + "/x");
    Check(rmdir(sub.c_str()) == 0, "rmdir", sub);
  }

  void Listing() {
    Doing("listing");
    std::set<std::string> names;
    DIR* d = opendir(dir_.c_str());
    if (!Check(d != nullptr, "opendir", dir_)) return;
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") names.insert(n);
    }
    closedir(d);
    std::set<std::string> want;
    for (const auto& [n, data] : files_) want.insert(n);
    if (names != want) {
      errors_.push_back("readdir " + dir_ + ": " + std::to_string(names.size()) + " names, " +
                        std::to_string(want.size()) + " expected");
    }
    for (const auto& [n, data] : files_) {
      struct stat st;
      if (!Check(stat(Path(n).c_str(), &st) == 0, "stat", Path(n))) continue;
      nlink_t links = 0;
      for (const auto& [m, other] : files_) links += other == data;
      if (static_cast<size_t>(st.st_size) != data->size() || st.st_nlink != links) {
        errors_.push_back("stat " + Path(n) + ": size " + std::to_string(st.st_size) + "/" +
                          std::to_string(data->size()) + ", nlink " + std::to_string(st.st_nlink) +
                          "/" + std::to_string(links));
      }
    }
  }

  // All workers at once in one directory: the outcome of each race is open, its errnos are not.
  void Shared() {
    const std::string a = shared_ + "/s" + std::to_string(rng_() % 24);
    const std::string b = shared_ + "/s" + std::to_string(rng_() % 24);
    const std::string d = shared_ + "/d" + std::to_string(rng_() % 6);
    Doing("shared " + a);
    switch (rng_() % 6) {
      case 0: {
        int fd = open(a.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        Racy(fd >= 0 ? 0 : -1, "create", a, {ENOENT});
        if (fd >= 0) {
          const std::string bytes = Content(rng_() % 70'000);
          Racy(write(fd, bytes.data(), bytes.size()) >= 0 ? 0 : -1, "write", a, {});
          close(fd);
        }
        break;
      }
      case 1:
        Racy(rename(a.c_str(), b.c_str()), "rename", a, {ENOENT, EISDIR, ENOTDIR});
        break;
      case 2:
        Racy(unlink(a.c_str()), "unlink", a, {ENOENT, EISDIR});
        break;
      case 3:
        Racy(mkdir(d.c_str(), 0755), "mkdir", d, {EEXIST});
        break;
      case 4:
        Racy(rmdir(d.c_str()), "rmdir", d, {ENOENT, ENOTEMPTY});
        break;
      default:
        Racy(rename(a.c_str(), (d + "/in").c_str()), "rename into", d, {ENOENT, ENOTDIR, EISDIR});
        break;
    }
  }

  void Sync(const std::string& name) {
    Doing("fsync " + name);
    int fd = open(Path(name).c_str(), O_RDONLY | O_CLOEXEC);
    if (!Check(fd >= 0, "open", Path(name))) return;
    Check(fsync(fd) == 0, "fsync", Path(name));
    close(fd);
  }

  void VerifyAll() {
    Listing();
    for (const auto& [name, data] : files_) ReadBack(name, false);
  }

  [[noreturn]] void Finish() {
    std::string report = "ops " + std::to_string(ops_) + "\n";
    for (const std::string& e : errors_) report += e + "\n";
    WriteFileBytes(result_, report);
    _exit(errors_.empty() ? 0 : 1);
  }

  const int id_;
  const std::string mount_, dir_, shared_, result_;
  char* const slot_;
  const int64_t deadline_;
  std::mt19937_64 rng_;
  std::map<std::string, std::shared_ptr<std::string>> files_;
  std::vector<std::string> errors_;
  uint64_t ops_ = 0, serial_ = 0;
};

class LoadTest : public MountedTest {
 protected:
  VolumeSpec Spec() const override {
    VolumeSpec spec;
    spec.mount_args = "--data-cache direct --cache-size 64M";
    return spec;
  }
};

TEST_F(LoadTest, SixteenProcessesMixedOperationsNoDeadlockNoWrongErrorDataVerified) {
  ASSERT_EQ(mkdir(Path("shared").c_str(), 0755), 0);
  // A name to look for in the control files afterwards; read and hinted by path during the run.
  ASSERT_TRUE(WriteFileBytes(Path(kDistinctName), PatternBytes(300'000, 77)));
  const int seconds = LoadSeconds();
  const int64_t deadline = NowSeconds() + seconds;
  char* slots = static_cast<char*>(mmap(nullptr, kWorkers * kSlotBytes, PROT_READ | PROT_WRITE,
                                        MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(slots, MAP_FAILED);
  std::memset(slots, 0, kWorkers * kSlotBytes);
  std::vector<pid_t> pids;
  for (int i = 0; i < kWorkers; ++i) {
    const std::string result = mount_->root() + "/result" + std::to_string(i);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Worker worker(i, mount_->mountpoint(), result, slots + i * kSlotBytes, deadline);
      if (i >= kWorkers - kSpeculating) worker.RunSpeculating(TipfsBinary());
      worker.Run();
    }
    pids.push_back(pid);
  }
#ifdef SPEC_HAZARD_TEST
  // libtipspec's sandbox test (programs whose run-ahead tries to escape it: write, signal,
  // connect, exec) runs again while the machine is under this load; it must still pass.
  // (RunAheadRacing... is left out: it counts how often its race happened, which depends on
  // timing and drops under load.)
  std::thread hazards([&] {
    CommandResult r =
        RunSplit(std::string(SPEC_HAZARD_TEST) + " --gtest_filter='SpecHazardTest.SideEffects*'");
    EXPECT_EQ(r.exit_code, 0) << "speculation sandbox tests under load:\n" << r.out << r.err;
  });
#endif
  // The watchdog: every worker ends within its time plus a margin, or it is stuck.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(seconds + 120);
  std::vector<bool> done(kWorkers, false);
  size_t remaining = kWorkers;
  while (remaining > 0 && std::chrono::steady_clock::now() < give_up) {
    for (int i = 0; i < kWorkers; ++i) {
      if (done[i]) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        done[i] = true;
        --remaining;
        EXPECT_TRUE(WIFEXITED(status)) << "worker " << i << " died: status " << status;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int i = 0; i < kWorkers; ++i) {
    if (done[i]) continue;
    ADD_FAILURE() << "worker " << i << " is stuck (deadlock?) in: " << slots + i * kSlotBytes;
    kill(pids[i], SIGKILL);
    waitpid(pids[i], nullptr, 0);
  }
  uint64_t total_ops = 0;
  for (int i = 0; i < kWorkers; ++i) {
    const std::string report = ReadFileOrDie(mount_->root() + "/result" + std::to_string(i));
    total_ops += std::strtoull(report.c_str() + 4, nullptr, 10);
    EXPECT_EQ(report.substr(report.find('\n') + 1), "") << "worker " << i << ":\n" << report;
  }
  munmap(slots, kWorkers * kSlotBytes);
#ifdef SPEC_HAZARD_TEST
  hazards.join();
#endif
  // What any user of the mount may read (.tipfs/*) tells counts, never names.
  for (const char* file : {"stats", "stats.json", "metrics", "breakdown", "breakdown.json"}) {
    const std::string text = ReadFileOrDie(Path(std::string(".tipfs/") + file));
    EXPECT_EQ(text.find(kDistinctName), std::string::npos) << file << " names a file";
  }
  CommandResult stats = RunSplit(TipfsBinary() + " stats " + ShellQuote(mount_->mountpoint()));
  EXPECT_EQ(stats.exit_code, 0) << stats.err;
  std::printf("%d processes, %d s: %llu operations\n%s", kWorkers, seconds,
              static_cast<unsigned long long>(total_ops), stats.out.c_str());
  ASSERT_EQ(mount_->Unmount(), "");
  CommandResult fsck = RunSplit(TipfsBinary() + " fsck " + ShellQuote(mount_->disks()[0]));
  EXPECT_EQ(fsck.exit_code, 0) << fsck.out << fsck.err;
}

}  // namespace
}  // namespace tipfs::testing
