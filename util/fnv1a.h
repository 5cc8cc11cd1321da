// FNV-1a 64 (Fowler/Noll/Vo, http://www.isthe.com/chongo/tech/comp/fnv/: offset basis
// 14695981039346656037, prime 1099511628211): a fast checksum of small texts (the volume label)
// and a stable id from a name (a Ceph cluster's fsid), not a defence against tampering.
#pragma once

#include <cstdint>
#include <string_view>

namespace tipfs {

inline uint64_t Fnv1a64(std::string_view data) {
  uint64_t h = 14695981039346656037ull;
  for (char c : data) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace tipfs
