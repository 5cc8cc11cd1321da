#include "meta/meta_encoding.h"

#include <sys/stat.h>

#include <cstring>

namespace tipfs::meta::encoding {
namespace {

constexpr int64_t kNanosPerSecond = 1'000'000'000;

// Appends/reads fixed-width integers. Keys use big-endian (numeric sort order); values use
// little-endian (the host order on every platform tipfs targets, but written byte by byte so the
// format does not depend on it).
void PutBigEndian64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

template <typename T>
void PutLittle(std::string* out, T v) {
  auto u = static_cast<std::make_unsigned_t<T>>(v);
  for (size_t i = 0; i < sizeof(T); ++i) out->push_back(static_cast<char>(u >> (8 * i)));
}

// Reads values field by field; any read past the end marks the reader failed instead of reading.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  template <typename T>
  T Little() {
    std::make_unsigned_t<T> u = 0;
    if (bytes_.size() - pos_ < sizeof(T)) {
      failed_ = true;
      return 0;
    }
    for (size_t i = 0; i < sizeof(T); ++i) {
      u |= static_cast<std::make_unsigned_t<T>>(static_cast<uint8_t>(bytes_[pos_ + i])) << (8 * i);
    }
    pos_ += sizeof(T);
    return static_cast<T>(u);
  }

  std::string_view Bytes(size_t n) {
    if (bytes_.size() - pos_ < n) {
      failed_ = true;
      return {};
    }
    std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  // True when every read succeeded and every byte was consumed.
  bool Complete() const { return !failed_ && pos_ == bytes_.size(); }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
  bool failed_ = false;
};

void PutTime(std::string* out, const Time& t) {
  PutLittle<int64_t>(out, t.sec);
  PutLittle<uint32_t>(out, static_cast<uint32_t>(t.nsec));
}

Time ReadTime(Reader* r) {
  Time t;
  t.sec = r->Little<int64_t>();
  t.nsec = r->Little<uint32_t>();
  return t;
}

Status Damaged(std::string_view key, const std::string& what) {
  return Status::Corruption("metadata record " + DescribeKey(key) + " is damaged: " + what);
}

// Checks the leading version byte; on success returns the rest of the value.
Result<std::string_view> StripVersion(std::string_view key, std::string_view value) {
  if (value.empty()) return Damaged(key, "empty value");
  auto version = static_cast<uint8_t>(value[0]);
  if (version != kRecordVersion) {
    return Damaged(key, "unknown record version " + std::to_string(version));
  }
  return value.substr(1);
}

std::string TaggedIno(char tag, Ino ino) {
  std::string key(1, tag);
  PutBigEndian64(&key, ino);
  return key;
}

}  // namespace

bool IsValidFileType(uint32_t type) {
  switch (type) {
    case S_IFREG:
    case S_IFDIR:
    case S_IFLNK:
    case S_IFIFO:
    case S_IFSOCK:
    case S_IFCHR:
    case S_IFBLK:
      return true;
    default:
      return false;
  }
}

std::string SuperblockKey() { return std::string(1, kSuperblockTag); }
std::string InodeKey(Ino ino) { return TaggedIno(kInodeTag, ino); }
std::string SymlinkKey(Ino ino) { return TaggedIno(kSymlinkTag, ino); }
std::string OrphanKey(Ino ino) { return TaggedIno(kOrphanTag, ino); }
std::string DirEntryPrefix(Ino parent) { return TaggedIno(kDirEntryTag, parent); }
std::string XattrPrefix(Ino ino) { return TaggedIno(kXattrTag, ino); }

std::string DirEntryKey(Ino parent, std::string_view name) {
  std::string key = DirEntryPrefix(parent);
  key.append(name);
  return key;
}

std::string XattrKey(Ino ino, std::string_view name) {
  std::string key = XattrPrefix(ino);
  key.append(name);
  return key;
}

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  // Increment the last byte that is not 0xff, dropping the 0xff bytes after it.
  while (!end.empty() && static_cast<uint8_t>(end.back()) == 0xff) end.pop_back();
  if (!end.empty()) end.back() = static_cast<char>(static_cast<uint8_t>(end.back()) + 1);
  return end;
}

Ino KeyIno(std::string_view key, size_t offset) {
  Ino v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(key[offset + i]);
  return v;
}

std::string DescribeKey(std::string_view key) {
  if (key.empty()) return "<empty key>";
  std::string out(1, key[0]);
  if (key.size() >= 9) {
    out += "/" + std::to_string(KeyIno(key));
    if (key.size() > 9) {
      out += "/\"";
      for (char c : key.substr(9)) {
        auto u = static_cast<uint8_t>(c);
        if (u >= 0x20 && u < 0x7f && c != '"' && c != '\\') {
          out.push_back(c);
        } else {
          static const char kHex[] = "0123456789abcdef";
          out += "\\x";
          out.push_back(kHex[u >> 4]);
          out.push_back(kHex[u & 15]);
        }
      }
      out += "\"";
    }
  } else if (key.size() > 1) {
    out += "/<" + std::to_string(key.size() - 1) + " bytes>";
  }
  return out;
}

