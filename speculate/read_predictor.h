// ReadPredictor: what a speculating child reads in place of data it did not get, at a read site
// learned to be data-critical (docs/DESIGN.md "Predicted reads"). A program that parses each file
// it reads (a JSON loader, a record parser) takes its error path on zeros, and a child that waits
// there instead runs in lockstep with the program; but the next file of such a loop is read by the
// same code as the last one, so bytes an earlier read at that site returned have the shape the
// parser wants. The child keeps a few real reads per site and answers a read without data with the
// longest of them that fits, padded to the read's length: with newlines after text, which JSON and
// line formats skip; binary is repeated (tiled), so a table of fixed-size records stays a table of
// the kept records (a linker's relocations name a symbol and an offset a smaller object has too;
// zero entries name symbol 0, which it rejects). A read is answered only with a kept read of the
// same ordinal: the n-th read of a file at that site (n capped at kOrdinals - 1), since one site
// can read several kinds of table in turn (a linker's relocations for .text, .data and .debug),
// and another kind's records point out of range. It then parses on, opens the next file and hints
// it. The hints are tainted (made on predicted data), so the mount caps and discounts them as any
// other.
// A read of a whole file (from its start to its end, as loaders read a sample) can instead get a
// whole other file read there, at its own length (FillWhole): padding would make a format whose
// header gives the length of what follows disagree with the bytes returned, while another whole
// file is self-consistent (its header, its payload, its digest) and ends where its header says.
//
// Fixed-size and allocation-free: used from the child's SIGSYS handler only (async-signal-safe).
// Not thread-safe (the child has one thread).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

namespace tipfs::spec {

class ReadPredictor {
 public:
  static constexpr int kSites = 4;         // sites kept, the least recently remembered replaced
  static constexpr int kReadsPerSite = 8;  // real reads kept per site
  static constexpr size_t kMaxBytes = 64 << 10;  // of each read, its first bytes only
  static constexpr uint32_t kOrdinals = 4;       // ordinals told apart: 0, 1, 2, and 3 or later
  // A read whose ordinal is not known (through a description the program had open at the fork:
  // its reads before are not counted): kept only as a whole file, answered by none.
  static constexpr uint32_t kUnknownOrdinal = UINT32_MAX;

  // Keeps the first `length` bytes (at most kMaxBytes) that a read at `site` returned into `iov`;
  // `ordinal`: how many reads of the same file at `site` came before it; `whole`: they are a whole
  // file (read from its start to its end). The site's oldest read makes room, except the shortest
  // of each ordinal (the one that fits most reads).
  // `file_size`: the size of the file read.
  void Remember(uint64_t site, uint32_t ordinal, uint64_t file_size, const struct iovec* iov,
                int iov_count, size_t length, bool whole = false);
  // True when some read at `site` is kept.
  bool Keeps(uint64_t site) const { return IndexOf(site) >= 0; }
  // True when a read of `ordinal` kept at `site`, of a file no larger than `file_size`, is no
  // longer than `length` (and `length` > 0).
  bool CanFill(uint64_t site, uint32_t ordinal, uint64_t file_size, size_t length) const;
  // Writes `length` bytes into `iov` (the caller checked that they hold that many): the longest
  // read of `ordinal` kept at `site` no longer than `length`, of a file no larger than
  // `file_size` (a smaller object's relocations name fewer symbols), then newlines after text, or
  // the kept bytes again and again after binary (zeros after a read kept in part: its records' size
  // is unknown). False, writing nothing, when none fits.
  bool Fill(uint64_t site, uint32_t ordinal, uint64_t file_size, const struct iovec* iov,
            int iov_count, size_t length) const;
  // The length of the longest whole file kept at `site` that is shorter than `capacity` (so that
  // a read of `capacity` bytes returning it shows the end of the file), or 0 when none is.
  size_t WholeFits(uint64_t site, size_t capacity) const;
  // Writes that file into `iov` (the caller checked that they hold `capacity` bytes) and returns
  // its length; 0, writing nothing, when none fits.
  size_t FillWhole(uint64_t site, const struct iovec* iov, int iov_count, size_t capacity) const;

 private:
  struct Kept {
    uint32_t length;  // 0: unused
    bool text;        // no NUL byte: padded with newlines, else zeros
    bool whole;       // a whole file, all of it kept
    bool cut;         // only its first kMaxBytes kept
    uint8_t ordinal;  // capped at kOrdinals - 1; kOrdinals: not known
    uint64_t age;     // when it was remembered (the predictor's counter)
    uint64_t file_size;
    char bytes[kMaxBytes];
  };
  struct Site {
    uint64_t key;  // 0: unused
    uint64_t age;
    Kept reads[kReadsPerSite];
  };
  int IndexOf(uint64_t site) const;  // -1: not kept
  const Kept* Best(const Site& s, uint32_t ordinal, uint64_t file_size, size_t length) const;
  const Kept* BestWhole(uint64_t site, size_t capacity) const;

  Site sites_[kSites] = {};
  uint64_t clock_ = 0;
};

}  // namespace tipfs::spec
