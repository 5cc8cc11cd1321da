// Several threads and processes using one mount at once (FUSE serves them on many threads):
// disjoint writes to one file, O_APPEND records from several processes, namespace changes in one
// directory, and readers racing a writer. Each checks the end state byte for byte, and that no
// call failed. Both data cache modes.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

using ConcurrencyTest = DataCacheModeTest;

// Four threads write interleaved 48 KiB pieces (not unit aligned, so pieces of different threads
// share stripe units) of one file through their own descriptors.
TEST_P(ConcurrencyTest, DisjointWritesFromThreads) {
  constexpr size_t kPiece = 48 * 1024;
  constexpr int kThreads = 4;
  constexpr int kPiecesPerThread = 40;
  const std::string path = Path("shared");
  const std::string expected = PatternBytes(kPiece * kThreads * kPiecesPerThread, 61);
  ASSERT_TRUE(WriteFileBytes(path, ""));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) {
        ++failures;
        return;
      }
      for (int i = 0; i < kPiecesPerThread; ++i) {
        const size_t offset = (static_cast<size_t>(i) * kThreads + t) * kPiece;
        if (pwrite(fd, expected.data() + offset, kPiece, static_cast<off_t>(offset)) !=
            static_cast<ssize_t>(kPiece)) {
          ++failures;
        }
      }
      if (close(fd) != 0) ++failures;
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(ReadFileOrDie(path) == expected) << "interleaved writes lost or mixed up bytes";
}

// Four processes append 1000-byte records with O_APPEND: every record lands whole, exactly once.
TEST_P(ConcurrencyTest, AppendsFromProcessesStayWhole) {
  constexpr int kProcesses = 4;
  constexpr int kRecords = 150;
  constexpr size_t kRecordBytes = 1000;
  const std::string path = Path("log");
  ASSERT_TRUE(WriteFileBytes(path, ""));
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
      if (fd < 0) _exit(2);
      for (int r = 0; r < kRecords; ++r) {
        char record[kRecordBytes];
        std::memset(record, 'a' + p, sizeof(record));
        std::snprintf(record, 32, "p%d r%04d ", p, r);
        record[sizeof(record) - 1] = '\n';
        if (write(fd, record, sizeof(record)) != static_cast<ssize_t>(sizeof(record))) _exit(3);
      }
      _exit(close(fd) == 0 ? 0 : 4);
    }
    children.push_back(pid);
  }
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer status " << status;
  }
  const std::string log = ReadFileOrDie(path);
  ASSERT_EQ(log.size(), kProcesses * kRecords * kRecordBytes);
  std::map<int, int> next_record;  // per process: records must also keep their order
  for (size_t at = 0; at < log.size(); at += kRecordBytes) {
    int p = -1, r = -1;
    ASSERT_EQ(std::sscanf(log.c_str() + at, "p%d r%d ", &p, &r), 2) << "torn record at " << at;
    ASSERT_TRUE(p >= 0 && p < kProcesses) << "at " << at;
    EXPECT_EQ(r, next_record[p]++) << "process " << p << " record out of order at " << at;
    const size_t header = 10;  // "pP rRRRR " and the NUL snprintf left
    const std::string body = log.substr(at + header, kRecordBytes - header - 1);
    EXPECT_EQ(body.find_first_not_of(static_cast<char>('a' + p)), std::string::npos)
        << "record at " << at << " mixes bytes of another process";
  }
}

// Threads create, rename and remove files in one directory; the listing at the end is exactly
// what they left, and the link count of the directory is right.
TEST_P(ConcurrencyTest, NamespaceChangesFromThreads) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 60;
  ASSERT_EQ(mkdir(Path("d").c_str(), 0755), 0);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        const std::string base = Path("d/t" + std::to_string(t) + "_" + std::to_string(i));
        if (!WriteFileBytes(base, base)) ++failures;
        if (rename(base.c_str(), (base + ".renamed").c_str()) != 0) ++failures;
        if (i % 3 == 0 && unlink((base + ".renamed").c_str()) != 0) ++failures;
        if (i % 10 == 0 && mkdir((base + ".dir").c_str(), 0755) != 0) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  std::set<std::string> expected;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kRounds; ++i) {
      const std::string base = "t" + std::to_string(t) + "_" + std::to_string(i);
      if (i % 3 != 0) expected.insert(base + ".renamed");
      if (i % 10 == 0) expected.insert(base + ".dir");
    }
  }
  std::set<std::string> listed;
  for (const auto& entry : std::filesystem::directory_iterator(Path("d"))) {
    listed.insert(entry.path().filename().string());
  }
  EXPECT_EQ(listed, expected);
  struct stat st;
  ASSERT_EQ(stat(Path("d").c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 2u + kThreads * (kRounds / 10));
  for (const std::string& name : listed) {
    if (name.size() > 8 && name.substr(name.size() - 8) == ".renamed") {
      const std::string content = ReadFileOrDie(Path("d/" + name));
      EXPECT_EQ(content, Path("d/" + name.substr(0, name.size() - 8))) << name;
    }
  }
}

