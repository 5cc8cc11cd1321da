// TSMP: one training sample of the loader workload, written by tipfs-bench-gen and read by
// tipfs-bench-loader. A 32-byte header then the payload (an encoded image, in real life):
//   magic "TSMP" | version:u32 | index:u32 | label:u32 | payload_bytes:u64 | payload_digest:u64
// payload_digest = HashBytes(payload, seed = index), so the loader verifies every byte it read.
// Samples live in class folders (samples/cNNN/sNNNNNN.smp, the ImageFolder layout of common
// training pipelines). Plain data and pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <cstring>

#include "util/status.h"

namespace tipfs::bench::tsmp {

inline constexpr char kMagic[4] = {'T', 'S', 'M', 'P'};
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 32;

struct Header {
  uint32_t index = 0;
  uint32_t label = 0;
  uint64_t payload_bytes = 0;
  uint64_t payload_digest = 0;
};

inline void EncodeHeader(const Header& h, unsigned char* out) {
  std::memcpy(out, kMagic, 4);
  std::memcpy(out + 4, &kVersion, 4);
  std::memcpy(out + 8, &h.index, 4);
  std::memcpy(out + 12, &h.label, 4);
  std::memcpy(out + 16, &h.payload_bytes, 8);
  std::memcpy(out + 24, &h.payload_digest, 8);
}

// `file_bytes` is how much the loader read; the header must account for all of it.
inline Result<Header> DecodeHeader(const unsigned char* in, uint64_t file_bytes) {
  if (file_bytes < kHeaderBytes || std::memcmp(in, kMagic, 4) != 0) {
    return Status::Corruption("not a TSMP sample");
  }
  uint32_t version;
  std::memcpy(&version, in + 4, 4);
  if (version != kVersion) return Status::Corruption("unsupported TSMP version");
  Header h;
  std::memcpy(&h.index, in + 8, 4);
  std::memcpy(&h.label, in + 12, 4);
  std::memcpy(&h.payload_bytes, in + 16, 8);
  std::memcpy(&h.payload_digest, in + 24, 8);
  if (h.payload_bytes != file_bytes - kHeaderBytes) {
    return Status::Corruption("sample size does not match its header");
  }
  return h;
}

}  // namespace tipfs::bench::tsmp
