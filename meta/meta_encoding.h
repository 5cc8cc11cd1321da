// Keys and record encodings of the metadata store (the schema is documented in meta_store.h).
//
// Keys: one tag byte, then big-endian integers (so RocksDB's bytewise order is numeric order and
// all entries of one directory are adjacent, sorted by name), then the raw name where there is one.
// Values: a record-version byte first, then fixed-width little-endian fields. Every decoder checks
// the version, the exact length and the field ranges it can check, and reports a damaged record
// as a Corruption (EUCLEAN) status that names the key; nothing here aborts on bad bytes.
// Pure functions, no state: safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "meta/meta_store.h"
#include "util/status.h"

namespace tipfs::meta::encoding {

// Key tags (the first byte of every key).
constexpr char kSuperblockTag = 'S';
constexpr char kInodeTag = 'I';
constexpr char kDirEntryTag = 'D';
constexpr char kSymlinkTag = 'L';
constexpr char kXattrTag = 'X';
constexpr char kOrphanTag = 'O';

// The on-disk layout version kept in the superblock; a store with another one is refused.
constexpr uint32_t kFormatVersion = 1;
// The version byte that opens every record written by this code.
constexpr uint8_t kRecordVersion = 1;

struct Superblock {
  uint32_t format_version = kFormatVersion;
  std::string volume_uuid;
  Ino next_ino = kRootIno + 1;  // the next inode number to hand out; never decreases
  uint64_t inode_count = 0;     // live inodes, orphans included
};

std::string SuperblockKey();
std::string InodeKey(Ino ino);
std::string DirEntryKey(Ino parent, std::string_view name);
// The common prefix of all entries of `parent` (D + parent).
std::string DirEntryPrefix(Ino parent);
std::string SymlinkKey(Ino ino);
std::string XattrKey(Ino ino, std::string_view name);
std::string XattrPrefix(Ino ino);
std::string OrphanKey(Ino ino);
// The first key after every key that starts with `prefix` (an exclusive upper bound).
std::string PrefixEnd(std::string_view prefix);

// Reads the big-endian integer at `offset` of a key (REQUIRES: key.size() >= offset + 8).
Ino KeyIno(std::string_view key, size_t offset = 1);

// A printable form of a key for error messages: "I/42", "D/1/\"name\"".
std::string DescribeKey(std::string_view key);

std::string EncodeSuperblock(const Superblock& sb);
Result<Superblock> DecodeSuperblock(std::string_view value);

std::string EncodeInode(const Inode& inode);
// `ino` comes from the key (it is not stored twice).
Result<Inode> DecodeInode(std::string_view key, Ino ino, std::string_view value);

std::string EncodeDirEntry(Ino child, uint32_t type);
Result<DirEntry> DecodeDirEntry(std::string_view key, std::string_view name,
                                std::string_view value);

// Symlink targets, xattr values and orphan marks: the version byte then the raw bytes.
std::string EncodeBlob(std::string_view bytes);
Result<std::string> DecodeBlob(std::string_view key, std::string_view value);

// True for the S_IFMT values a tipfs inode may have.
bool IsValidFileType(uint32_t type);

}  // namespace tipfs::meta::encoding
