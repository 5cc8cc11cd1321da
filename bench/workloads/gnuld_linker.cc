#include "bench/workloads/gnuld_linker.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tipfs::bench {

using namespace tobj;

namespace {

constexpr uint64_t kImageBase = 0x400000;
constexpr uint64_t kPage = 4096;
constexpr char kImageMagic[8] = {'T', 'I', 'P', 'E', 'X', 'E', '1', '\0'};
constexpr size_t kImageHeaderBytes = 64;
constexpr size_t kImageSectionBytes = 32;

uint64_t AlignUp(uint64_t v, uint64_t align) { return (v + align - 1) & ~(align - 1); }

Status ObjectError(const InputObject& object, const Status& status) {
  return Status::FromErrno(status.error(), object.name + ": " + status.message());
}

}  // namespace

Result<std::unique_ptr<ObjectReader>> ObjectReader::Open(const std::string& path, ObjectIo io,
                                                         IoCounters* counters) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status status = ErrnoStatus("fstat " + path);
    ::close(fd);
    return status;
  }
  ++counters->files_opened;
  FILE* stream = nullptr;
  if (io == ObjectIo::kStdio) {
    stream = ::fdopen(fd, "rb");
    if (stream == nullptr) {
      Status status = ErrnoStatus("fdopen " + path);
      ::close(fd);
      return status;
    }
  }
  return std::unique_ptr<ObjectReader>(
      new ObjectReader(fd, stream, static_cast<uint64_t>(st.st_size), counters));
}

ObjectReader::~ObjectReader() {
  if (stream_ != nullptr) {
    std::fclose(stream_);
  } else {
    ::close(fd_);
  }
}

Status ObjectReader::ReadAt(uint64_t offset, void* buf, size_t n) {
  if (offset > size_ || size_ - offset < n) {
    return Status::Corruption("read of " + std::to_string(n) + " bytes at " +
                              std::to_string(offset) + " is past the end of the file");
  }
  ++counters_->read_calls;
  counters_->bytes_read += n;
  if (stream_ != nullptr) {
    if (::fseeko(stream_, static_cast<off_t>(offset), SEEK_SET) != 0) return ErrnoStatus("fseeko");
    if (std::fread(buf, 1, n, stream_) != n) {
      return std::ferror(stream_) ? ErrnoStatus("fread") : Status::IOError("short fread");
    }
    return Status::OK();
  }
  if (::lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0) return ErrnoStatus("lseek");
  size_t got = 0;
  TIPFS_RETURN_IF_ERROR(ReadFull(fd_, buf, n, &got));
  if (got != n) return Status::IOError("short read at " + std::to_string(offset));
  return Status::OK();
}

Linker::Linker(std::vector<InputObject> objects, bool allow_undefined)
    : objects_(std::move(objects)), allow_undefined_(allow_undefined) {
  totals_.objects = objects_.size();
}

Linker::~Linker() {
  if (output_fd_ >= 0) ::close(output_fd_);
}

Status Linker::LoadHeader(size_t i, ObjectReader& reader) {
  InputObject& object = objects_[i];
  object.file_size = reader.size();
  unsigned char bytes[kHeaderBytes];
  Status st = reader.ReadAt(0, bytes, sizeof bytes);
  if (!st.ok()) return ObjectError(object, st);
  Result<Header> header = DecodeHeader(bytes, object.file_size);
  if (!header.ok()) return ObjectError(object, header.status());
  object.header = *header;
  return Status::OK();
}

ReadRange Linker::SectionTableRead(size_t i) const {
  const Header& h = objects_[i].header;
  return {h.section_table_offset, uint64_t{h.section_count} * kSectionBytes};
}

