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

class ConcurrencyTest : public MountedTest, public ::testing::WithParamInterface<std::string> {
 protected:
  VolumeSpec Spec() const override {
    VolumeSpec spec;
    spec.mount_args = "--data-cache " + GetParam();
    return spec;
  }
};

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

INSTANTIATE_TEST_SUITE_P(DataCache, ConcurrencyTest, ::testing::Values("kernel", "direct"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tipfs::testing
