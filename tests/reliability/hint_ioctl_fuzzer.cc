// libFuzzer entry for the hint ioctl / control file harness (hint_fuzz.h). Built only in clang
// builds configured with -DTIPFS_FUZZ=ON (scripts/fuzz.sh); a broken invariant aborts, so
// libFuzzer keeps the input that broke it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/reliability/hint_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tipfs::testing::HintFuzzer* fuzzer =
      new tipfs::testing::HintFuzzer([](const std::string& what) {
        std::fprintf(stderr, "invariant broken: %s\n", what.c_str());
        std::abort();
      });
  static uint64_t inputs = 0;
  fuzzer->RunOne(data, size);
  if (++inputs % 64 == 0) fuzzer->CheckInvariants();
  return 0;
}