Status Linker::LoadSectionTable(size_t i, ObjectReader& reader) {
  InputObject& object = objects_[i];
  ReadRange range = SectionTableRead(i);
  std::vector<unsigned char> bytes(range.length);
  Status st = reader.ReadAt(range.offset, bytes.data(), bytes.size());
  if (!st.ok()) return ObjectError(object, st);
  object.sections.clear();
  object.symtab_index = 0;
  for (uint32_t s = 0; s < object.header.section_count; ++s) {
    Result<Section> section = DecodeSection(bytes.data() + s * kSectionBytes, object.file_size);
    if (!section.ok()) return ObjectError(object, section.status());
    if (section->type == kSymtab && object.symtab_index == 0) object.symtab_index = s;
    object.sections.push_back(*section);
  }
  const uint32_t count = object.header.section_count;
  if (object.symtab_index == 0) return ObjectError(object, Status::Corruption("no symbol table"));
  const Section& symtab = object.sections[object.symtab_index];
  if (symtab.link >= count || object.sections[symtab.link].type != kStrtab) {
    return ObjectError(object, Status::Corruption("symbol table without a string table"));
  }
  for (const Section& section : object.sections) {
    if (section.type == kRelocations &&
        (section.info >= count || !IsContentType(object.sections[section.info].type) ||
         object.sections[section.info].type == kBss || section.link != object.symtab_index)) {
      return ObjectError(object, Status::Corruption("relocation section with a bad target"));
    }
  }
  return Status::OK();
}

std::vector<ReadRange> Linker::SymbolReads(size_t i) const {
  const InputObject& object = objects_[i];
  const Section& symtab = object.sections[object.symtab_index];
  const Section& strtab = object.sections[symtab.link];
  return {{symtab.offset, symtab.size}, {strtab.offset, strtab.size}};
}

Status Linker::LoadSymbols(size_t i, ObjectReader& reader) {
  InputObject& object = objects_[i];
  std::vector<ReadRange> reads = SymbolReads(i);
  std::vector<unsigned char> table(reads[0].length);
  Status st = reader.ReadAt(reads[0].offset, table.data(), table.size());
  if (!st.ok()) return ObjectError(object, st);
  object.strings.resize(reads[1].length);
  st = reader.ReadAt(reads[1].offset, object.strings.data(), object.strings.size());
  if (!st.ok()) return ObjectError(object, st);
  const uint64_t count = reads[0].length / kSymbolBytes;
  object.symbols.clear();
  object.symbols.reserve(count);
  for (uint64_t s = 0; s < count; ++s) {
    Symbol symbol = DecodeSymbol(table.data() + s * kSymbolBytes);
    if (uint64_t{symbol.name_offset} + symbol.name_length > object.strings.size()) {
      return ObjectError(object, Status::Corruption("symbol name outside the string table"));
    }
    if (symbol.section != kUndefinedSection &&
        (symbol.section >= object.sections.size() ||
         !IsContentType(object.sections[symbol.section].type) ||
         symbol.value > object.sections[symbol.section].size)) {
      return ObjectError(object, Status::Corruption("symbol in a bad section"));
    }
    object.symbols.push_back(symbol);
  }
  totals_.symbols += count;
  return Status::OK();
}

