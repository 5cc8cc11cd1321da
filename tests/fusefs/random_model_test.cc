// Random writes, truncates and reads of several files of up to 50 MiB on a real mount, each
// checked byte for byte against an in-memory model; then unmount, mount, and check every file
// again. Offsets and sizes are unaligned, cross stripe units, and leave sparse holes far out.
//
// Deterministic for a seed: each case has a fixed default seed; TIPFS_TEST_SEED=<n> replaces it.
// The seed is printed with every failure (rerun with it to reproduce).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

// tests/rados builds this file again for volumes of RADOS namespaces, with files of up to
// 300 MiB (so each file's objects are cut into many RADOS objects) and fewer cases.
#ifndef TIPFS_MODEL_MAX_FILE_MIB
#define TIPFS_MODEL_MAX_FILE_MIB 50
#endif
#ifndef TIPFS_MODEL_FILES
#define TIPFS_MODEL_FILES 3
#endif
constexpr uint64_t kMaxFileBytes = uint64_t{TIPFS_MODEL_MAX_FILE_MIB} << 20;
constexpr int kFiles = TIPFS_MODEL_FILES;
constexpr int kOperations = 500;

struct ModelCase {
  std::string data_cache;  // kernel | direct
  int disks;
  uint32_t stripe_unit;
  uint64_t seed;
};

std::string CaseName(const ::testing::TestParamInfo<ModelCase>& info) {
  return info.param.data_cache + "_" + std::to_string(info.param.disks) + "disks_" +
         std::to_string(info.param.stripe_unit / 1024) + "K";
}

class RandomModelTest : public MountedTest, public ::testing::WithParamInterface<ModelCase> {
 protected:
  VolumeSpec Spec() const override {
    VolumeSpec spec;
    spec.disks = GetParam().disks;
    spec.mkfs_args = "--stripe-unit " + std::to_string(GetParam().stripe_unit / 1024) + "K";
    spec.mount_args = "--data-cache " + GetParam().data_cache;
    return spec;
  }

  static uint64_t Seed() {
    const char* text = std::getenv("TIPFS_TEST_SEED");
    return text != nullptr ? std::strtoull(text, nullptr, 0) : GetParam().seed;
  }
};

// One file of the model: its expected bytes and two descriptors (writes and reads go through
// either, so that both see one file).
struct ModelFile {
  std::string path;
  std::string data;
  int fds[2] = {-1, -1};
};

// Describes where two byte strings first differ.
std::string FirstDifference(const std::string& expected, const std::string& actual, uint64_t base) {
  if (expected.size() != actual.size()) {
    return "length " + std::to_string(actual.size()) + ", expected " +
           std::to_string(expected.size());
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] != actual[i]) {
      return "first difference at file offset " + std::to_string(base + i) + ": got " +
             std::to_string(static_cast<unsigned char>(actual[i])) + ", expected " +
             std::to_string(static_cast<unsigned char>(expected[i]));
    }
  }
  return "equal";
}

