// Read sites: where in the program a read of a watched file comes from, as a key that is the same
// in every run of the same binaries (ASLR moves addresses, not offsets within an object), and the
// set of sites learned to be data-critical (a child that read garbage there took the wrong path).
//
// ObjectTable maps an address to the loaded object holding it (by the object's GNU build-id, or
// its path when it has none) and the offset within it. The program refreshes it before each fork
// (dl_iterate_phdr); the child, in its SIGSYS handler, only reads it. ReadSiteHere() unwinds the
// calling thread's stack (through a signal frame too: libgcc's unwinder knows it) and folds the
// first kSiteFrames return addresses outside libtipspec into one key: reads from the same call
// path get the same key (a read in bfd_check_format and one in bfd_get_section_contents do not).
// Async-signal-safe once WarmUpUnwinder() has run in the program (the unwinder initialises itself
// with a futex at first use, and the child may make no call the sandbox did not plan for).
//
// CriticalSites is a fixed-size set of keys: the program inserts, every child it forks reads its
// own copy. Not thread-safe: the Speculator changes it under its lock.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tipfs::spec {

class ObjectTable {
 public:
  static constexpr int kMaxObjects = 512;

  // Re-reads the loaded objects when dlopen or dlclose changed them since the last call. Program
  // side only (takes the dynamic linker's lock). Returns the number of objects.
  int Refresh();
  // The object holding `address` and the address's offset in it; false when none does.
  bool Lookup(uintptr_t address, uint64_t* object_id, uint64_t* offset) const;
  // The main executable's id (its build-id hash): the key learned sites are kept under.
  uint64_t main_id() const { return main_id_; }

 private:
  struct Object {
    uintptr_t start;
    uintptr_t end;
    uint64_t id;
  };
  Object objects_[kMaxObjects] = {};  // sorted by start
  int count_ = 0;
  unsigned long long adds_ = 0;
  unsigned long long subs_ = 0;
  uint64_t main_id_ = 0;
};

inline constexpr int kSiteFrames = 10;

// Call once in the program before the first fork.
void WarmUpUnwinder();
// The key of the calling code path (0 when the stack could not be walked). The frames at the top
// of the stack that lie in the object holding libtipspec (its handler and read path) are skipped
// unless `skip_own_frames` is false (tests, where that object is the test program).
uint64_t ReadSiteHere(const ObjectTable& objects, bool skip_own_frames = true);

class CriticalSites {
 public:
  static constexpr size_t kCapacity = 256;  // learned sites per program, at most
  bool Contains(uint64_t site) const;
  // False when full, or for 0 (no site).
  bool Insert(uint64_t site);
  size_t size() const { return size_; }
  // The sites in no particular order, for saving.
  size_t CopyTo(uint64_t* out, size_t max) const;
  void Clear();
  // Removes every site that `these` holds.
  void RemoveAll(const CriticalSites& these);

 private:
  static constexpr size_t kSlots = 2 * kCapacity;  // open addressing, at most half full
  uint64_t slots_[kSlots] = {};
  size_t size_ = 0;
};

}  // namespace tipfs::spec