std::string EncodeSuperblock(const Superblock& sb) {
  std::string out(1, static_cast<char>(kRecordVersion));
  PutLittle<uint32_t>(&out, sb.format_version);
  PutLittle<uint64_t>(&out, sb.next_ino);
  PutLittle<uint64_t>(&out, sb.inode_count);
  PutLittle<uint32_t>(&out, static_cast<uint32_t>(sb.volume_uuid.size()));
  out.append(sb.volume_uuid);
  return out;
}

Result<Superblock> DecodeSuperblock(std::string_view value) {
  const std::string key = SuperblockKey();
  auto body = StripVersion(key, value);
  if (!body.ok()) return body.status();
  Reader r(*body);
  Superblock sb;
  sb.format_version = r.Little<uint32_t>();
  sb.next_ino = r.Little<uint64_t>();
  sb.inode_count = r.Little<uint64_t>();
  auto uuid_size = r.Little<uint32_t>();
  sb.volume_uuid = std::string(r.Bytes(uuid_size));
  if (!r.Complete()) return Damaged(key, "wrong length " + std::to_string(value.size()));
  if (sb.next_ino <= kRootIno)
    return Damaged(key, "next inode number " + std::to_string(sb.next_ino));
  return sb;
}

std::string EncodeInode(const Inode& inode) {
  std::string out(1, static_cast<char>(kRecordVersion));
  PutLittle<uint32_t>(&out, inode.mode);
  PutLittle<uint32_t>(&out, inode.uid);
  PutLittle<uint32_t>(&out, inode.gid);
  PutLittle<uint32_t>(&out, inode.nlink);
  PutLittle<uint64_t>(&out, inode.size);
  PutLittle<uint64_t>(&out, inode.rdev);
  PutLittle<uint64_t>(&out, inode.parent);
  PutTime(&out, inode.atime);
  PutTime(&out, inode.mtime);
  PutTime(&out, inode.ctime);
  return out;
}

Result<Inode> DecodeInode(std::string_view key, Ino ino, std::string_view value) {
  auto body = StripVersion(key, value);
  if (!body.ok()) return body.status();
  Reader r(*body);
  Inode inode;
  inode.ino = ino;
  inode.mode = r.Little<uint32_t>();
  inode.uid = r.Little<uint32_t>();
  inode.gid = r.Little<uint32_t>();
  inode.nlink = r.Little<uint32_t>();
  inode.size = r.Little<uint64_t>();
  inode.rdev = r.Little<uint64_t>();
  inode.parent = r.Little<uint64_t>();
  inode.atime = ReadTime(&r);
  inode.mtime = ReadTime(&r);
  inode.ctime = ReadTime(&r);
  if (!r.Complete()) return Damaged(key, "wrong length " + std::to_string(value.size()));
  if (!IsValidFileType(inode.mode & S_IFMT)) {
    return Damaged(key, "invalid file type in mode " + std::to_string(inode.mode));
  }
  for (const Time* t : {&inode.atime, &inode.mtime, &inode.ctime}) {
    if (t->nsec < 0 || t->nsec >= kNanosPerSecond) return Damaged(key, "invalid nanoseconds");
  }
  if (S_ISDIR(inode.mode) && inode.parent == 0) return Damaged(key, "directory without parent");
  return inode;
}

std::string EncodeDirEntry(Ino child, uint32_t type) {
  std::string out(1, static_cast<char>(kRecordVersion));
  PutLittle<uint64_t>(&out, child);
  PutLittle<uint32_t>(&out, type);
  return out;
}

Result<DirEntry> DecodeDirEntry(std::string_view key, std::string_view name,
                                std::string_view value) {
  auto body = StripVersion(key, value);
  if (!body.ok()) return body.status();
  Reader r(*body);
  DirEntry entry;
  entry.name = std::string(name);
  entry.ino = r.Little<uint64_t>();
  entry.type = r.Little<uint32_t>();
  if (!r.Complete()) return Damaged(key, "wrong length " + std::to_string(value.size()));
  if (entry.ino == 0) return Damaged(key, "inode number 0");
  if (!IsValidFileType(entry.type)) {
    return Damaged(key, "invalid file type " + std::to_string(entry.type));
  }
  return entry;
}

std::string EncodeBlob(std::string_view bytes) {
  std::string out(1, static_cast<char>(kRecordVersion));
  out.append(bytes);
  return out;
}

Result<std::string> DecodeBlob(std::string_view key, std::string_view value) {
  auto body = StripVersion(key, value);
  if (!body.ok()) return body.status();
  return std::string(*body);
}

}  // namespace tipfs::meta::encoding