Status Linker::ResolveAndLayout() {
  // Global definitions, first come first listed (the image's symbol table order).
  for (uint32_t o = 0; o < objects_.size(); ++o) {
    const InputObject& object = objects_[o];
    for (uint32_t s = 1; s < object.symbols.size(); ++s) {
      const Symbol& symbol = object.symbols[s];
      if (symbol.binding != kGlobal || symbol.section == kUndefinedSection) continue;
      std::string name = object.strings.substr(symbol.name_offset, symbol.name_length);
      auto [it, inserted] = globals_.emplace(name, GlobalRef{o, s});
      if (!inserted) {
        return Status::FromErrno(EEXIST, object.name + ": multiple definition of `" + name +
                                             "'; first defined in " +
                                             objects_[it->second.object].name);
      }
      globals_in_order_.push_back(GlobalRef{o, s});
    }
  }
  totals_.globals = globals_in_order_.size();
  // Layout: input sections in input order inside each output section.
  uint64_t cursor[kOutputSections] = {};
  for (InputObject& object : objects_) {
    object.section_address.assign(object.sections.size(), 0);
    for (size_t s = 0; s < object.sections.size(); ++s) {
      const Section& section = object.sections[s];
      if (!IsContentType(section.type)) continue;
      uint64_t& c = cursor[section.type - kText];
      c = AlignUp(c, section.align);
      object.section_address[s] = c;  // relative for now
      c += section.size;
    }
  }
  uint64_t file_offset = kPage;
  for (int t = 0; t < kOutputSections; ++t) {
    totals_.section_size[t] = cursor[t];
    output_file_offset_[t] = t + kText == kBss ? 0 : file_offset;
    output_address_[t] = kImageBase + file_offset;
    file_offset = AlignUp(file_offset + cursor[t], kPage);
  }
  symbols_offset_ = AlignUp(output_file_offset_[kDebug - kText] + cursor[kDebug - kText], 16);
  for (InputObject& object : objects_) {
    for (size_t s = 0; s < object.sections.size(); ++s) {
      if (IsContentType(object.sections[s].type)) {
        object.section_address[s] += output_address_[object.sections[s].type - kText];
      }
    }
  }
  // Every symbol's address, undefined ones through the globals.
  for (InputObject& object : objects_) {
    object.symbol_address.assign(object.symbols.size(), 0);
    for (size_t s = 1; s < object.symbols.size(); ++s) {
      const Symbol& symbol = object.symbols[s];
      if (symbol.section != kUndefinedSection) {
        object.symbol_address[s] = object.section_address[symbol.section] + symbol.value;
        continue;
      }
      ++totals_.undefined_refs;
      std::string name = object.strings.substr(symbol.name_offset, symbol.name_length);
      auto it = globals_.find(name);
      if (it == globals_.end()) {
        if (!allow_undefined_) {
          return Status::FromErrno(ENOENT, object.name + ": undefined reference to `" + name + "'");
        }
        ++totals_.unresolved;
        continue;
      }
      const InputObject& definer = objects_[it->second.object];
      const Symbol& definition = definer.symbols[it->second.symbol];
      object.symbol_address[s] = definer.section_address[definition.section] + definition.value;
    }
  }
  return Status::OK();
}

Status Linker::WritePiece(const void* data, size_t n, uint64_t offset) {
  TIPFS_RETURN_IF_ERROR(PwriteFull(output_fd_, data, n, offset).WithContext(output_path_));
  // Pieces never overlap, so a sum of per-piece digests keyed by offset identifies the file's
  // contents whatever order the pieces were written in.
  totals_.output_digest += Mix64(HashBytes(data, n, offset));
  totals_.output_bytes = std::max(totals_.output_bytes, offset + n);
  return Status::OK();
}

Status Linker::BeginOutput(const std::string& output_path) {
  output_path_ = output_path;
  output_fd_ = ::open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (output_fd_ < 0) return ErrnoStatus("create " + output_path);
  unsigned char head[kPage] = {};
  std::memcpy(head, kImageMagic, 8);
  PutU32(head + 8, kOutputSections);
  PutU64(head + 16, symbols_offset_);
  PutU64(head + 24, globals_in_order_.size());
  for (int t = 0; t < kOutputSections; ++t) {
    unsigned char* entry = head + kImageHeaderBytes + t * kImageSectionBytes;
    PutU32(entry, static_cast<uint32_t>(t + kText));
    PutU64(entry + 8, output_address_[t]);
    PutU64(entry + 16, output_file_offset_[t]);
    PutU64(entry + 24, totals_.section_size[t]);
  }
  return WritePiece(head, sizeof head, 0);
}

std::vector<Linker::Pass2Step> Linker::Pass2Plan(size_t i) const {
  const InputObject& object = objects_[i];
  std::vector<Pass2Step> plan;
  for (uint32_t s = 0; s < object.sections.size(); ++s) {
    const Section& section = object.sections[s];
    if (!IsContentType(section.type) || section.type == kBss || section.size == 0) continue;
    Pass2Step step{s, {}};
    for (uint32_t r = 0; r < object.sections.size(); ++r) {
      const Section& rel = object.sections[r];
      if (rel.type == kRelocations && rel.info == s && rel.size > 0) {
        step.relocation_sections.push_back(r);
      }
    }
    plan.push_back(std::move(step));
  }
  return plan;
}

