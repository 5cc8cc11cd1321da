#include "cache/block_table.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace tipfs::cache {

BlockTable::BlockTable(BlockShards* index, uint32_t tail_window)
    : index_(index), tail_window_(std::max<uint32_t>(1, tail_window)) {}

BlockTable::~BlockTable() = default;

Block* BlockTable::Insert(uint64_t ino, uint64_t index, uint32_t disk) {
  auto block = std::make_unique<Block>();
  block->key = BlockKey{ino, index};
  block->id = next_id_++;
  block->disk = disk;
  Block* raw = block.get();
  auto [it, inserted] = inodes_[ino].blocks.emplace(index, std::move(block));
  if (!inserted) {
    std::fprintf(stderr, "INTERNAL ERROR: BlockTable::Insert of an existing block\n");
    std::abort();
  }
  index_->Insert(ino, index, raw);
  ++blocks_;
  return raw;
}

void BlockTable::Erase(Block* b) {
  if (b->fetch != nullptr) {
    // Its Fetch would complete into a deleted block, and the list of blocks in flight would
    // keep a dangling pointer that FileCache::Stats follows.
    std::fprintf(stderr, "INTERNAL ERROR: BlockTable::Erase of a block in flight\n");
    std::abort();
  }
  Unqueue(b);
  auto it = inodes_.find(b->key.ino);
  if (it == inodes_.end()) return;
  const uint64_t ino = b->key.ino;
  index_->Erase(b->key.ino, b->key.index);  // before the block is deleted
  if (it->second.blocks.erase(b->key.index) > 0) --blocks_;
  MaybeDropInode(ino);
}

void BlockTable::BeginFetch(Block* b, Fetch* f) {
  Unqueue(b);
  b->fetch = f;
  b->in_flight_slot = static_cast<uint32_t>(in_flight_.size());
  in_flight_.push_back(b);
}

void BlockTable::EndFetch(Block* b) {
  if (b->fetch == nullptr || b->in_flight_slot >= in_flight_.size() ||
      in_flight_[b->in_flight_slot] != b) {
    std::fprintf(stderr, "INTERNAL ERROR: BlockTable::EndFetch of a block not in flight\n");
    std::abort();
  }
  Block* last = in_flight_.back();
  in_flight_[b->in_flight_slot] = last;
  last->in_flight_slot = b->in_flight_slot;
  in_flight_.pop_back();
  b->fetch = nullptr;
}

InodeState* BlockTable::FindInode(uint64_t ino) {
  auto it = inodes_.find(ino);
  return it == inodes_.end() ? nullptr : &it->second;
}

InodeState* BlockTable::GetInode(uint64_t ino) { return &inodes_[ino]; }

void BlockTable::MaybeDropInode(uint64_t ino) {
  auto it = inodes_.find(ino);
  if (it != inodes_.end() && it->second.blocks.empty() && it->second.writers == 0) {
    inodes_.erase(it);
  }
}

void BlockTable::BlocksInRange(uint64_t ino, uint64_t first, uint64_t last,
                               std::vector<Block*>* out) {
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return;
  auto& blocks = it->second.blocks;
  for (auto b = blocks.lower_bound(first); b != blocks.end() && b->first <= last; ++b) {
    out->push_back(b->second.get());
  }
}

void BlockTable::Link(Queue* q, Block* b) {
  b->prev = nullptr;
  b->next = q->warm;
  if (q->warm != nullptr) q->warm->prev = b;
  q->warm = b;
  if (q->cold == nullptr) q->cold = b;
  ++q->size;
}

void BlockTable::Unlink(Queue* q, Block* b) {
  if (b->prev != nullptr)
    b->prev->next = b->next;
  else
    q->warm = b->next;
  if (b->next != nullptr)
    b->next->prev = b->prev;
  else
    q->cold = b->prev;
  b->prev = b->next = nullptr;
  --q->size;
}

void BlockTable::PushLru(Block* b) {
  Unqueue(b);
  // While the queue is shorter than k, every buffer is in the tail window.
  const bool joins_tail = lru_.size < tail_window_;
  Link(&lru_, b);
  b->queue = BlockQueue::kLru;
  if (joins_tail) {
    b->in_tail = true;
    tail_head_ = b;
    ++tail_count_;
  }
}

void BlockTable::PushEvictFirst(Block* b) {
  Unqueue(b);
  Link(&evict_first_, b);
  b->queue = BlockQueue::kEvictFirst;
}

void BlockTable::Unqueue(Block* b) {
  switch (b->queue) {
    case BlockQueue::kNone:
      return;
    case BlockQueue::kEvictFirst:
      Unlink(&evict_first_, b);
      break;
    case BlockQueue::kLru:
      if (b->in_tail) {
        // The window keeps min(k, size) buffers: the warmer neighbour of the window joins it.
        Block* joining = b == tail_head_ ? b->prev : tail_head_->prev;
        Block* after = b->next;
        const bool was_head = b == tail_head_;
        Unlink(&lru_, b);
        b->in_tail = false;
        --tail_count_;
        if (joining != nullptr) {
          joining->in_tail = true;
          tail_head_ = joining;
          ++tail_count_;
        } else if (was_head) {
          tail_head_ = after;
        }
      } else {
        Unlink(&lru_, b);
      }
      break;
  }
  b->queue = BlockQueue::kNone;
}

void BlockTable::AddGhost(const BlockKey& key) {
  const uint64_t generation = ++ghost_generation_;
  ghosts_[key] = generation;
  ghost_order_.emplace_back(key, generation);
  auto stale = [this](const std::pair<BlockKey, uint64_t>& entry) {
    auto it = ghosts_.find(entry.first);
    return it == ghosts_.end() || it->second != entry.second;
  };
  while (!ghost_order_.empty() && (ghosts_.size() > tail_window_ || stale(ghost_order_.front()))) {
    if (!stale(ghost_order_.front())) ghosts_.erase(ghost_order_.front().first);
    ghost_order_.pop_front();
  }
  if (ghost_order_.size() > 4ull * tail_window_ + 16) {
    std::erase_if(ghost_order_, stale);
  }
}

bool BlockTable::TakeGhost(const BlockKey& key) { return ghosts_.erase(key) > 0; }

void BlockTable::SetTailWindow(uint32_t k) {
  tail_window_ = std::max<uint32_t>(1, k);
  for (Block* b = lru_.warm; b != nullptr; b = b->next) b->in_tail = false;
  tail_count_ = 0;
  tail_head_ = nullptr;
  for (Block* b = lru_.cold; b != nullptr && tail_count_ < tail_window_; b = b->prev) {
    b->in_tail = true;
    tail_head_ = b;
    ++tail_count_;
  }
  ghosts_.clear();
  ghost_order_.clear();
}

}  // namespace tipfs::cache
