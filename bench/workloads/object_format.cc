#include "bench/workloads/object_format.h"

#include <bit>
#include <cstring>

namespace tipfs::bench::tobj {

static_assert(std::endian::native == std::endian::little,
              "TOBJ is little-endian and read with memcpy; add byte swaps for this host");

void PutU32(unsigned char* p, uint32_t v) { std::memcpy(p, &v, 4); }
void PutU64(unsigned char* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t GetU32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t GetU64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Header: magic[8] version:u32 section_count:u32 section_table_offset:u64 section_bytes:u32
//         reserved:u32 file_size:u64, zero to 64 bytes.
void EncodeHeader(const Header& header, unsigned char* out) {
  std::memset(out, 0, kHeaderBytes);
  std::memcpy(out, kMagic, 8);
  PutU32(out + 8, kVersion);
  PutU32(out + 12, header.section_count);
  PutU64(out + 16, header.section_table_offset);
  PutU32(out + 24, kSectionBytes);
  PutU64(out + 32, header.file_size);
}

Result<Header> DecodeHeader(const unsigned char* in, uint64_t file_size) {
  if (std::memcmp(in, kMagic, 8) != 0) return Status::Corruption("file format not recognized");
  if (GetU32(in + 8) != kVersion) {
    return Status::Corruption("unsupported TOBJ version " + std::to_string(GetU32(in + 8)));
  }
  if (GetU32(in + 24) != kSectionBytes) return Status::Corruption("bad section entry size");
  Header header;
  header.section_count = GetU32(in + 12);
  header.section_table_offset = GetU64(in + 16);
  header.file_size = GetU64(in + 32);
  if (header.file_size != file_size) {
    return Status::Corruption("truncated or extended object: header says " +
                              std::to_string(header.file_size) + " bytes, file has " +
                              std::to_string(file_size));
  }
  if (header.section_count == 0 || header.section_count > kMaxSections) {
    return Status::Corruption("bad section count " + std::to_string(header.section_count));
  }
  if (header.section_table_offset > file_size ||
      file_size - header.section_table_offset < uint64_t{header.section_count} * kSectionBytes) {
    return Status::Corruption("section table outside the file");
  }
  return header;
}

// Section: type:u32 link:u32 info:u32 align:u32 offset:u64 size:u64 entries:u64 reserved:u64.
void EncodeSection(const Section& section, unsigned char* out) {
  std::memset(out, 0, kSectionBytes);
  PutU32(out, section.type);
  PutU32(out + 4, section.link);
  PutU32(out + 8, section.info);
  PutU32(out + 12, section.align);
  PutU64(out + 16, section.offset);
  PutU64(out + 24, section.size);
  PutU64(out + 32, section.entries);
}

Result<Section> DecodeSection(const unsigned char* in, uint64_t file_size) {
  Section section;
  section.type = GetU32(in);
  section.link = GetU32(in + 4);
  section.info = GetU32(in + 8);
  section.align = GetU32(in + 12);
  section.offset = GetU64(in + 16);
  section.size = GetU64(in + 24);
  section.entries = GetU64(in + 32);
  if (section.type > kRelocations) {
    return Status::Corruption("unknown section type " + std::to_string(section.type));
  }
  if (section.align == 0 || (section.align & (section.align - 1)) != 0 || section.align > 4096) {
    return Status::Corruption("bad section alignment " + std::to_string(section.align));
  }
  if (section.type != kBss && section.type != kNull &&
      (section.offset > file_size || file_size - section.offset < section.size)) {
    return Status::Corruption("section contents outside the file");
  }
  if (section.type == kBss && section.size > (uint64_t{1} << 32)) {
    return Status::Corruption("bss section too large");
  }
  if (section.type == kSymtab && section.size != section.entries * kSymbolBytes) {
    return Status::Corruption("symbol table size does not match its entry count");
  }
  if (section.type == kRelocations && section.size != section.entries * kRelocationBytes) {
    return Status::Corruption("relocation section size does not match its entry count");
  }
  return section;
}

// Symbol: name_offset:u32 name_length:u32 section:u16 binding:u8 reserved:u8 reserved:u32
//         value:u64.
void EncodeSymbol(const Symbol& symbol, unsigned char* out) {
  std::memset(out, 0, kSymbolBytes);
  PutU32(out, symbol.name_offset);
  PutU32(out + 4, symbol.name_length);
  std::memcpy(out + 8, &symbol.section, 2);
  out[10] = symbol.binding;
  PutU64(out + 16, symbol.value);
}

Symbol DecodeSymbol(const unsigned char* in) {
  Symbol symbol;
  symbol.name_offset = GetU32(in);
  symbol.name_length = GetU32(in + 4);
  std::memcpy(&symbol.section, in + 8, 2);
  symbol.binding = in[10];
  symbol.value = GetU64(in + 16);
  return symbol;
}

// Relocation: offset:u64 symbol:u32 type:u32 addend:i64.
void EncodeRelocation(const Relocation& relocation, unsigned char* out) {
  PutU64(out, relocation.offset);
  PutU32(out + 8, relocation.symbol);
  PutU32(out + 12, relocation.type);
  PutU64(out + 16, static_cast<uint64_t>(relocation.addend));
}

Relocation DecodeRelocation(const unsigned char* in) {
  Relocation relocation;
  relocation.offset = GetU64(in);
  relocation.symbol = GetU32(in + 8);
  relocation.type = GetU32(in + 12);
  relocation.addend = static_cast<int64_t>(GetU64(in + 16));
  return relocation;
}

}  // namespace tipfs::bench::tobj
