// ReadPredictor: what a speculating child reads in place of data it did not get, at a read site
// learned to be data-critical (docs/DESIGN.md "Predicted reads"). A program that parses each file
// it reads (a JSON loader, a record parser) takes its error path on zeros, and a child that waits
// there instead runs in lockstep with the program; but the next file of such a loop is read by the
// same code as the last one, so bytes an earlier read at that site returned have the shape the
// parser wants. The child keeps a few real reads per site and answers a read without data with the
// longest of them that fits, padded to the read's length (newlines after text, which JSON and
// line formats skip; zeros after binary). It then parses on, opens the next file and hints it. The
// hints are tainted (made on predicted data), so the mount caps and discounts them as any other.
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

  // Keeps the first `length` bytes (at most kMaxBytes) that a read at `site` returned into `iov`;
  // `whole`: they are a whole file (read from its start to its end). The site's oldest read makes
  // room, except its shortest (the one that fits most reads).
  void Remember(uint64_t site, const struct iovec* iov, int iov_count, size_t length,
                bool whole = false);
  // True when some read at `site` is kept.
  bool Keeps(uint64_t site) const { return IndexOf(site) >= 0; }
  // True when a read kept at `site` is no longer than `length` (and `length` > 0).
  bool CanFill(uint64_t site, size_t length) const;
  // Writes `length` bytes into `iov` (the caller checked that they hold that many): the longest
  // read kept at `site` no longer than `length`, then padding. False, writing nothing, when none
  // fits.
  bool Fill(uint64_t site, const struct iovec* iov, int iov_count, size_t length) const;
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
    uint64_t age;     // when it was remembered (the predictor's counter)
    char bytes[kMaxBytes];
  };
  struct Site {
    uint64_t key;  // 0: unused
    uint64_t age;
    Kept reads[kReadsPerSite];
  };
  int IndexOf(uint64_t site) const;  // -1: not kept
  const Kept* Best(const Site& s, size_t length) const;
  const Kept* BestWhole(uint64_t site, size_t capacity) const;

  Site sites_[kSites] = {};
  uint64_t clock_ = 0;
};

}  // namespace tipfs::spec
