// The kernel's FUSE-over-io_uring interface (include/uapi/linux/fuse.h, protocol 7.42, Linux
// 6.14-6.18), which Debian 12's linux-libc-dev (6.1) predates, and the one transformation
// fusefs/fuse_ring.cc makes of what the kernel writes: a request rebuilt for libfuse.
#pragma once

#include <linux/fuse.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tipfs::fusefs {

inline constexpr uint32_t kInitFlagsExtended = 1u << 30;     // FUSE_INIT_EXT: flags2 is valid
inline constexpr uint32_t kInitFlagsMaxPages = 1u << 22;     // FUSE_MAX_PAGES: max_pages is valid
inline constexpr uint32_t kInitFlags2OverIoUring = 1u << 9;  // FUSE_OVER_IO_URING (bit 41)
inline constexpr uint32_t kRegister = 1;                     // FUSE_IO_URING_CMD_REGISTER
inline constexpr uint32_t kCommitAndFetch = 2;               // FUSE_IO_URING_CMD_COMMIT_AND_FETCH
inline constexpr size_t kOpHeaderBytes = 128;                // FUSE_URING_OP_IN_OUT_SZ

struct RingEntryInOut {  // struct fuse_uring_ent_in_out
  uint64_t flags;
  uint64_t commit_id;  // the request's unique: what its commit names
  uint32_t payload_sz;
  uint32_t padding;
  uint64_t reserved;
};

struct RingRequestHeader {     // struct fuse_uring_req_header
  char in_out[128];            // fuse_in_header in, fuse_out_header out
  char op_in[kOpHeaderBytes];  // the request's first argument, its per-opcode struct
  RingEntryInOut ent_in_out;
};
static_assert(sizeof(RingRequestHeader) == 288);

struct RingCommand {  // struct fuse_uring_cmd_req, in the SQE's command area
  uint64_t flags;
  uint64_t commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
static_assert(sizeof(RingCommand) == 24);

// The room an entry keeps in front of its payload for the request's headers.
inline constexpr size_t kRequestRoomBytes = sizeof(fuse_in_header) + kOpHeaderBytes;

// Lays the request the kernel put in `header` and `payload` out as /dev/fuse delivers it:
// fuse_in_header, the opcode's struct (in.len less the header and the payload's bytes; none for
// LOOKUP, whose name is in the payload), then the payload, which stays where it is. The headers go
// into the kRequestRoomBytes in front of `payload`. Returns where the request starts (in.len bytes
// long), or nullptr when the kernel's lengths do not add up.
inline char* RebuildRequest(const RingRequestHeader& header, char* payload,
                            size_t payload_capacity) {
  fuse_in_header in;
  std::memcpy(&in, header.in_out, sizeof in);
  const uint32_t payload_bytes = header.ent_in_out.payload_sz;
  const size_t fixed = sizeof in + payload_bytes;
  if (payload_bytes > payload_capacity || in.len < fixed || in.len - fixed > kOpHeaderBytes) {
    return nullptr;
  }
  const size_t op_bytes = in.len - fixed;
  char* start = payload - op_bytes - sizeof in;
  std::memcpy(start + sizeof in, header.op_in, op_bytes);
  std::memcpy(start, &in, sizeof in);
  return start;
}

}  // namespace tipfs::fusefs
