// RadosDisk on a real Ceph cluster (label rados; see rados_test_env.h): the Disk contract suite
// with the default 4 MiB objects and with 64 KiB ones (every request of the suite then crosses
// parts), then what is RADOS's own: the parts and their records in the namespace, fsck's view
// of them, the lease that keeps a second mount out, and statistics.
#include "stripe/rados_disk.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "stripe/disk_name.h"
#include "tests/rados/rados_test_env.h"
#include "tests/stripe/disk_contract.h"

namespace tipfs::stripe {
namespace {

using testing::NamespaceObjects;
using testing::SubmitAndWait;

// A namespace of the test cluster, emptied when this goes.
class TestNamespace {
 public:
  explicit TestNamespace(const std::string& tag) : nspace_(testing::FreshNamespace(tag)) {}
  ~TestNamespace() { testing::EmptyNamespace(nspace_); }
  const std::string& nspace() const { return nspace_; }
  std::string disk_name() const { return testing::RadosDiskName(nspace_); }

  Result<std::unique_ptr<RadosNamespace>> Open(RadosConnections* connections) const {
    Result<DiskName> name = ParseDiskName(disk_name());
    if (!name.ok()) return name.status();
    return connections->OpenNamespace(*name);
  }

 private:
  std::string nspace_;
};

class RadosDiskUnderTest : public testing::DiskUnderTest {
 public:
  Disk* disk() override { return disk_.get(); }
  ~RadosDiskUnderTest() override { disk_.reset(); }

  static std::unique_ptr<testing::DiskUnderTest> Make(uint32_t object_size,
                                                      std::string* unavailable) {
    *unavailable = testing::CephUnavailableReason();
    if (!unavailable->empty()) return nullptr;
    auto made = std::make_unique<RadosDiskUnderTest>();
    RadosConnections connections;
    Result<std::unique_ptr<RadosNamespace>> ns = made->namespace_.Open(&connections);
    if (!ns.ok()) {
      *unavailable = ns.status().ToString();
      return nullptr;
    }
    RadosDiskOptions options;
    options.index = 3;
    options.object_size = object_size;
    Result<std::unique_ptr<RadosDisk>> disk = RadosDisk::Open(std::move(*ns), options);
    if (!disk.ok()) {
      *unavailable = disk.status().ToString();
      return nullptr;
    }
    made->disk_ = std::move(*disk);
    return made;
  }

 private:
  TestNamespace namespace_{"contract"};
  std::unique_ptr<RadosDisk> disk_;
};

using testing::DiskContractTest;

INSTANTIATE_TEST_SUITE_P(RadosDisk, DiskContractTest,
                         ::testing::Values(testing::DiskFactory{"rados_4M_objects",
                                                                [](std::string* why) {
                                                                  return RadosDiskUnderTest::Make(
                                                                      kDefaultRadosObjectSize, why);
                                                                },
                                                                testing::CephRequired()},
                                           testing::DiskFactory{"rados_64K_objects",
                                                                [](std::string* why) {
                                                                  return RadosDiskUnderTest::Make(
                                                                      65536, why);
                                                                },
                                                                testing::CephRequired()}),
                         testing::DiskFactoryName);

class RadosDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TIPFS_REQUIRE_CEPH_OR_SKIP();
    disk_ = OpenDisk(65536);
    ASSERT_NE(disk_, nullptr);
  }
  void TearDown() override { disk_.reset(); }

  std::unique_ptr<RadosDisk> OpenDisk(uint32_t object_size, bool with_lease = false) {
    Result<std::unique_ptr<RadosNamespace>> ns = namespace_.Open(&connections_);
    EXPECT_TRUE(ns.ok()) << ns.status().ToString();
    if (!ns.ok()) return nullptr;
    std::unique_ptr<RadosLease> taken;
    if (with_lease) {
      RadosLeaseOptions options;
      options.lease_ns = int64_t{2} * 1000 * 1000 * 1000;
      Result<std::unique_ptr<RadosLease>> l = RadosLease::Acquire(ns->get(), options);
      EXPECT_TRUE(l.ok()) << l.status().ToString();
      if (!l.ok()) return nullptr;
      taken = std::move(*l);
    }
    RadosDiskOptions options;
    options.index = 1;
    options.object_size = object_size;
    Result<std::unique_ptr<RadosDisk>> disk =
        RadosDisk::Open(std::move(*ns), options, std::move(taken));
    EXPECT_TRUE(disk.ok()) << disk.status().ToString();
    return disk.ok() ? std::move(*disk) : nullptr;
  }

