// The linker of the gnuld workload: links TOBJ objects (object_format.h) into a TEXE image, in
// the two passes of GNU ld (binutils 2.x, ldlang.c / elflink.c):
//   pass 1, per object: the file header, then the section table it points to, then the symbol
//           and string tables the section table points to (each read depends on the one before);
//           then symbol resolution across all objects and the layout of the output sections;
//   pass 2, per object: each section's contents and its relocations, relocated and written to
//           the output at the section's place.
// Pass 1 is split into steps (LoadHeader, LoadSectionTable, LoadSymbols) so that the manual
// variant can run each step over all objects before the next, hinting the step's reads first;
// the ranges each step reads are exposed for that purpose. The original runs the steps per
// object, as ld does.
//
// TEXE image: a 64-byte header (magic "TIPEXE1", output section count, symbol table offset and
// symbol count), five 32-byte output section entries (type, address, file offset, size),
// the contents of .text .data .rodata .debug at 4 KiB-aligned offsets (address = 0x400000 +
// offset; .bss only in the address space), then the global symbols (address, name length, name).
// Not thread-safe: one linker per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/workloads/bench_common.h"
#include "bench/workloads/object_format.h"
#include "util/status.h"

namespace tipfs::bench {

// How an object's bytes are read: lseek()+read() on a descriptor, or fseeko()+fread() on a
// stdio stream as BFD does. Both read exactly the ranges asked for (stdio with its own buffer).
enum class ObjectIo { kReadCalls, kStdio };

// One open object file.
class ObjectReader {
 public:
  static Result<std::unique_ptr<ObjectReader>> Open(const std::string& path, ObjectIo io,
                                                    IoCounters* counters);
  ~ObjectReader();
  ObjectReader(const ObjectReader&) = delete;
  ObjectReader& operator=(const ObjectReader&) = delete;

  // Reads exactly `n` bytes at `offset`; end of file first is an error.
  Status ReadAt(uint64_t offset, void* buf, size_t n);
  uint64_t size() const { return size_; }

 private:
  ObjectReader(int fd, FILE* stream, uint64_t size, IoCounters* counters)
      : fd_(fd), stream_(stream), size_(size), counters_(counters) {}

  int fd_;
  FILE* stream_;  // non-null in stdio mode; owns fd_ then
  uint64_t size_;
  IoCounters* counters_;
};

// A byte range one step will read, in read order.
struct ReadRange {
  uint64_t offset;
  uint64_t length;
};

struct InputObject {
  std::string path;  // as opened
  std::string name;  // for messages
  uint64_t file_size = 0;
  tobj::Header header;
  std::vector<tobj::Section> sections;
  std::vector<tobj::Symbol> symbols;
  std::string strings;
  uint32_t symtab_index = 0;
  std::vector<uint64_t> section_address;  // per section index (content sections), after Layout
  std::vector<uint64_t> symbol_address;   // per symbol, after Resolve
};

struct LinkTotals {
  uint64_t objects = 0;
  uint64_t symbols = 0;
  uint64_t globals = 0;
  uint64_t undefined_refs = 0;
  uint64_t unresolved = 0;  // only with allow_undefined
  uint64_t relocations = 0;
  uint64_t output_bytes = 0;
  uint64_t output_digest = 0;  // order-independent over the written pieces (see WritePiece)
  uint64_t section_size[tobj::kOutputSections] = {};
};

class Linker {
 public:
  // `objects` fixes the input order. allow_undefined: an undefined symbol resolves to 0 instead
  // of failing the link (for linking a prefix of a generated set).
  Linker(std::vector<InputObject> objects, bool allow_undefined);
  ~Linker();
  Linker(const Linker&) = delete;
  Linker& operator=(const Linker&) = delete;

  size_t object_count() const { return objects_.size(); }
  const InputObject& object(size_t i) const { return objects_[i]; }

  // Pass 1 steps for object i, in this order.
  static ReadRange HeaderRead() { return {0, tobj::kHeaderBytes}; }
  Status LoadHeader(size_t i, ObjectReader& reader);
  ReadRange SectionTableRead(size_t i) const;  // REQUIRES: LoadHeader(i) done
  Status LoadSectionTable(size_t i, ObjectReader& reader);
  std::vector<ReadRange> SymbolReads(size_t i) const;  // REQUIRES: LoadSectionTable(i) done
  Status LoadSymbols(size_t i, ObjectReader& reader);

  // After pass 1 on every object: global symbols, then addresses.
  Status ResolveAndLayout();

  // Pass 2.
  Status BeginOutput(const std::string& output_path);
  std::vector<ReadRange> Pass2Reads(size_t i) const;  // the reads LinkObject(i) makes, in order
  Status LinkObject(size_t i, ObjectReader& reader);
  Status FinishOutput();

  const LinkTotals& totals() const { return totals_; }

 private:
  // One pass-2 step: a section with contents, and the relocation sections patching it.
  struct Pass2Step {
    uint32_t section;
    std::vector<uint32_t> relocation_sections;
  };
  std::vector<Pass2Step> Pass2Plan(size_t i) const;
  Status Relocate(const InputObject& object, uint32_t section, const tobj::Relocation& relocation,
                  unsigned char* contents);
  Status WritePiece(const void* data, size_t n, uint64_t offset);

  std::vector<InputObject> objects_;
  bool allow_undefined_;
  struct GlobalRef {
    uint32_t object;
    uint32_t symbol;
  };
  std::unordered_map<std::string, GlobalRef> globals_;
  std::vector<GlobalRef> globals_in_order_;
  uint64_t output_file_offset_[tobj::kOutputSections] = {};
  uint64_t output_address_[tobj::kOutputSections] = {};
  uint64_t symbols_offset_ = 0;
  int output_fd_ = -1;
  std::string output_path_;
  std::vector<unsigned char> contents_;
  std::vector<unsigned char> relocations_;
  LinkTotals totals_;
};

}  // namespace tipfs::bench
