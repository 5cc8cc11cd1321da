#include "cache/buffer_pool.h"

#include <cstdlib>

namespace tipfs::cache {

BufferPool* BufferPool::Global() {
  static BufferPool* pool = new BufferPool();  // never destroyed: buffers may outlive caches
  return pool;
}

BufferPool::~BufferPool() {
  MutexLock lock(&mu_);
  for (SizeClass& c : classes_) {
    for (char* p : c.free) std::free(p);
  }
}

BufferPool::SizeClass* BufferPool::ClassOf(size_t bytes) {
  for (SizeClass& c : classes_) {
    if (c.bytes == bytes) return &c;
  }
  SizeClass& c = classes_.emplace_back();
  c.bytes = bytes;
  // Give never allocates: the list has room for all it may keep.
  c.free.reserve(kMaxPooledBytes / bytes);
  return &c;
}

char* BufferPool::Take(size_t bytes) {
  if (bytes <= kMaxPooledSize) {
    MutexLock lock(&mu_);
    SizeClass* c = ClassOf(bytes);
    if (!c->free.empty()) {
      char* p = c->free.back();
      c->free.pop_back();
      ++reused_;
      return p;
    }
    ++allocated_;
  }
  return static_cast<char*>(std::aligned_alloc(kPage, bytes));
}

void BufferPool::Give(char* memory, size_t bytes) {
  if (memory == nullptr) return;
  if (bytes <= kMaxPooledSize) {
    MutexLock lock(&mu_);
    SizeClass* c = ClassOf(bytes);
    if (c->free.size() < c->free.capacity()) {
      c->free.push_back(memory);
      return;
    }
  }
  std::free(memory);
}

BufferPool::Stats BufferPool::GetStats() const {
  MutexLock lock(&mu_);
  Stats s;
  s.reused = reused_;
  s.allocated = allocated_;
  for (const SizeClass& c : classes_) s.pooled += c.free.size();
  return s;
}

}  // namespace tipfs::cache