  Result<uint64_t> Write(ObjectId o, uint64_t offset, const std::string& data) {
    return SubmitAndWait(disk_.get(), DiskRequest::Kind::kWrite, o, offset, data.size(),
                         const_cast<char*>(data.data()));
  }
  std::string Read(ObjectId o, uint64_t offset, uint64_t length) {
    std::string buffer(length, '\0');
    Result<uint64_t> r =
        SubmitAndWait(disk_.get(), DiskRequest::Kind::kRead, o, offset, length, buffer.data());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    buffer.resize(r.ok() ? *r : 0);
    return buffer;
  }
  // The head's records, as omap keys.
  std::vector<std::string> Records(ObjectId o) {
    std::vector<std::string> keys;
    rados_read_op_t op = rados_create_read_op();
    rados_omap_iter_t iter = nullptr;
    unsigned char more = 0;
    int rval = 0;
    rados_read_op_omap_get_keys2(op, "", 1000, &iter, &more, &rval);
    const int rc = rados_read_op_operate(op, disk_->rados_namespace().ioctx(),
                                         RadosDisk::PartName(o, 0).c_str(), 0);
    rados_release_read_op(op);
    if (rc < 0) return keys;
    char* key = nullptr;
    char* value = nullptr;
    size_t key_len = 0, value_len = 0;
    while (rados_omap_get_next2(iter, &key, &value, &key_len, &value_len) == 0 && key != nullptr) {
      keys.emplace_back(key, key_len);
    }
    rados_omap_get_end(iter);
    return keys;
  }

  TestNamespace namespace_{"disk"};
  RadosConnections connections_;
  std::unique_ptr<RadosDisk> disk_;
};

TEST(RadosPartNameTest, FormatAndParse) {
  EXPECT_EQ(RadosDisk::PartName(0x2a, 3), "000000000000002a.00000003");
  ObjectId object = 0;
  uint64_t part = 0;
  ASSERT_TRUE(RadosDisk::ParsePartName("00000000deadbeef.0000001f", &object, &part));
  EXPECT_EQ(object, 0xdeadbeefu);
  EXPECT_EQ(part, 31u);
  for (const char* bad : {"tipfs-label", "000000000000002a", "000000000000002a.0000003",
                          "000000000000002A.00000003", "000000000000002a_00000003"}) {
    EXPECT_FALSE(RadosDisk::ParsePartName(bad, &object, &part)) << bad;
  }
}

// A write across part boundaries makes one object per part touched, each recorded in the head;
// removing the file leaves the namespace empty.
TEST_F(RadosDiskTest, ObjectsAreCutIntoRecordedParts) {
  const std::string data(300000, 'p');
  ASSERT_TRUE(Write(0x2a, 10000, data).ok());  // bytes 10000..309999: parts 0 to 4
  EXPECT_EQ(NamespaceObjects(namespace_.nspace()),
            (std::vector<std::string>{"000000000000002a.00000000", "000000000000002a.00000001",
                                      "000000000000002a.00000002", "000000000000002a.00000003",
                                      "000000000000002a.00000004"}));
  EXPECT_EQ(Records(0x2a),
            (std::vector<std::string>{"00000001", "00000002", "00000003", "00000004"}));
  EXPECT_EQ(disk_->Stat(0x2a)->size, 310000u);
  EXPECT_EQ(disk_->Stat(0x2a)->allocated_bytes, 310000u);  // the five parts' lengths
  // A write far out records only the part it touches.
  ASSERT_TRUE(Write(0x2a, 100 * 65536 + 5, "far").ok());
  EXPECT_EQ(Records(0x2a).back(), "00000064");
  EXPECT_EQ(disk_->Stat(0x2a)->size, 100u * 65536 + 8);
  ASSERT_TRUE(disk_->Truncate(0x2a, 2 * 65536 + 1).ok());  // parts 3, 4 and 100 go
  EXPECT_EQ(Records(0x2a), (std::vector<std::string>{"00000001", "00000002"}));
  EXPECT_EQ(NamespaceObjects(namespace_.nspace()).size(), 3u);
  ASSERT_TRUE(disk_->Remove(0x2a).ok());
  EXPECT_TRUE(NamespaceObjects(namespace_.nspace()).empty());
}

