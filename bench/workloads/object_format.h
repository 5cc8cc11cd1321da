// TOBJ: the synthetic relocatable object format read by tipfs-bench-gnuld and written by
// tipfs-bench-gen. Shaped like ELF so that a linker over it reads what GNU ld reads, in the same
// dependent order: the file header gives the section table's place, the section table gives the
// places of the symbol table, the string table, the contents and the relocations. A program that
// has not read the earlier part cannot know where the next read goes (why speculation without the
// data goes wrong on gnuld, Chang & Gibson 1999 section 5).
//
// Layout of one object (all integers little-endian, every part 16-byte aligned):
//   header (64) | .text | .data | .rodata | .debug | relocations x3 | symtab | strtab | sections
// The writer puts the section table last, as ELF writers do. Readers must take every offset
// from the file, never from this layout.
// Plain data and pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/status.h"

namespace tipfs::bench::tobj {

inline constexpr char kMagic[8] = {'T', 'I', 'P', 'O', 'B', 'J', '1', '\0'};
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 64;
inline constexpr size_t kSectionBytes = 48;
inline constexpr size_t kSymbolBytes = 24;
inline constexpr size_t kRelocationBytes = 24;
inline constexpr uint32_t kMaxSections = 256;
inline constexpr uint16_t kUndefinedSection = 0;  // symbol section index of an undefined symbol

enum SectionType : uint32_t {
  kNull = 0,
  kText = 1,
  kData = 2,
  kRodata = 3,
  kDebug = 4,
  kBss = 5,  // size only, no bytes in the file
  kSymtab = 6,
  kStrtab = 7,
  kRelocations = 8,  // info: index of the section patched; link: index of the symbol table
};

// Output sections of the linked image, in output order; an input section of type t goes to
// output section t - 1 (t in kText..kBss).
inline constexpr int kOutputSections = 5;
inline bool IsContentType(uint32_t type) { return type >= kText && type <= kBss; }

enum Binding : uint8_t { kLocal = 0, kGlobal = 1 };

enum RelocationType : uint32_t {
  kAbs64 = 1,  // *(u64*)P = S + A
  kPc32 = 2,   // *(i32*)P = S + A - P
  kAbs32 = 3,  // *(u32*)P = S + A (truncated)
};

struct Header {
  uint32_t section_count = 0;
  uint64_t section_table_offset = 0;
  uint64_t file_size = 0;  // what the writer wrote; a reader checks it against fstat
};

struct Section {
  uint32_t type = kNull;
  uint32_t link = 0;
  uint32_t info = 0;
  uint32_t align = 1;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t entries = 0;  // symbols or relocations in it
};

struct Symbol {
  uint32_t name_offset = 0;  // into the string table
  uint32_t name_length = 0;
  uint16_t section = kUndefinedSection;
  uint8_t binding = kLocal;
  uint64_t value = 0;  // offset inside its section
};

struct Relocation {
  uint64_t offset = 0;  // inside the section patched
  uint32_t symbol = 0;  // index into the symbol table
  uint32_t type = kAbs64;
  int64_t addend = 0;
};

void EncodeHeader(const Header& header, unsigned char* out);
void EncodeSection(const Section& section, unsigned char* out);
void EncodeSymbol(const Symbol& symbol, unsigned char* out);
void EncodeRelocation(const Relocation& relocation, unsigned char* out);

// Decoders validate what can be checked locally and name the problem; `file_size` is the size
// of the file the bytes came from (fstat), so offsets can be bounds-checked.
Result<Header> DecodeHeader(const unsigned char* in, uint64_t file_size);
Result<Section> DecodeSection(const unsigned char* in, uint64_t file_size);
Symbol DecodeSymbol(const unsigned char* in);
Relocation DecodeRelocation(const unsigned char* in);

// Little-endian field access, shared with the output image writer.
void PutU32(unsigned char* p, uint32_t v);
void PutU64(unsigned char* p, uint64_t v);
uint32_t GetU32(const unsigned char* p);
uint64_t GetU64(const unsigned char* p);

}  // namespace tipfs::bench::tobj
