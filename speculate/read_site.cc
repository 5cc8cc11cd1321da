#include "speculate/read_site.h"

#include <elf.h>
#include <link.h>
#include <string.h>
#include <unwind.h>

#include <algorithm>

namespace tipfs::spec {

namespace {

// FNV-1a, 64 bits (Fowler, Noll, Vo): stable across runs and machines, no allocation.
constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t Fnv(uint64_t hash, const void* data, size_t length) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < length; ++i) hash = (hash ^ bytes[i]) * kFnvPrime;
  return hash;
}

uint64_t FnvValue(uint64_t hash, uint64_t value) { return Fnv(hash, &value, sizeof(value)); }

// The object's NT_GNU_BUILD_ID note, hashed; 0 when it has none.
uint64_t BuildIdHash(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* note = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = note + ph.p_memsz;
    while (note + sizeof(ElfW(Nhdr)) <= end) {
      const auto* header = reinterpret_cast<const ElfW(Nhdr)*>(note);
      const char* name = note + sizeof(ElfW(Nhdr));
      const char* desc = name + ((header->n_namesz + 3) & ~3u);
      const char* next = desc + ((header->n_descsz + 3) & ~3u);
      if (next > end) break;
      if (header->n_type == NT_GNU_BUILD_ID && header->n_namesz == 4 &&
          memcmp(name, "GNU", 4) == 0) {
        return Fnv(kFnvOffset, desc, header->n_descsz);
      }
      note = next;
    }
  }
  return 0;
}

struct RefreshState {
  ObjectTable* table;
  bool changed;
  unsigned long long adds;
  unsigned long long subs;
};

// Where this library itself lies: its frames are the same for every read and are skipped.
uintptr_t g_self_start = 0;
uintptr_t g_self_end = 0;

struct Walk {
  const ObjectTable* objects;
  uint64_t hash;
  int frames;
  bool skipping;  // still in the leading frames of this library
};

_Unwind_Reason_Code VisitFrame(struct _Unwind_Context* context, void* argument) {
  auto* walk = static_cast<Walk*>(argument);
  int before_instruction = 0;
  uintptr_t ip = _Unwind_GetIPInfo(context, &before_instruction);
  if (ip == 0) return _URC_END_OF_STACK;
  // A return address points after the call; the call itself is one byte before (a signal
  // frame's address is the interrupted instruction itself).
  if (before_instruction == 0) --ip;
  if (walk->skipping && ip >= g_self_start && ip < g_self_end) return _URC_NO_REASON;
  walk->skipping = false;
  uint64_t object = 0;
  uint64_t offset = 0;
  walk->objects->Lookup(ip, &object, &offset);
  walk->hash = FnvValue(FnvValue(walk->hash, object), offset);
  return ++walk->frames < kSiteFrames ? _URC_NO_REASON : _URC_END_OF_STACK;
}

}  // namespace

int ObjectTable::Refresh() {
  RefreshState state{this, false, 0, 0};
  // First pass: only the dynamic linker's counters, to see whether anything changed.
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* argument) {
        auto* s = static_cast<RefreshState*>(argument);
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
          s->adds = info->dlpi_adds;
          s->subs = info->dlpi_subs;
        }
        return 1;  // the counters are the same in every entry
      },
      &state);
  if (count_ > 0 && state.adds == adds_ && state.subs == subs_) return count_;
  adds_ = state.adds;
  subs_ = state.subs;
  count_ = 0;
  main_id_ = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* argument) {
        auto* table = static_cast<RefreshState*>(argument)->table;
        if (table->count_ >= kMaxObjects) return 1;
        uintptr_t start = UINTPTR_MAX;
        uintptr_t end = 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          start = std::min<uintptr_t>(start, info->dlpi_addr + ph.p_vaddr);
          end = std::max<uintptr_t>(end, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
        }
        if (start >= end) return 0;
        uint64_t id = BuildIdHash(info);
        const char* name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        if (id == 0) id = Fnv(kFnvOffset, name, strlen(name));
        if (table->count_ == 0) table->main_id_ = id;  // the first entry is the executable
        table->objects_[table->count_++] = Object{start, end, id};
        const auto self = reinterpret_cast<uintptr_t>(&ReadSiteHere);
        if (self >= start && self < end) {
          g_self_start = start;
          g_self_end = end;
        }
        return 0;
      },
      &state);
  std::sort(objects_, objects_ + count_,
            [](const Object& a, const Object& b) { return a.start < b.start; });
  return count_;
}

bool ObjectTable::Lookup(uintptr_t address, uint64_t* object_id, uint64_t* offset) const {
  int low = 0;
  int high = count_;
  while (low < high) {  // the first object starting after `address`
    int middle = (low + high) / 2;
    if (objects_[middle].start <= address) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  if (low == 0 || address >= objects_[low - 1].end) return false;
  *object_id = objects_[low - 1].id;
  *offset = address - objects_[low - 1].start;
  return true;
}

void WarmUpUnwinder() {
  ObjectTable empty;
  (void)ReadSiteHere(empty);
}

uint64_t ReadSiteHere(const ObjectTable& objects, bool skip_own_frames) {
  Walk walk{&objects, kFnvOffset, 0, skip_own_frames};
  _Unwind_Backtrace(VisitFrame, &walk);
  return walk.frames == 0 ? 0 : (walk.hash == 0 ? 1 : walk.hash);
}

bool CriticalSites::Contains(uint64_t site) const {
  if (site == 0 || size_ == 0) return false;
  for (size_t i = site % kSlots, probes = 0; probes < kSlots; i = (i + 1) % kSlots, ++probes) {
    if (slots_[i] == site) return true;
    if (slots_[i] == 0) return false;
  }
  return false;
}

bool CriticalSites::Insert(uint64_t site) {
  if (site == 0 || Contains(site)) return site != 0;
  if (size_ >= kCapacity) return false;
  size_t i = site % kSlots;
  while (slots_[i] != 0) i = (i + 1) % kSlots;
  slots_[i] = site;
  ++size_;
  return true;
}

size_t CriticalSites::CopyTo(uint64_t* out, size_t max) const {
  size_t n = 0;
  for (size_t i = 0; i < kSlots && n < max; ++i) {
    if (slots_[i] != 0) out[n++] = slots_[i];
  }
  return n;
}

void CriticalSites::Clear() {
  memset(slots_, 0, sizeof(slots_));
  size_ = 0;
}

void CriticalSites::RemoveAll(const CriticalSites& these) {
  uint64_t kept[kCapacity];
  size_t n = 0;
  for (size_t i = 0; i < kSlots; ++i) {
    if (slots_[i] != 0 && !these.Contains(slots_[i])) kept[n++] = slots_[i];
  }
  Clear();  // open addressing: rebuilt rather than holes punched
  for (size_t i = 0; i < n; ++i) Insert(kept[i]);
}

}  // namespace tipfs::spec
