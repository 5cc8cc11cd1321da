// mmap(2) of files on a mount, as tipfs(8) describes it for each data-cache mode: in `kernel`
// mode every mapping works, shared writable ones included, and stores reach the file; in `direct`
// mode private mappings work (copy-on-write over the file's bytes) and every MAP_SHARED mapping,
// read-only ones too, fails with ENODEV (libfuse 3.14 cannot let the kernel map direct-I/O files
// shared). Programs that map files shared (LMDB, SQLite's WAL index, numpy.memmap, Python's mmap
// module by default) need `kernel` mode.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {
namespace {

constexpr size_t kBytes = 3 * 65536 + 100;  // spans four stripe units

class MmapTest : public DataCacheModeTest {
 protected:
  bool Direct() const { return IsDirectMode(GetParam()); }

  void SetUp() override {
    MountedTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    data_.resize(kBytes);
    for (size_t i = 0; i < kBytes; ++i) data_[i] = static_cast<char>('a' + i % 23);
    ASSERT_TRUE(WriteFileBytes(Path("mapped"), data_));
  }

  // mmap of the whole file with `prot` and `flags`: the mapping, or MAP_FAILED with errno.
  void* Map(int open_flags, int prot, int flags) {
    fd_ = open(Path("mapped").c_str(), open_flags | O_CLOEXEC);
    EXPECT_GE(fd_, 0) << ErrnoName(errno);
    return mmap(nullptr, kBytes, prot, flags, fd_, 0);
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    MountedTest::TearDown();
  }

  std::string data_;
  int fd_ = -1;
};

TEST_P(MmapTest, PrivateMappingsReadTheFileAndCopyOnWrite) {
  void* p = Map(O_RDONLY, PROT_READ | PROT_WRITE, MAP_PRIVATE);
  ASSERT_NE(p, MAP_FAILED) << ErrnoName(errno);
  auto* bytes = static_cast<char*>(p);
  EXPECT_EQ(std::memcmp(bytes, data_.data(), kBytes), 0);
  bytes[70000] = '!';  // the process's own copy: the file does not change
  ASSERT_EQ(munmap(p, kBytes), 0);
  EXPECT_EQ(ReadFileOrDie(Path("mapped")), data_);
}

TEST_P(MmapTest, SharedMappingsWorkInKernelModeAndFailWithEnodevInDirectMode) {
  void* reader = Map(O_RDONLY, PROT_READ, MAP_SHARED);
  if (Direct()) {
    EXPECT_EQ(reader, MAP_FAILED);
    EXPECT_EQ(errno, ENODEV) << "read-only shared mappings are refused too";
    close(fd_);
    EXPECT_EQ(Map(O_RDWR, PROT_READ | PROT_WRITE, MAP_SHARED), MAP_FAILED);
    EXPECT_EQ(errno, ENODEV);
    return;
  }
  ASSERT_NE(reader, MAP_FAILED) << ErrnoName(errno);
  EXPECT_EQ(std::memcmp(reader, data_.data(), kBytes), 0);
  ASSERT_EQ(munmap(reader, kBytes), 0);
  close(fd_);
  void* writer = Map(O_RDWR, PROT_READ | PROT_WRITE, MAP_SHARED);
  ASSERT_NE(writer, MAP_FAILED) << ErrnoName(errno);
  std::memcpy(static_cast<char*>(writer) + 65530, "stores", 6);  // across a stripe unit
  ASSERT_EQ(msync(writer, kBytes, MS_SYNC), 0);
  ASSERT_EQ(munmap(writer, kBytes), 0);
  data_.replace(65530, 6, "stores");
  EXPECT_EQ(ReadFileOrDie(Path("mapped")), data_);
}

INSTANTIATE_TEST_SUITE_P(DataCache, MmapTest, ::testing::ValuesIn(AllDataCacheModes()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tipfs::testing
