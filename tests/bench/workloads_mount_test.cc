// The workloads on a real tipfs mount (label "integration"): the manual variants' hints must
// be accepted by the daemon exactly as encoded (no refusal, no drop, every byte read hinted), and
// the output must stay byte-identical to the original's. Skips where FUSE is unavailable.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/bench/test_support.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::bench {
namespace {

using testing::FieldOf;
using testing::ProgramResult;
using testing::RunProgram;

const std::string kGen = TIPFS_BENCH_GEN;

class WorkloadsOnMountTest : public tipfs::testing::MountedTest {
 protected:
  tipfs::testing::VolumeSpec Spec() const override {
    tipfs::testing::VolumeSpec spec;
    spec.mount_args = "--cache-size 12M --data-cache direct";
    return spec;
  }

  void Generate(std::vector<std::string> args) {
    args.insert(args.begin(), kGen);
    ProgramResult r = RunProgram(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  // Runs both variants; returns the manual run's stderr report line after checking the outputs.
  std::string RunVariants(std::vector<std::string> argv) {
    std::vector<std::string> original = argv, manual = argv;
    original.insert(original.begin() + 1, {"--variant", "original"});
    manual.insert(manual.begin() + 1, {"--variant", "manual"});
    ProgramResult a = RunProgram(original);
    ProgramResult b = RunProgram(manual);
    EXPECT_EQ(a.exit_code, 0) << a.err;
    EXPECT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(a.out, b.out) << "variants disagree on the mount";
    EXPECT_EQ(b.err.find("warning"), std::string::npos) << b.err;
    EXPECT_EQ(FieldOf(b.err, "hints"), "on") << b.err;
    EXPECT_EQ(FieldOf(b.err, "refused"), "0") << b.err;
    EXPECT_EQ(FieldOf(b.err, "dropped"), "0") << b.err;
    EXPECT_NE(FieldOf(b.err, "hint_calls"), "0") << b.err;
    return b.err;
  }
};

TEST_F(WorkloadsOnMountTest, ManualHintsAreAcceptedAndCoverEveryRead) {
  const std::string root = mount_->mountpoint();
  Generate({"agrep", "--dir", root, "--files", "40", "--total", "300K"});
  Generate({"gnuld", "--dir", root, "--objects", "10", "--total", "1M"});
  Generate({"xdataslice", "--dir", root, "--dim", "32", "--brick", "8"});
  Generate({"loader", "--dir", root, "--samples", "40", "--total", "300K"});

  std::string agrep = RunVariants({TIPFS_BENCH_AGREP, "-p", "CGXJER22GH", Path("text")});
  EXPECT_EQ(FieldOf(agrep, "hinted_bytes"), FieldOf(agrep, "bytes_read"));

  std::string gnuld =
      RunVariants({TIPFS_BENCH_GNULD, "-o", mount_->native() + "/image.texe", Path("objects")});
  EXPECT_EQ(FieldOf(gnuld, "hinted_bytes"), FieldOf(gnuld, "bytes_read"));

  // Everything but the volume header (read before any slice is planned) is hinted.
  std::string slices = RunVariants({TIPFS_BENCH_XDATASLICE, "--slices", "4", Path("volume.tvol")});
  EXPECT_EQ(std::stoull(FieldOf(slices, "hinted_bytes")) + 4096,
            std::stoull(FieldOf(slices, "bytes_read")));

  std::string loader = RunVariants({TIPFS_BENCH_LOADER, "--epochs", "2", Path("samples")});
  EXPECT_EQ(FieldOf(loader, "hinted_bytes"), FieldOf(loader, "bytes_read"));
}

}  // namespace
}  // namespace tipfs::bench
