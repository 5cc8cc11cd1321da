// Seeded random hostile input for the hint ioctls and the control files (see hint_fuzz.h); the
// same harness runs under libFuzzer in clang builds (hint_ioctl_fuzzer.cc, scripts/fuzz.sh).
#include "tests/reliability/hint_fuzz.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace tipfs::testing {
namespace {

#ifndef TIPFS_FUZZ_INPUTS
#define TIPFS_FUZZ_INPUTS 3000  // the long run builds with 50000
#endif

TEST(HintFuzzTest, RandomIoctlsAndControlFileWritesNeverHurtTheDaemon) {
  // The metadata store's fsyncs (before a removed file's data goes) cost milliseconds each on a
  // disk and matter nothing here: keep it in memory when possible.
  if (std::getenv("TMPDIR") == nullptr && access("/dev/shm", W_OK) == 0) {
    setenv("TMPDIR", "/dev/shm", 0);
  }
  int failures = 0;
  HintFuzzer fuzzer([&](const std::string& what) {
    if (++failures <= 20) ADD_FAILURE() << what;
  });
  std::mt19937_64 rng(20260701);
  std::vector<uint8_t> input;
  for (int i = 0; i < TIPFS_FUZZ_INPUTS && failures == 0; ++i) {
    input.resize(rng() % 2048);
    for (uint8_t& b : input) b = static_cast<uint8_t>(rng());
    fuzzer.RunOne(input.data(), input.size());
    if (i % 100 == 99) fuzzer.CheckInvariants();
  }
  fuzzer.CheckInvariants();
  std::printf("%llu ioctls, %llu accepted\n", static_cast<unsigned long long>(fuzzer.calls()),
              static_cast<unsigned long long>(fuzzer.accepted()));
  // The inputs must reach past the first validation often enough to mean something.
  EXPECT_GT(fuzzer.accepted(), fuzzer.calls() / 20);
}

}  // namespace
}  // namespace tipfs::testing
