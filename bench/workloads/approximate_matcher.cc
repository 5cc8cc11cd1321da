#include "bench/workloads/approximate_matcher.h"

namespace tipfs::bench {

Result<ApproximateMatcher> ApproximateMatcher::Create(std::string_view pattern, int errors) {
  if (pattern.empty() || pattern.size() > 63) {
    return Status::InvalidArgument("pattern must be 1 to 63 bytes long");
  }
  if (errors < 0 || errors > 8) return Status::InvalidArgument("errors must be 0 to 8");
  return ApproximateMatcher(std::string(pattern), errors);
}

ApproximateMatcher::ApproximateMatcher(std::string pattern, int errors)
    : pattern_(std::move(pattern)),
      errors_(errors),
      accept_bit_(uint64_t{1} << (pattern_.size() - 1)) {
  for (size_t i = 0; i < pattern_.size(); ++i) {
    char_masks_[static_cast<unsigned char>(pattern_[i])] |= uint64_t{1} << i;
  }
}

bool ApproximateMatcher::Matches(std::string_view line) const {
  // R[d] holds bit i when pattern[0..i] matches a suffix of the text read so far with at most d
  // errors (Wu & Manber 1992, section 2, in the shift-and form). Before any text, the first d
  // pattern characters can be "deleted", hence the initial (1 << d) - 1.
  // For each text character c, with old = the previous R:
  //   R'[0] = ((R[0] << 1) | 1) & mask[c]
  //   R'[d] = (((R[d] << 1) | 1) & mask[c])   match
  //         | old[d-1]                        insertion (c is an extra text character)
  //         | ((old[d-1] << 1) | 1)           substitution
  //         | ((R'[d-1] << 1) | 1)            deletion (a pattern character is missing)
  uint64_t state[9];
  for (int d = 0; d <= errors_; ++d) state[d] = (uint64_t{1} << d) - 1;
  if (state[errors_] & accept_bit_) return true;  // pattern shorter than or equal to k
  for (unsigned char c : line) {
    const uint64_t mask = char_masks_[c];
    uint64_t previous_old = state[0];
    state[0] = ((state[0] << 1) | 1) & mask;
    for (int d = 1; d <= errors_; ++d) {
      const uint64_t old = state[d];
      state[d] =
          (((old << 1) | 1) & mask) | previous_old | (previous_old << 1) | (state[d - 1] << 1) | 1;
      previous_old = old;
    }
    if (state[errors_] & accept_bit_) return true;
  }
  return false;
}

}  // namespace tipfs::bench