// fsck's view: a part its head does not record (it would outlive its file) and a record of a
// missing part are found, and repaired: the part recorded, the record dropped.
TEST_F(RadosDiskTest, CheckPartsFindsAndRepairsUnrecordedPartsAndStaleRecords) {
  ASSERT_TRUE(Write(7, 0, std::string(200000, 'x')).ok());  // parts 0..3
  const rados_ioctx_t io = disk_->rados_namespace().ioctx();
  // A part written behind the head's back, and a part removed behind it.
  ASSERT_EQ(rados_write(io, RadosDisk::PartName(7, 9).c_str(), "y", 1, 0), 0);
  ASSERT_EQ(rados_remove(io, RadosDisk::PartName(7, 2).c_str()), 0);
  std::vector<RadosPartProblem> found;
  ASSERT_TRUE(disk_->CheckParts(/*repair=*/false, &found).ok());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].kind, RadosPartProblem::Kind::kUnrecorded);
  EXPECT_EQ(found[0].part, 9u);
  EXPECT_EQ(found[1].kind, RadosPartProblem::Kind::kStaleRecord);
  EXPECT_EQ(found[1].part, 2u);
  EXPECT_FALSE(found[0].repaired);
  found.clear();
  ASSERT_TRUE(disk_->CheckParts(/*repair=*/true, &found).ok());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_TRUE(found[0].repaired && found[1].repaired);
  found.clear();
  ASSERT_TRUE(disk_->CheckParts(false, &found).ok());
  EXPECT_TRUE(found.empty());
  EXPECT_EQ(disk_->Stat(7)->size, 9u * 65536 + 1);  // the recorded part counts now
  ASSERT_TRUE(disk_->Remove(7).ok());
  EXPECT_TRUE(NamespaceObjects(namespace_.nspace()).empty());  // nothing left behind
}

