// Approximate string matching with k errors (Levenshtein: substitution, insertion and deletion
// cost one each) by the bit-parallel algorithm of Wu & Manber ("Fast text searching allowing
// errors", CACM 35(10), 1992) that agrep is built on. A line matches when some substring of it is
// within k edits of the pattern, the same rule as `agrep -k` and `tre-agrep -k`.
// Immutable after construction; Matches() may be called from several threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace tipfs::bench {

class ApproximateMatcher {
 public:
  // The pattern: 1..63 bytes, matched literally (byte for byte). errors: 0..8.
  static Result<ApproximateMatcher> Create(std::string_view pattern, int errors);

  // True when `line` (without its newline) contains a match with at most errors() edits.
  bool Matches(std::string_view line) const;

  int errors() const { return errors_; }
  const std::string& pattern() const { return pattern_; }

 private:
  ApproximateMatcher(std::string pattern, int errors);

  std::string pattern_;
  int errors_;
  uint64_t accept_bit_;            // bit m-1: the whole pattern matched
  uint64_t char_masks_[256] = {};  // bit i set when pattern[i] == c (shift-and)
};

}  // namespace tipfs::bench
