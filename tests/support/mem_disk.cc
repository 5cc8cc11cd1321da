#include "tests/support/mem_disk.h"

#include <algorithm>
#include <cstring>

#include "util/mutex.h"

namespace tipfs::testing {

using stripe::DiskRequest;

void MemDisk::Submit(DiskRequest request) {
  Result<uint64_t> result = uint64_t{0};
  {
    MutexLock lock(&mu_);
    ++requests_;
    switch (request.kind) {
      case DiskRequest::Kind::kRead: {
        auto it = objects_.find(request.object);
        uint64_t n = 0;
        if (it != objects_.end() && request.offset < it->second.size()) {
          n = std::min<uint64_t>(request.length, it->second.size() - request.offset);
          std::memcpy(request.buffer, it->second.data() + request.offset, n);
        }
        result = n;
        break;
      }
      case DiskRequest::Kind::kWrite: {
        std::string& object = objects_[request.object];
        if (object.size() < request.offset + request.length) {
          object.resize(request.offset + request.length, '\0');
        }
        std::memcpy(object.data() + request.offset, request.buffer, request.length);
        if (request.length > 0) {
          std::set<uint64_t>& pages = pages_[request.object];
          for (uint64_t p = request.offset / kPage;
               p <= (request.offset + request.length - 1) / kPage; ++p) {
            pages.insert(p);
          }
        }
        result = request.length;
        break;
      }
      case DiskRequest::Kind::kSync:
        break;
    }
  }
  request.done(std::move(result));
}

Status MemDisk::Truncate(stripe::ObjectId object, uint64_t size) {
  MutexLock lock(&mu_);
  auto it = objects_.find(object);
  if (it == objects_.end()) {
    if (size == 0) return Status::OK();
    it = objects_.emplace(object, std::string()).first;
  }
  it->second.resize(size, '\0');
  std::set<uint64_t>& pages = pages_[object];
  pages.erase(pages.lower_bound((size + kPage - 1) / kPage), pages.end());
  return Status::OK();
}

Status MemDisk::Remove(stripe::ObjectId object) {
  MutexLock lock(&mu_);
  objects_.erase(object);
  pages_.erase(object);
  return Status::OK();
}

Result<stripe::ObjectInfo> MemDisk::Stat(stripe::ObjectId object) {
  MutexLock lock(&mu_);
  auto it = objects_.find(object);
  if (it == objects_.end())
    return Status::NotFound(name_ + ": no object " + std::to_string(object));
  auto pages = pages_.find(object);
  const uint64_t allocated = pages == pages_.end() ? 0 : pages->second.size() * kPage;
  return stripe::ObjectInfo{it->second.size(), allocated};
}

Result<uint64_t> MemDisk::Seek(stripe::ObjectId object, uint64_t offset, stripe::SeekKind kind) {
  MutexLock lock(&mu_);
  auto it = objects_.find(object);
  const uint64_t size = it == objects_.end() ? 0 : it->second.size();
  const bool data = kind == stripe::SeekKind::kData;
  if (offset >= size) return data ? Disk::kNoData : offset;
  static const std::set<uint64_t> kNone;
  auto found = pages_.find(object);
  const std::set<uint64_t>& pages = found == pages_.end() ? kNone : found->second;
  uint64_t page = offset / kPage;
  if (data) {
    auto next = pages.lower_bound(page);
    if (next == pages.end()) return Disk::kNoData;
    return std::max(offset, *next * kPage);
  }
  while (pages.count(page) != 0) ++page;
  return std::min(size, std::max(offset, page * kPage));
}

Status MemDisk::ListObjects(std::vector<stripe::ObjectId>* out) {
  MutexLock lock(&mu_);
  for (const auto& [id, data] : objects_) out->push_back(id);
  return Status::OK();
}

Result<stripe::DiskUsage> MemDisk::Usage() {
  MutexLock lock(&mu_);
  uint64_t used = 0;
  for (const auto& [id, data] : objects_) used += data.size();
  constexpr uint64_t kTotal = uint64_t{1} << 40;
  stripe::DiskUsage usage{kTotal, kTotal - used, 1 << 20, (1 << 20) - objects_.size()};
  usage.store_id = store_id_;
  return usage;
}

void MemDisk::set_store_id(uint64_t id) {
  MutexLock lock(&mu_);
  store_id_ = id;
}

std::string MemDisk::Contents(stripe::ObjectId object) const {
  MutexLock lock(&mu_);
  auto it = objects_.find(object);
  return it == objects_.end() ? std::string() : it->second;
}

uint64_t MemDisk::requests() const {
  MutexLock lock(&mu_);
  return requests_;
}

uint64_t MemDisk::bytes_used() const {
  MutexLock lock(&mu_);
  uint64_t used = 0;
  for (const auto& [id, data] : objects_) used += data.size();
  return used;
}

}  // namespace tipfs::testing