std::vector<ReadRange> Linker::Pass2Reads(size_t i) const {
  const InputObject& object = objects_[i];
  std::vector<ReadRange> reads;
  for (const Pass2Step& step : Pass2Plan(i)) {
    reads.push_back({object.sections[step.section].offset, object.sections[step.section].size});
    for (uint32_t r : step.relocation_sections) {
      reads.push_back({object.sections[r].offset, object.sections[r].size});
    }
  }
  return reads;
}

Status Linker::Relocate(const InputObject& object, uint32_t section, const Relocation& relocation,
                        unsigned char* contents) {
  const uint64_t size = object.sections[section].size;
  const uint64_t width = relocation.type == kAbs64 ? 8 : 4;
  if (relocation.symbol == 0 || relocation.symbol >= object.symbols.size() ||
      relocation.offset > size || size - relocation.offset < width) {
    return ObjectError(object, Status::Corruption("relocation out of range"));
  }
  const uint64_t s = object.symbol_address[relocation.symbol];
  const uint64_t a = static_cast<uint64_t>(relocation.addend);
  const uint64_t p = object.section_address[section] + relocation.offset;
  unsigned char* where = contents + relocation.offset;
  switch (relocation.type) {
    case kAbs64:
      PutU64(where, s + a);
      break;
    case kPc32:
      PutU32(where, static_cast<uint32_t>(s + a - p));
      break;
    case kAbs32:
      PutU32(where, static_cast<uint32_t>(s + a));
      break;
    default:
      return ObjectError(
          object, Status::Corruption("unknown relocation type " + std::to_string(relocation.type)));
  }
  return Status::OK();
}

Status Linker::LinkObject(size_t i, ObjectReader& reader) {
  const InputObject& object = objects_[i];
  for (const Pass2Step& step : Pass2Plan(i)) {
    const Section& section = object.sections[step.section];
    contents_.resize(section.size);
    Status st = reader.ReadAt(section.offset, contents_.data(), section.size);
    if (!st.ok()) return ObjectError(object, st);
    for (uint32_t r : step.relocation_sections) {
      const Section& rel = object.sections[r];
      relocations_.resize(rel.size);
      st = reader.ReadAt(rel.offset, relocations_.data(), rel.size);
      if (!st.ok()) return ObjectError(object, st);
      for (uint64_t e = 0; e < rel.entries; ++e) {
        Relocation relocation = DecodeRelocation(relocations_.data() + e * kRelocationBytes);
        TIPFS_RETURN_IF_ERROR(Relocate(object, step.section, relocation, contents_.data()));
      }
      totals_.relocations += rel.entries;
    }
    const int t = static_cast<int>(section.type - kText);
    uint64_t out_offset =
        output_file_offset_[t] + (object.section_address[step.section] - output_address_[t]);
    TIPFS_RETURN_IF_ERROR(WritePiece(contents_.data(), contents_.size(), out_offset));
  }
  return Status::OK();
}

Status Linker::FinishOutput() {
  std::vector<unsigned char> table;
  for (const GlobalRef& ref : globals_in_order_) {
    const InputObject& object = objects_[ref.object];
    const Symbol& symbol = object.symbols[ref.symbol];
    unsigned char entry[12];
    PutU64(entry, object.symbol_address[ref.symbol]);
    PutU32(entry + 8, symbol.name_length);
    table.insert(table.end(), entry, entry + sizeof entry);
    table.insert(table.end(), object.strings.begin() + symbol.name_offset,
                 object.strings.begin() + symbol.name_offset + symbol.name_length);
  }
  Status st = WritePiece(table.data(), table.size(), symbols_offset_);
  if (::close(output_fd_) != 0 && st.ok()) st = ErrnoStatus("close " + output_path_);
  output_fd_ = -1;
  return st;
}

}  // namespace tipfs::bench