TEST_F(RadosDiskTest, StatisticsCountRequestsBytesAndLatency) {
  ASSERT_TRUE(Write(3, 0, std::string(100000, 's')).ok());  // two parts
  EXPECT_EQ(Read(3, 0, 100000).size(), 100000u);
  EXPECT_EQ(Read(99, 0, 10).size(), 0u);  // a hole is no error
  RadosDiskStats s = disk_->Stats();
  EXPECT_EQ(s.writes, 1u);
  EXPECT_EQ(s.reads, 2u);
  EXPECT_EQ(s.bytes_written, 100000u);
  EXPECT_EQ(s.bytes_read, 100000u);
  EXPECT_EQ(s.errors, 0u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_GE(s.max_in_flight, 1u);
  EXPECT_GE(s.operations, 5u);  // a record, two part writes, two part reads, one missing part
  EXPECT_GT(s.write_ns, 0);
  EXPECT_GT(s.LatencyQuantileSeconds(0.99), 0.0);
  const std::string text = FormatRadosStats({{1, "rados:p/ns", s}});
  EXPECT_NE(text.find("rados disk 1 (rados:p/ns): 2 reads 0.1 MB"), std::string::npos) << text;
  const std::string json = RadosStatsJsonMember({{1, "rados:p/ns", s}});
  EXPECT_NE(json.find("\"writes\":1,"), std::string::npos) << json;
  std::string prometheus;
  AppendRadosStatsPrometheus(&prometheus, {{1, "rados:p/ns", s}});
  EXPECT_NE(prometheus.find("tipfs_rados_reads_total{disk=\"1\"} 2"), std::string::npos)
      << prometheus;
}

// With its lease the disk is the volume's only writer, so a size it has stat'ed is answered
// again without a round trip, and its own writes, truncates and removes show at once. (The file
// system stats every disk of a file at each lookup.)
TEST_F(RadosDiskTest, LeasedDiskAnswersStatFromWhatItHasSeen) {
  disk_.reset();
  {
    Result<std::unique_ptr<RadosNamespace>> ns = namespace_.Open(&connections_);
    ASSERT_TRUE(ns.ok());
    ASSERT_TRUE((*ns)->WriteFullObject(kLabelName, "label").ok());
  }
  disk_ = OpenDisk(65536, /*with_lease=*/true);
  ASSERT_NE(disk_, nullptr);
  auto operations = [this] { return disk_->Stats().operations; };
  ASSERT_TRUE(Write(5, 0, std::string(20000, 'a')).ok());
  uint64_t ops = operations();
  EXPECT_EQ(disk_->Stat(5)->size, 20000u);
  EXPECT_EQ(operations(), ops + 1);  // size and records in one op
  ops = operations();
  EXPECT_EQ(disk_->Stat(5)->allocated_bytes, 20000u);
  EXPECT_EQ(operations(), ops);
  ASSERT_TRUE(Write(5, 30000, "b").ok());
  EXPECT_EQ(disk_->Stat(5)->size, 30001u);
  ASSERT_TRUE(Write(5, 70000, "c").ok());  // part 1
  EXPECT_EQ(disk_->Stat(5)->size, 70001u);
  EXPECT_EQ(disk_->Stat(5)->allocated_bytes, 30001u + 70001u - 65536u);
  ASSERT_TRUE(disk_->Truncate(5, 100).ok());
  EXPECT_EQ(disk_->Stat(5)->size, 100u);
  ASSERT_TRUE(disk_->Remove(5).ok());
  EXPECT_EQ(disk_->Stat(5).error(), ENOENT);

  // More records than one omap call returns: the Stat pages through them.
  disk_.reset();
  disk_ = OpenDisk(4096, /*with_lease=*/true);
  ASSERT_NE(disk_, nullptr);
  const uint64_t parts = 1100;  // records 1..1099, past one page of 1024 keys
  ASSERT_TRUE(Write(8, 0, std::string(parts * 4096, 'r')).ok());
  EXPECT_EQ(disk_->Stat(8)->size, parts * 4096);
  EXPECT_EQ(disk_->Stat(8)->allocated_bytes, parts * 4096);
  ASSERT_TRUE(disk_->Remove(8).ok());

  // Without a lease another client may write, so every Stat asks.
  disk_.reset();
  disk_ = OpenDisk(65536);
  ASSERT_NE(disk_, nullptr);
  ASSERT_TRUE(Write(6, 0, "short").ok());
  EXPECT_EQ(disk_->Stat(6)->size, 5u);
  const rados_ioctx_t io = disk_->rados_namespace().ioctx();
  ASSERT_EQ(rados_write(io, RadosDisk::PartName(6, 0).c_str(), "longer", 6, 5), 0);
  EXPECT_EQ(disk_->Stat(6)->size, 11u);
  ASSERT_TRUE(disk_->Remove(6).ok());
}

// The lease: a second holder is refused with a message naming the first; a lease nobody renews
// runs out and may then be taken; a tipfs of this host that died leaves a lock that is broken
// at once; one of another host is respected.
TEST_F(RadosDiskTest, LeaseKeepsOthersOutUntilItRunsOut) {
  Result<std::unique_ptr<RadosNamespace>> ns_a = namespace_.Open(&connections_);
  ASSERT_TRUE(ns_a.ok());
  RadosConnections other;  // a second client, as another mount would be
  Result<std::unique_ptr<RadosNamespace>> ns_b = namespace_.Open(&other);
  ASSERT_TRUE(ns_b.ok());
  ASSERT_TRUE((*ns_a)->WriteFullObject(kLabelName, "label").ok());
  RadosLeaseOptions options;
  options.lease_ns = int64_t{2} * 1000 * 1000 * 1000;
  Result<std::unique_ptr<RadosLease>> a = RadosLease::Acquire(ns_a->get(), options);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE((*a)->valid());
  Result<std::unique_ptr<RadosLease>> b = RadosLease::Acquire(ns_b->get(), options);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error(), EBUSY);
  EXPECT_NE(b.status().message().find("is mounted by tipfs pid " + std::to_string(getpid())),
            std::string::npos)
      << b.status().message();
  // Renewed, it holds past its first period.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_TRUE((*a)->valid());
  EXPECT_EQ(RadosLease::Acquire(ns_b->get(), options).error(), EBUSY);
  // Abandoned (the process died, say, on another host: nothing unlocks), it runs out.
  (*a)->AbandonForTest();
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_FALSE((*a)->valid());
  b = RadosLease::Acquire(ns_b->get(), options);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  b->reset();
  a->reset();

  // Another host's lock is respected whatever pid it names...
  const rados_ioctx_t io = (*ns_a)->ioctx();
  ASSERT_EQ(
      rados_lock_exclusive(io, kLabelName, "tipfs-mount", "tipfs:otherhost:1:abcd", "", nullptr, 0),
      0);
  b = RadosLease::Acquire(ns_b->get(), options);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("tipfs pid 1 on host otherhost"), std::string::npos)
      << b.status().message();
  ASSERT_EQ(rados_unlock(io, kLabelName, "tipfs-mount", "tipfs:otherhost:1:abcd"), 0);
  // ...while a dead tipfs of this host loses its lock at once.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  const std::string stale = "tipfs:" + std::string(host) + ":" + std::to_string(child) + ":abcd";
  ASSERT_EQ(rados_lock_exclusive(io, kLabelName, "tipfs-mount", stale.c_str(), "", nullptr, 0), 0);
  b = RadosLease::Acquire(ns_b->get(), options);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
}

