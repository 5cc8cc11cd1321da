// BlockIndex: the block table's map from (inode, block index) to its Block, probed by every read.
// Open addressing with linear probing and the keys stored in the slots, so a hit is one probe of
// one contiguous slot array: std::unordered_map's bucket array, then its separately allocated
// node, were two dependent cache misses per hit, 5 % of the daemon's samples in warm-rand-16
// (bench/fast/README.md "The hit path"). Erase shifts the following entries back (no tombstones),
// so lookups never slow down with churn.
//
// Not thread-safe: BlockTable's owner locks it (FileCache::mu_).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace tipfs::cache {

struct Block;

class BlockIndex {
 public:
  BlockIndex() { slots_.resize(kMinSlots); }

  Block* Find(uint64_t ino, uint64_t index) const {
    for (size_t i = Home(ino, index);; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (s.block == nullptr) return nullptr;
      if (s.ino == ino && s.index == index) return s.block;
    }
  }

  // REQUIRES: no entry for (ino, index) yet; block != nullptr.
  void Insert(uint64_t ino, uint64_t index, Block* block) {
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    Place(Slot{ino, index, block});
    ++size_;
  }

  // Removes the entry of (ino, index); false when there is none.
  bool Erase(uint64_t ino, uint64_t index) {
    size_t i = Home(ino, index);
    for (;; i = (i + 1) & mask()) {
      if (slots_[i].block == nullptr) return false;
      if (slots_[i].ino == ino && slots_[i].index == index) break;
    }
    // Backward shift: move each later entry of the run into the hole when its home does not lie
    // (cyclically) between the hole and its slot, so every entry stays reachable from its home.
    size_t hole = i;
    for (size_t j = (i + 1) & mask(); slots_[j].block != nullptr; j = (j + 1) & mask()) {
      const size_t home = Home(slots_[j].ino, slots_[j].index);
      const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (stays) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole] = Slot{};
    --size_;
    return true;
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t ino = 0;
    uint64_t index = 0;
    Block* block = nullptr;  // nullptr: empty
  };
  static constexpr size_t kMinSlots = 64;  // a power of two

  size_t mask() const { return slots_.size() - 1; }
  // The key mixed (splitmix64's finalizer) and cut to the table's size.
  size_t Home(uint64_t ino, uint64_t index) const {
    uint64_t h = ino * 0x9E3779B97F4A7C15ull ^ index;
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 31;
    return static_cast<size_t>(h) & mask();
  }
  void Place(const Slot& slot) {
    size_t i = Home(slot.ino, slot.index);
    while (slots_[i].block != nullptr) {
      if (slots_[i].ino == slot.ino && slots_[i].index == slot.index) {
        std::fprintf(stderr, "INTERNAL ERROR: BlockIndex::Insert of an existing key\n");
        std::abort();
      }
      i = (i + 1) & mask();
    }
    slots_[i] = slot;
  }
  void Grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old) {
      if (s.block != nullptr) Place(s);
    }
  }

  std::vector<Slot> slots_;  // size a power of two, at most half full
  size_t size_ = 0;
};

}  // namespace tipfs::cache