// A writer extends a file in 4 KiB steps of known bytes while readers read it from the start
// again and again: a reader may see less, never other bytes.
TEST_P(ConcurrencyTest, ReadersRacingAWriterSeeOnlyWrittenBytes) {
  const std::string path = Path("growing");
  const std::string content = PatternBytes(2 << 20, 62);
  ASSERT_TRUE(WriteFileBytes(path, ""));
  std::atomic<bool> done{false};
  std::atomic<int> bad_reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!done.load()) {
        int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
          ++bad_reads;
          return;
        }
        std::string seen(content.size(), '\0');
        ssize_t n = pread(fd, seen.data(), seen.size(), 0);
        close(fd);
        if (n < 0 ||
            content.compare(0, static_cast<size_t>(n), seen, 0, static_cast<size_t>(n)) != 0) {
          ++bad_reads;
        }
      }
    });
  }
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  for (size_t at = 0; at < content.size(); at += 4096) {
    ASSERT_EQ(pwrite(fd, content.data() + at, 4096, static_cast<off_t>(at)), 4096);
  }
  close(fd);
  done = true;
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(bad_reads.load(), 0) << "a reader saw bytes that were never written there";
  EXPECT_TRUE(ReadFileOrDie(path) == content);
}

// The daemon's own threads, by id (its FUSE workers among them). io_uring's workers (iou-wrk-*)
// live in the process too but come and go with the kernel's idle timeout: not counted.
std::set<int> DaemonThreads(const std::string& pid_file) {
  std::set<int> ids;
  const std::string task = "/proc/" + std::to_string(std::stoi(ReadFileOrDie(pid_file))) + "/task";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(task, ec)) {
    std::FILE* comm = std::fopen((entry.path() / "comm").c_str(), "r");
    if (comm == nullptr) continue;  // exited meanwhile
    char name[32] = {};
    const bool read = std::fgets(name, sizeof(name), comm) != nullptr;
    std::fclose(comm);
    if (read && std::strncmp(name, "iou-", 4) == 0) continue;
    ids.insert(std::stoi(entry.path().filename().string()));
  }
  return ids;
}

// Many readers at once, in bursts, each reading 4 KiB pieces with O_DIRECT (so that every read
// reaches the daemon in both modes) and checking their bytes: the FUSE workers the daemon
// started for the first burst are all still there after the next ones. With asynchronous reads
// the number of idle workers swings under many readers, and libfuse, allowed fewer idle workers
// than it may start, retired and restarted workers many times a second (issue 11).
TEST_P(ConcurrencyTest, ManyReadersKeepTheSameFuseWorkers) {
  constexpr size_t kFile = 8 << 20;
  constexpr size_t kPiece = 4096;
  constexpr int kReaders = 32;
  constexpr int kReadsPerBurst = 200;
  const std::string path = Path("many-readers");
  const std::string content = PatternBytes(kFile, 63);
  ASSERT_TRUE(WriteFileBytes(path, content));
  const std::string pid_file = mount_->disks()[0] + "/tipfs.pid";
  std::atomic<int> bad_reads{0};
  auto burst = [&](int round) {
    std::vector<std::thread> readers;
    for (int r = 0; r < kReaders; ++r) {
      readers.emplace_back([&, r] {
        int fd = open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
        void* raw = std::aligned_alloc(kPiece, kPiece);
        if (fd < 0 || raw == nullptr) {
          ++bad_reads;
          if (fd >= 0) close(fd);
          std::free(raw);
          return;
        }
        char* buffer = static_cast<char*>(raw);
        uint64_t x = static_cast<uint64_t>(round * kReaders + r) * 2654435761u + 1;
        for (int i = 0; i < kReadsPerBurst; ++i) {
          x = x * 6364136223846793005u + 1442695040888963407u;
          const size_t offset = (x >> 33) % (kFile / kPiece) * kPiece;
          if (pread(fd, buffer, kPiece, static_cast<off_t>(offset)) !=
                  static_cast<ssize_t>(kPiece) ||
              std::memcmp(buffer, content.data() + offset, kPiece) != 0) {
            ++bad_reads;
          }
        }
        std::free(raw);
        close(fd);
      });
    }
    for (std::thread& reader : readers) reader.join();
  };
  burst(0);
  const std::set<int> first = DaemonThreads(pid_file);
  ASSERT_FALSE(first.empty());
  for (int round = 1; round <= 3; ++round) burst(round);
  const std::set<int> last = DaemonThreads(pid_file);
  EXPECT_EQ(bad_reads.load(), 0) << "a read failed or returned other bytes";
  std::vector<int> gone;
  for (int id : first) {
    if (last.count(id) == 0) gone.push_back(id);
  }
  EXPECT_TRUE(gone.empty()) << gone.size() << " of the daemon's " << first.size()
                            << " threads exited between bursts of reads";
}

INSTANTIATE_TEST_SUITE_P(DataCache, ConcurrencyTest, ::testing::ValuesIn(AllDataCacheModes()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tipfs::testing
