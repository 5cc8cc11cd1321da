#include "speculate/read_predictor.h"

#include <string.h>

namespace tipfs::spec {

namespace {

// Copies `length` bytes of `from` into the iovecs starting `at` bytes into them.
void CopyInto(const struct iovec* iov, int iov_count, size_t at, const char* from, size_t length,
              int fill) {
  for (int i = 0; i < iov_count && length > 0; ++i) {
    if (at >= iov[i].iov_len) {
      at -= iov[i].iov_len;
      continue;
    }
    const size_t n = iov[i].iov_len - at < length ? iov[i].iov_len - at : length;
    char* to = static_cast<char*>(iov[i].iov_base) + at;
    if (from != nullptr) {
      memcpy(to, from, n);
      from += n;
    } else {
      memset(to, fill, n);
    }
    length -= n;
    at = 0;
  }
}

uint8_t CappedOrdinal(uint32_t ordinal) {
  if (ordinal == ReadPredictor::kUnknownOrdinal) return ReadPredictor::kOrdinals;
  return static_cast<uint8_t>(ordinal < ReadPredictor::kOrdinals ? ordinal
                                                                 : ReadPredictor::kOrdinals - 1);
}

}  // namespace

int ReadPredictor::IndexOf(uint64_t site) const {
  for (int i = 0; site != 0 && i < kSites; ++i) {
    if (sites_[i].key == site) return i;
  }
  return -1;
}

const ReadPredictor::Kept* ReadPredictor::Best(const Site& s, uint32_t ordinal, uint64_t file_size,
                                               size_t length) const {
  const uint8_t wanted = CappedOrdinal(ordinal);
  if (wanted == kOrdinals) return nullptr;
  const Kept* best = nullptr;
  for (const Kept& k : s.reads) {
    if (k.length == 0 || k.length > length || k.ordinal != wanted || k.file_size > file_size) {
      continue;
    }
    // A read kept in part only when no read kept whole fits: the bytes past kMaxBytes are lost.
    if (best == nullptr || (best->cut && !k.cut) ||
        (best->cut == k.cut && k.length > best->length)) {
      best = &k;
    }
  }
  return best;
}

void ReadPredictor::Remember(uint64_t site, uint32_t ordinal, uint64_t file_size,
                             const struct iovec* iov, int iov_count, size_t length, bool whole) {
  if (site == 0 || length == 0) return;
  const int index = IndexOf(site);
  Site* s = index >= 0 ? &sites_[index] : nullptr;
  if (s == nullptr) {  // a new site takes the one remembered longest ago
    s = &sites_[0];
    for (Site& candidate : sites_) {
      if (candidate.key == 0 || candidate.age < s->age) s = &candidate;
      if (s->key == 0) break;
    }
    s->key = site;
    for (Kept& k : s->reads) k.length = 0;
  }
  s->age = ++clock_;
  // An unused slot, else the oldest but the shortest of each ordinal.
  const Kept* shortest[kOrdinals + 1] = {};
  for (const Kept& k : s->reads) {
    const Kept*& of_ordinal = shortest[k.ordinal];
    if (k.length != 0 && (of_ordinal == nullptr || k.length < of_ordinal->length)) of_ordinal = &k;
  }
  Kept* slot = nullptr;
  Kept* oldest = nullptr;  // when every read is the shortest of its ordinal (kOrdinals > slots)
  for (Kept& k : s->reads) {
    if (k.length == 0) {
      slot = &k;
      break;
    }
    if (oldest == nullptr || k.age < oldest->age) oldest = &k;
    if (&k != shortest[k.ordinal] && (slot == nullptr || k.age < slot->age)) slot = &k;
  }
  if (slot == nullptr) slot = oldest;
  const size_t kept = length < kMaxBytes ? length : kMaxBytes;
  size_t copied = 0;
  for (int i = 0; i < iov_count && copied < kept; ++i) {
    const size_t n = iov[i].iov_len < kept - copied ? iov[i].iov_len : kept - copied;
    memcpy(slot->bytes + copied, iov[i].iov_base, n);
    copied += n;
  }
  slot->length = static_cast<uint32_t>(copied);
  slot->text = memchr(slot->bytes, 0, copied) == nullptr;
  slot->whole = whole && copied == length;
  slot->cut = copied < length;
  slot->ordinal = CappedOrdinal(ordinal);
  slot->file_size = file_size;
  slot->age = clock_;
}

bool ReadPredictor::CanFill(uint64_t site, uint32_t ordinal, uint64_t file_size,
                            size_t length) const {
  const int index = IndexOf(site);
  return index >= 0 && length > 0 && Best(sites_[index], ordinal, file_size, length) != nullptr;
}

bool ReadPredictor::Fill(uint64_t site, uint32_t ordinal, uint64_t file_size,
                         const struct iovec* iov, int iov_count, size_t length) const {
  const int index = IndexOf(site);
  const Kept* best =
      index < 0 || length == 0 ? nullptr : Best(sites_[index], ordinal, file_size, length);
  if (best == nullptr) return false;
  size_t at = 0;
  if (!best->text && !best->cut) {
    // Binary: the kept read again and again. A table read whole at this site (relocations,
    // symbols) is whole records, so every copy starts at a record; zeros would be records too, but
    // ones naming entry 0 and offset 0, which a linker rejects.
    for (; length - at >= best->length; at += best->length) {
      CopyInto(iov, iov_count, at, best->bytes, best->length, 0);
    }
    CopyInto(iov, iov_count, at, best->bytes, length - at, 0);
    return true;
  }
  CopyInto(iov, iov_count, 0, best->bytes, best->length, 0);
  CopyInto(iov, iov_count, best->length, nullptr, length - best->length, best->text ? '\n' : 0);
  return true;
}

const ReadPredictor::Kept* ReadPredictor::BestWhole(uint64_t site, size_t capacity) const {
  const int index = IndexOf(site);
  if (index < 0) return nullptr;
  const Kept* best = nullptr;
  for (const Kept& k : sites_[index].reads) {
    if (k.length == 0 || !k.whole || k.length >= capacity) continue;
    if (best == nullptr || k.length > best->length) best = &k;
  }
  return best;
}

size_t ReadPredictor::WholeFits(uint64_t site, size_t capacity) const {
  const Kept* best = BestWhole(site, capacity);
  return best == nullptr ? 0 : best->length;
}

size_t ReadPredictor::FillWhole(uint64_t site, const struct iovec* iov, int iov_count,
                                size_t capacity) const {
  const Kept* best = BestWhole(site, capacity);
  if (best == nullptr) return 0;
  CopyInto(iov, iov_count, 0, best->bytes, best->length, 0);
  return best->length;
}

}  // namespace tipfs::spec
