// BlockKey: a cached block's name, (inode, block index), and its hash.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tipfs::cache {

struct BlockKey {
  uint64_t ino = 0;
  uint64_t index = 0;
  bool operator==(const BlockKey&) const = default;
};

struct BlockKeyHash {
  size_t operator()(const BlockKey& k) const {
    uint64_t h = k.ino * 0x9E3779B97F4A7C15ull ^ (k.index + 0x632BE59BD9B4E019ull);
    h ^= h >> 29;
    return static_cast<size_t>(h * 0xBF58476D1CE4E5B9ull);
  }
};

}  // namespace tipfs::cache