// A mount that lost its lease to another mount fails every write with EIO instead of racing
// the new owner; reads still answer.
TEST_F(RadosDiskTest, WritesFailOnceTheLeaseIsLost) {
  disk_.reset();
  {
    Result<std::unique_ptr<RadosNamespace>> ns = namespace_.Open(&connections_);
    ASSERT_TRUE(ns.ok());
    ASSERT_TRUE((*ns)->WriteFullObject(kLabelName, "label").ok());
  }
  disk_ = OpenDisk(65536, /*with_lease=*/true);
  ASSERT_NE(disk_, nullptr);
  ASSERT_TRUE(Write(4, 0, "before").ok());
  // Another client breaks the lock and takes it, as a mount elsewhere after a partition would.
  const rados_ioctx_t io = disk_->rados_namespace().ioctx();
  Result<std::vector<RadosLockHolder>> holders =
      ListLockHolders(disk_->rados_namespace(), kLabelName);
  ASSERT_TRUE(holders.ok());
  ASSERT_EQ(holders->size(), 1u);
  RadosConnections other;
  Result<std::unique_ptr<RadosNamespace>> thief = namespace_.Open(&other);
  ASSERT_TRUE(thief.ok());
  ASSERT_EQ(rados_break_lock(io, kLabelName, "tipfs-mount", (*holders)[0].client.c_str(),
                             (*holders)[0].cookie.c_str()),
            0);
  ASSERT_EQ(rados_lock_exclusive((*thief)->ioctx(), kLabelName, "tipfs-mount", "tipfs:thief:1:0",
                                 "", nullptr, 0),
            0);
  // The next renewal (every lease/3) finds the thief.
  Result<uint64_t> written = uint64_t{0};
  for (int i = 0; i < 100 && written.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    written = Write(4, 0, "before");  // the same bytes, so the read below knows what to expect
  }
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.error(), EIO);
  EXPECT_NE(written.status().message().find("lost the volume's lease"), std::string::npos)
      << written.status().message();
  EXPECT_EQ(disk_->Truncate(4, 0).error(), EIO);
  EXPECT_EQ(disk_->Remove(4).error(), EIO);
  EXPECT_EQ(Read(4, 0, 6), "before");
  ASSERT_EQ(rados_unlock((*thief)->ioctx(), kLabelName, "tipfs-mount", "tipfs:thief:1:0"), 0);
}

}  // namespace
}  // namespace tipfs::stripe
