// HintFuzzer: hostile input for the hint ioctls (fusefs::HintIoctls::Handle) and the control
// files under `.tipfs/`, in process, over a whole file system without a mount (VolumeRig). One
// input is a byte string read as a program: ioctls with chosen or random commands, sizes,
// headers, segments, path records, callers and target inodes, mixed with the reads, writes,
// truncations and removals that race hints in real use, and control-file reads and writes.
// Shared by the seeded random gtest (always built) and the libFuzzer target (clang builds with
// TIPFS_FUZZ=ON).
//
// Checked after every input (a failure is reported through the `fail` callback):
//   - every refusal carries one of the errnos tipfs_hint(3) documents;
//   - outstanding hinted bytes stay within the global cap, and the daemon's memory growth is
//     bounded;
//   - no block of a file the callers may not read is ever cached (hints by path are refused
//     with EACCES and fetch nothing). Descriptor-based hints are only issued on files the caller
//     could have opened, as the kernel guarantees.
// Not thread-safe: one input at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tipfs::testing {

class HintFuzzer {
 public:
  // `fail` receives a description of each broken invariant.
  explicit HintFuzzer(std::function<void(const std::string&)> fail);
  ~HintFuzzer();

  void RunOne(const uint8_t* data, size_t size);
  // Checks the invariants that hold across inputs (caps, secrets, memory).
  void CheckInvariants();

  uint64_t calls() const;
  uint64_t accepted() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tipfs::testing
