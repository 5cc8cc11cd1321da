// BlockTable: the LRU tail window stays exactly the last k buffers under any sequence of
// operations; ghosts remember the last k evictions; per-file ranges and epochs.
#include "cache/block_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <random>

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
  BlockTable table(5);
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
  BlockTable table(3);
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
  BlockTable table(4);
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

}  // namespace
}  // namespace tipfs::cache
