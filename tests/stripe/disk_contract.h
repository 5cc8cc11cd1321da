// The Disk contract (stripe/disk.h) as one parameterised gtest suite, so that every Disk
// implementation is held to the same behaviour: each instantiates DiskContractTest with a factory
// (PosixDisk in tests/stripe/posix_disk_test.cc, RadosDisk in tests/rados/rados_disk_test.cc).
// The cases are in disk_contract.cc; link it into the test binary.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "stripe/disk.h"
#include "tests/stripe/disk_requests.h"

namespace tipfs::testing {

// A disk made for one test case, with whatever it needs (a directory, a ring, a cluster
// namespace), all of which goes when this does.
class DiskUnderTest {
 public:
  virtual ~DiskUnderTest() = default;
  // Its name must start with "disk 3 (": the factory opens it as disk 3.
  virtual stripe::Disk* disk() = 0;
};

struct DiskFactory {
  std::string name;  // the instantiation's name: letters, digits and '_'
  // Returns null and sets *unavailable when the disk cannot be made here (a missing io_uring, no
  // Ceph cluster); the case is skipped then, or fails when `unavailable_fails`.
  std::function<std::unique_ptr<DiskUnderTest>(std::string* unavailable)> make;
  bool unavailable_fails = false;
};

inline std::string DiskFactoryName(const ::testing::TestParamInfo<DiskFactory>& info) {
  return info.param.name;
}

// `threads` threads each write `requests` blocks of 4 KiB over 24 objects, all in flight at
// once, then read them back the same way. Returns how many requests failed, moved a wrong count
// or (reads) returned other bytes.
int ConcurrentWritesThenReads(stripe::Disk* disk, int threads, int requests);

class DiskContractTest : public ::testing::TestWithParam<DiskFactory> {
 protected:
  void SetUp() override;
  void TearDown() override { under_test_.reset(); }

  stripe::Disk* disk() { return under_test_->disk(); }
  Result<uint64_t> Io(stripe::DiskRequest::Kind kind, stripe::ObjectId object, uint64_t offset,
                      uint64_t length, char* buffer) {
    return SubmitAndWait(disk(), kind, object, offset, length, buffer);
  }
  Result<uint64_t> Write(stripe::ObjectId o, uint64_t off, const std::string& data) {
    return Io(stripe::DiskRequest::Kind::kWrite, o, off, data.size(),
              const_cast<char*>(data.data()));
  }
  // Reads `len` bytes; the string holds what the disk returned (shorter on a short read).
  std::string Read(stripe::ObjectId o, uint64_t off, uint64_t len);
  Status Sync(stripe::ObjectId o) {
    return Io(stripe::DiskRequest::Kind::kSync, o, 0, 0, nullptr).status();
  }

  std::unique_ptr<DiskUnderTest> under_test_;
};

}  // namespace tipfs::testing