std::string ReadRange(int fd, uint64_t offset, size_t length, int* error) {
  std::string out(length, '\0');
  size_t done = 0;
  *error = 0;
  while (done < length) {
    ssize_t n = pread(fd, out.data() + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      *error = errno;
      break;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

// Reads every file through a fresh descriptor and compares it with the model.
void VerifyAll(const std::vector<ModelFile>& files, const std::string& when) {
  for (const ModelFile& file : files) {
    int fd = open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << when << ": open " << file.path << ": " << ErrnoName(errno);
    struct stat st;
    ASSERT_EQ(fstat(fd, &st), 0);
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), file.data.size())
        << when << ": size of " << file.path;
    int error = 0;
    std::string actual = ReadRange(fd, 0, file.data.size() + 4096, &error);
    close(fd);
    ASSERT_EQ(error, 0) << when << ": read " << file.path << ": " << ErrnoName(error);
    ASSERT_TRUE(actual == file.data)
        << when << ": " << file.path << ": " << FirstDifference(file.data, actual, 0);
  }
}

TEST_P(RandomModelTest, RandomWritesTruncatesAndReadsMatchTheModel) {
  const uint64_t seed = Seed();
  SCOPED_TRACE("seed=" + std::to_string(seed) +
               " (rerun with TIPFS_TEST_SEED=" + std::to_string(seed) + ")");
  RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto uniform = [&](uint64_t lo, uint64_t hi) {  // inclusive
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  const uint64_t unit = GetParam().stripe_unit;

  std::vector<ModelFile> files(kFiles);
  for (int i = 0; i < kFiles; ++i) {
    files[i].path = Path("model" + std::to_string(i));
    for (int& fd : files[i].fds) {
      fd = open(files[i].path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
      ASSERT_GE(fd, 0) << ErrnoName(errno);
    }
  }

  for (int op = 0; op < kOperations; ++op) {
    ModelFile& file = files[uniform(0, kFiles - 1)];
    const int fd = file.fds[uniform(0, 1)];
    const uint64_t size = file.data.size();
    const uint64_t kind = uniform(0, 99);
    std::string what;
    if (kind < 50) {
      // A write: small / medium / large, at an unaligned offset, across a stripe unit boundary,
      // far out (sparse), or at the end.
      const uint64_t length_kind = uniform(0, 9);
      uint64_t length = length_kind < 6   ? uniform(1, 8192)
                        : length_kind < 9 ? uniform(8193, 300000)
                                          : uniform(300001, 2 << 20);
      const uint64_t where = uniform(0, 9);
      uint64_t offset;
      if (where < 4) {
        offset = uniform(0, size + 65536);
      } else if (where < 7) {
        const uint64_t boundary = unit * uniform(1, (size + 4 * unit) / unit + 1);
        offset = boundary - std::min<uint64_t>(boundary, uniform(0, 100));
      } else if (where < 9) {
        offset = uniform(0, kMaxFileBytes - length);
      } else {
        offset = size;
      }
      if (offset + length > kMaxFileBytes) offset = kMaxFileBytes - length;
      const std::string bytes = PatternBytes(length, seed * 1000003 + op);
      what = "op " + std::to_string(op) + ": pwrite " + std::to_string(length) + " at " +
             std::to_string(offset) + " of " + file.path;
      ssize_t n = pwrite(fd, bytes.data(), length, static_cast<off_t>(offset));
      ASSERT_EQ(n, static_cast<ssize_t>(length)) << what << ": " << ErrnoName(errno);
      if (file.data.size() < offset + length) file.data.resize(offset + length, '\0');
      file.data.replace(offset, length, bytes);
    } else if (kind < 60) {
      const uint64_t new_size = uniform(0, 1) == 0
                                    ? uniform(0, size)
                                    : uniform(size, std::min(kMaxFileBytes, size + (8 << 20)));
      what = "op " + std::to_string(op) + ": ftruncate " + file.path + " from " +
             std::to_string(size) + " to " + std::to_string(new_size);
      ASSERT_EQ(ftruncate(fd, static_cast<off_t>(new_size)), 0) << what << ": " << ErrnoName(errno);
      file.data.resize(new_size, '\0');
    } else {
      const uint64_t offset = uniform(0, size + 10000);
      const uint64_t length = uniform(1, uniform(0, 3) == 0 ? (1 << 20) : 70000);
      what = "op " + std::to_string(op) + ": pread " + std::to_string(length) + " at " +
             std::to_string(offset) + " of " + file.path;
      int error = 0;
      std::string actual = ReadRange(fd, offset, length, &error);
      ASSERT_EQ(error, 0) << what << ": " << ErrnoName(error);
      const std::string expected = offset < size ? file.data.substr(offset, length) : "";
      ASSERT_TRUE(actual == expected) << what << ": " << FirstDifference(expected, actual, offset);
    }
    struct stat st;
    ASSERT_EQ(fstat(fd, &st), 0);
    ASSERT_EQ(static_cast<uint64_t>(st.st_size), file.data.size()) << "size after " << what;
  }

  for (ModelFile& file : files) {
    for (int fd : file.fds) EXPECT_EQ(close(fd), 0);
  }
  VerifyAll(files, "before unmount");
  if (HasFatalFailure()) return;
  ASSERT_EQ(UnmountRetryingWhileBusy(*mount_), "");
  ASSERT_EQ(mount_->Mount(), "");
  VerifyAll(files, "after remount");
}

#ifdef TIPFS_MODEL_RADOS_CASES
INSTANTIATE_TEST_SUITE_P(Cases, RandomModelTest,
                         ::testing::Values(ModelCase{"kernel", 4, 64 * 1024, 20261201},
                                           ModelCase{"direct", 4, 16 * 1024, 20261202}),
                         CaseName);
#else
INSTANTIATE_TEST_SUITE_P(Cases, RandomModelTest,
                         ::testing::Values(ModelCase{"kernel", 4, 64 * 1024, 20240601},
                                           ModelCase{"direct", 4, 64 * 1024, 20240602},
                                           ModelCase{"kernel", 3, 4 * 1024, 20240603},
                                           ModelCase{"direct", 5, 16 * 1024, 20240604}),
                         CaseName);
#endif

}  // namespace
}  // namespace tipfs::testing
