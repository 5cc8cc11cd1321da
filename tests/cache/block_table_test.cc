// BlockTable: the LRU tail window stays exactly the last k buffers under any sequence of
// operations; ghosts remember the last k evictions; per-file ranges and epochs; BlockIndex finds
// exactly what was inserted and not erased, through growth and backward-shift erases.
#include "cache/block_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <map>
#include <random>
#include <set>

namespace tipfs::cache {
namespace {

// Checks the window against a reference order (front = warmest).
void ExpectWindow(const BlockTable& table, const std::list<Block*>& order) {
  const uint64_t k = table.tail_window();
  ASSERT_EQ(table.lru_size(), order.size());
  ASSERT_EQ(table.tail_count(), std::min<uint64_t>(k, order.size()));
  uint64_t position = 0;
  for (Block* b : order) {
    const bool in_tail = position >= order.size() - std::min<uint64_t>(k, order.size());
    ASSERT_EQ(b->in_tail, in_tail) << "position " << position << " of " << order.size();
    ++position;
  }
  if (!order.empty()) {
    ASSERT_EQ(table.LruColdest(), order.back());
  }
}

TEST(BlockTableTest, TailWindowIsAlwaysTheLastKBuffers) {
  BlockShards index;
  BlockTable table(&index, 5);
  std::list<Block*> order;
  std::vector<Block*> all;
  for (uint64_t i = 0; i < 40; ++i) all.push_back(table.Insert(1, i, 0));
  std::mt19937 rng(7);
  for (int step = 0; step < 5000; ++step) {
    Block* b = all[rng() % all.size()];
    if (rng() % 3 == 0) {
      table.Unqueue(b);
      order.remove(b);
    } else {
      table.PushLru(b);  // inserts or moves to the warm end
      order.remove(b);
      order.push_front(b);
    }
    ExpectWindow(table, order);
  }
  table.SetTailWindow(9);
  ExpectWindow(table, order);
}

TEST(BlockTableTest, GhostsRememberTheLastKEvictions) {
  BlockShards index;
  BlockTable table(&index, 3);
  for (uint64_t i = 0; i < 5; ++i) table.AddGhost(BlockKey{1, i});
  EXPECT_FALSE(table.TakeGhost(BlockKey{1, 0}));
  EXPECT_FALSE(table.TakeGhost(BlockKey{1, 1}));
  EXPECT_TRUE(table.TakeGhost(BlockKey{1, 4}));
  EXPECT_FALSE(table.TakeGhost(BlockKey{1, 4}));  // taken once
  EXPECT_TRUE(table.TakeGhost(BlockKey{1, 2}));
  // Re-adding a key refreshes it; the list never holds more than k live keys.
  for (int round = 0; round < 1000; ++round) table.AddGhost(BlockKey{2, uint64_t(round % 7)});
  int live = 0;
  for (uint64_t i = 0; i < 7; ++i) live += table.TakeGhost(BlockKey{2, i}) ? 1 : 0;
  EXPECT_EQ(live, 3);
}

TEST(BlockTableTest, RangesQueuesAndInodeLifetime) {
  BlockShards index;
  BlockTable table(&index, 4);
  Block* a = table.Insert(9, 2, 1);
  Block* b = table.Insert(9, 5, 0);
  table.Insert(8, 3, 0);
  EXPECT_NE(a->id, b->id);
  EXPECT_EQ(table.Find(9, 5), b);
  EXPECT_EQ(table.Find(9, 4), nullptr);
  std::vector<Block*> range;
  table.BlocksInRange(9, 0, 4, &range);
  ASSERT_EQ(range.size(), 1u);
  EXPECT_EQ(range[0], a);
  table.PushEvictFirst(a);
  EXPECT_EQ(table.EvictFirstColdest(), a);
  EXPECT_EQ(table.evict_first_size(), 1u);
  table.Erase(a);
  EXPECT_EQ(table.evict_first_size(), 0u);
  table.GetInode(9)->writers = 1;
  table.Erase(b);
  EXPECT_NE(table.FindInode(9), nullptr);  // a writer keeps the file's epoch alive
  table.GetInode(9)->writers = 0;
  table.MaybeDropInode(9);
  EXPECT_EQ(table.FindInode(9), nullptr);
  EXPECT_EQ(table.size(), 1u);
}

TEST(BlockTableTest, BlocksInFlightAreListedUntilTheirFetchEndsOrTheyAreErased) {
  BlockShards index;
  BlockTable table(&index, 4);
  std::map<uint64_t, Block*> blocks;  // index -> block
  std::set<Block*> in_flight;
  Fetch* const fetch = reinterpret_cast<Fetch*>(&table);  // any non-null pointer: never followed
  std::mt19937 rng(11);
  for (int step = 0; step < 20000; ++step) {
    const uint64_t i = rng() % 64;
    auto it = blocks.find(i);
    if (it == blocks.end()) {
      Block* b = table.Insert(1, i, 0);
      blocks[i] = b;
      if (rng() % 2 == 0) {
        table.PushLru(b);
      } else {
        table.BeginFetch(b, fetch);
        in_flight.insert(b);
      }
    } else if (rng() % 3 == 0) {
      if (in_flight.erase(it->second) > 0) table.EndFetch(it->second);
      table.Erase(it->second);
      blocks.erase(it);
    } else if (it->second->fetch != nullptr) {
      table.EndFetch(it->second);
      in_flight.erase(it->second);
      table.PushLru(it->second);
    } else {
      table.BeginFetch(it->second, fetch);  // leaves the LRU queue
      in_flight.insert(it->second);
      ASSERT_EQ(it->second->queue, BlockQueue::kNone);
    }
    std::set<const Block*> listed;
    table.ForEachInFlight([&listed](const Block& b) { listed.insert(&b); });
    ASSERT_EQ(listed, std::set<const Block*>(in_flight.begin(), in_flight.end())) << step;
    ASSERT_EQ(table.in_flight_size(), in_flight.size());
    ASSERT_EQ(table.lru_size() + in_flight.size(), table.size());
  }
  // A block still in flight cannot be erased: its fetch would complete into freed memory.
  Block* b = table.Insert(2, 0, 0);
  table.BeginFetch(b, fetch);
  EXPECT_DEATH(table.Erase(b), "Erase of a block in flight");
  table.EndFetch(b);
  EXPECT_DEATH(table.EndFetch(b), "EndFetch of a block not in flight");
}

// Random inserts, erases and lookups against a std::map, on few inodes and dense indexes (the
// cache's keys: long probe runs that wrap around the slot array and shift back on erase).
TEST(BlockIndexTest, AgreesWithAMapUnderChurn) {
  BlockIndex index;
  std::map<std::pair<uint64_t, uint64_t>, Block*> reference;
  std::vector<Block> blocks(4096);
  std::mt19937_64 rng(11);
  for (int step = 0; step < 200'000; ++step) {
    const uint64_t ino = rng() % 3 + 1;
    const uint64_t at = rng() % 1500;
    const auto key = std::make_pair(ino, at);
    Block* const mine = &blocks[(ino * 1500 + at) % blocks.size()];
    const int op = static_cast<int>(rng() % 3);
    if (op == 0 && reference.count(key) == 0) {
      index.Insert(ino, at, mine);
      reference[key] = mine;
    } else if (op == 1) {
      ASSERT_EQ(index.Erase(ino, at), reference.erase(key) == 1) << step;
    }
    auto it = reference.find(key);
    ASSERT_EQ(index.Find(ino, at), it == reference.end() ? nullptr : it->second) << step;
    ASSERT_EQ(index.size(), reference.size());
  }
  for (const auto& [key, block] : reference) ASSERT_EQ(index.Find(key.first, key.second), block);
  EXPECT_EQ(index.Find(4, 0), nullptr);
}

}  // namespace
}  // namespace tipfs::cache
