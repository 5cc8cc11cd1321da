// The convenience helpers of include/tipfs/hint.h and the C++ wrapper include/tipfs/hint.hpp:
// path records are packed exactly as the ABI says; calls on a file outside tipfs fail with the
// kernel's errno and change nothing. (Round trips through a real mount are integration tests.)
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>

#include "tipfs/hint.h"
#include "tipfs/hint.hpp"

extern "C" int tipfs_test_build_paths_in_c(struct tipfs_hint_paths* req);

namespace {

tipfs_path_record RecordAt(const tipfs_hint_paths& req, size_t pos) {
  tipfs_path_record r;
  std::memcpy(&r, req.records + pos, sizeof(r));
  return r;
}

TEST(HintHeaderTest, PathRecordsArePackedAndPadded) {
  auto req = std::make_unique<tipfs_hint_paths>();
  std::memset(req.get(), 0x7f, sizeof(*req));
  tipfs_hint_paths_init(req.get(), TIPFS_SOURCE_MANUAL, TIPFS_STREAM_SELF, 0);
  EXPECT_EQ(req->header.version, TIPFS_HINT_VERSION);
  ASSERT_EQ(tipfs_hint_paths_add(req.get(), "a/b.txt", 5, 10), 0);
  EXPECT_EQ(req->header.count, 1u);
  EXPECT_EQ(req->bytes, sizeof(tipfs_path_record) + 8);
  tipfs_path_record r = RecordAt(*req, 0);
  EXPECT_EQ(r.offset, 5u);
  EXPECT_EQ(r.length, 10u);
  EXPECT_EQ(r.path_length, 7u);
  EXPECT_EQ(r.reserved, 0u);
  EXPECT_EQ(std::string(req->records + sizeof(r), 7), "a/b.txt");
  EXPECT_EQ(req->records[sizeof(r) + 7], '\0');                     // padding to 8 bytes is zeros
  ASSERT_EQ(tipfs_hint_paths_add(req.get(), "12345678", 0, 0), 0);  // already a multiple of 8
  EXPECT_EQ(req->bytes, 2 * sizeof(tipfs_path_record) + 16);
  EXPECT_EQ(RecordAt(*req, sizeof(r) + 8).path_length, 8u);
}

TEST(HintHeaderTest, PathLimitsAndAFullRequest) {
  auto req = std::make_unique<tipfs_hint_paths>();
  tipfs_hint_paths_init(req.get(), TIPFS_SOURCE_MANUAL, TIPFS_STREAM_SELF, 0);
  EXPECT_EQ(tipfs_hint_paths_add(req.get(), "", 0, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(tipfs_hint_paths_add(req.get(), std::string(4096, 'x').c_str(), 0, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(tipfs_hint_paths_add(req.get(), std::string(4095, 'x').c_str(), 0, 0), 0);
  uint32_t count = 1;
  while (tipfs_hint_paths_add(req.get(), std::string(1000, 'y').c_str(), 0, 0) == 0) ++count;
  EXPECT_EQ(errno, ENOSPC);
  EXPECT_EQ(req->header.count, count);
  EXPECT_LE(req->bytes, uint32_t{TIPFS_PATH_RECORDS_BYTES});
  EXPECT_GT(req->bytes + sizeof(tipfs_path_record) + 1000, uint32_t{TIPFS_PATH_RECORDS_BYTES});
}

TEST(HintHeaderTest, TheHeaderIsValidC) {
  auto req = std::make_unique<tipfs_hint_paths>();
  ASSERT_EQ(tipfs_test_build_paths_in_c(req.get()), 0);
  EXPECT_EQ(req->header.source, uint32_t{TIPFS_SOURCE_WARMUP});
  EXPECT_EQ(req->header.epoch, 3u);
  EXPECT_EQ(req->header.count, 2u);
  EXPECT_EQ(RecordAt(*req, sizeof(tipfs_path_record) + 16).offset, 4096u);
}

TEST(HintHeaderTest, StructuresFitFuseRestrictedIoctls) {
  // FUSE passes at most 16383 bytes of argument, and the size is encoded in the command.
  EXPECT_LE(sizeof(tipfs_hint_fd), 16383u);
  EXPECT_LE(sizeof(tipfs_hint_paths), 16383u);
  EXPECT_LE(sizeof(tipfs_query), 16383u);
  EXPECT_EQ(_IOC_SIZE(TIPFS_IOC_HINT_FD), sizeof(tipfs_hint_fd));
  EXPECT_EQ(_IOC_SIZE(TIPFS_IOC_QUERY), sizeof(tipfs_query));
}

TEST(HintHeaderTest, CallsOutsideTipfsFailWithTheKernelsErrno) {
  int fd = open("/dev/null", O_RDONLY);
  ASSERT_GE(fd, 0);
  errno = 0;
  EXPECT_EQ(tipfs_hint_range(fd, 0, 4096), -1);
  EXPECT_EQ(errno, ENOTTY);
  tipfs_query q;
  EXPECT_EQ(tipfs_hint_query(fd, TIPFS_STREAM_SELF, &q), -1);
  EXPECT_EQ(errno, ENOTTY);
  EXPECT_EQ(tipfs_hint_cancel_all(fd), -1);
  const char* files[] = {"a", "b"};
  EXPECT_EQ(tipfs_hint_files(fd, files, 2, TIPFS_SOURCE_MANUAL), -1);
  EXPECT_EQ(errno, ENOTTY);
  {
    tipfs::Hinter hinter(fd);
    EXPECT_EQ(hinter.Range(fd, 0, 100), ENOTTY);
    EXPECT_EQ(hinter.Path("some/file"), 0);  // buffered
    EXPECT_EQ(hinter.Flush(), ENOTTY);
    EXPECT_EQ(hinter.Flush(), 0);  // nothing left to send
    EXPECT_EQ(hinter.Query(&q), ENOTTY);
  }
  close(fd);
}

}  // namespace
