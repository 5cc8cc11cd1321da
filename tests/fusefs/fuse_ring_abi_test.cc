// RebuildRequest (fusefs/fuse_ring_abi.h): a request the kernel split over an io_uring entry's
// header and payload comes out as /dev/fuse delivers it, the payload left where it was, and
// lengths that do not add up are refused.
#include "fusefs/fuse_ring_abi.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tipfs::fusefs {
namespace {

// An entry's buffers: room for the headers, then the payload.
struct EntryBuffers {
  explicit EntryBuffers(size_t payload_capacity)
      : bytes(kRequestRoomBytes + payload_capacity), capacity(payload_capacity) {}
  char* payload() { return bytes.data() + kRequestRoomBytes; }
  std::vector<char> bytes;
  size_t capacity;
  RingRequestHeader header = {};
};

// Fills `b` as the kernel would for a request of `opcode` with `op` in op_in and `rest` in the
// payload, its in.len `len` (0: the right one).
void Place(EntryBuffers* b, uint32_t opcode, const std::string& op, const std::string& rest,
           uint32_t len = 0) {
  fuse_in_header in = {};
  in.len = len != 0 ? len : static_cast<uint32_t>(sizeof in + op.size() + rest.size());
  in.opcode = opcode;
  in.unique = 42;
  in.nodeid = 7;
  std::memcpy(b->header.in_out, &in, sizeof in);
  std::memcpy(b->header.op_in, op.data(), op.size());
  std::memcpy(b->payload(), rest.data(), rest.size());
  b->header.ent_in_out.payload_sz = static_cast<uint32_t>(rest.size());
  b->header.ent_in_out.commit_id = 42;
}

std::string Expected(const EntryBuffers& b, const std::string& op, const std::string& rest) {
  fuse_in_header in;
  std::memcpy(&in, b.header.in_out, sizeof in);
  return std::string(reinterpret_cast<const char*>(&in), sizeof in) + op + rest;
}

TEST(RebuildRequestTest, WriteKeepsItsStructThenItsDataInPlace) {
  EntryBuffers b(64 * 1024);
  const std::string op(sizeof(fuse_write_in), 'w');
  const std::string data(5000, 'd');
  Place(&b, FUSE_WRITE, op, data);
  char* start = RebuildRequest(b.header, b.payload(), b.capacity);
  ASSERT_NE(start, nullptr);
  EXPECT_EQ(start + sizeof(fuse_in_header) + op.size(), b.payload()) << "the data was moved";
  EXPECT_EQ(std::string(start, sizeof(fuse_in_header) + op.size() + data.size()),
            Expected(b, op, data));
}

TEST(RebuildRequestTest, LookupHasNoStructOnlyItsName) {
  EntryBuffers b(8192);
  const std::string name("a-name\0", 7);
  Place(&b, FUSE_LOOKUP, "", name);
  char* start = RebuildRequest(b.header, b.payload(), b.capacity);
  ASSERT_NE(start, nullptr);
  EXPECT_EQ(start + sizeof(fuse_in_header), b.payload());
  EXPECT_EQ(std::string(start, sizeof(fuse_in_header) + name.size()), Expected(b, "", name));
}

TEST(RebuildRequestTest, ReadIsItsStructAlone) {
  EntryBuffers b(8192);
  const std::string op(sizeof(fuse_read_in), 'r');
  Place(&b, FUSE_READ, op, "");
  char* start = RebuildRequest(b.header, b.payload(), b.capacity);
  ASSERT_NE(start, nullptr);
  EXPECT_EQ(std::string(start, sizeof(fuse_in_header) + op.size()), Expected(b, op, ""));
}

TEST(RebuildRequestTest, LengthsThatDoNotAddUpAreRefused) {
  EntryBuffers b(8192);
  // in.len shorter than the header and the payload
  Place(&b, FUSE_WRITE, std::string(40, 'w'), std::string(100, 'd'), sizeof(fuse_in_header) + 99);
  EXPECT_EQ(RebuildRequest(b.header, b.payload(), b.capacity), nullptr);
  // an opcode struct longer than op_in
  Place(&b, FUSE_WRITE, "", "", sizeof(fuse_in_header) + kOpHeaderBytes + 1);
  EXPECT_EQ(RebuildRequest(b.header, b.payload(), b.capacity), nullptr);
  // a payload larger than the entry's buffer
  Place(&b, FUSE_WRITE, "", std::string(100, 'd'));
  EXPECT_EQ(RebuildRequest(b.header, b.payload(), 99), nullptr);
}

}  // namespace
}  // namespace tipfs::fusefs
