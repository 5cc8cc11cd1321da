// The fixture of the libtipspec tests on a real tipfs mount (label integration; skipped without
// /dev/fuse): a 4-disk volume with a 12 MiB cache in kernel data-cache mode, cold remounts, runs of
// a program with and without `tipfs run` (in lockstep, forking at every read, so the child runs
// ahead of the program on data nobody has read yet), and the mount's counters.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/speculate/spec_test_support.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::spec::testing {

using tipfs::testing::MountCounter;
using tipfs::testing::MountedTest;
using tipfs::testing::TipfsBinary;
using tipfs::testing::VolumeSpec;
using Environment = std::vector<std::pair<std::string, std::string>>;

inline bool HaveProgram(const std::string& name) {
  return system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

class SpecMountTest : public MountedTest {
 protected:
  VolumeSpec Spec() const override {
    VolumeSpec spec;
    spec.mount_args = "--cache-size 12M --data-cache " + DataCache() + " " + MoreMountArgs();
    return spec;
  }
  virtual std::string DataCache() const { return "kernel"; }
  virtual std::string MoreMountArgs() const { return ""; }

  // Unmount and mount again: an empty daemon cache and no page cache of the mount.
  void Remount() {
    ASSERT_EQ(mount_->Unmount(), "");
    ASSERT_EQ(mount_->Mount(), "");
  }

  // Runs argv (cwd: the mount root) cold, plainly; then cold again under `tipfs run`, in
  // lockstep, forking at every read, waiting for no data, without history. Compares stdout (or the
  // file `output`), expects speculation to have run (children forked, and unless
  // require_hints_consumed_ is false, a hinted block used), returns the speculated run's stdout.
  std::string ExpectSameOutput(const std::vector<std::string>& argv, const std::string& output = "",
                               const Environment& extra = {}) {
    Remount();
    RunResult plain = scratch_.Run(argv, false, mount_->mountpoint());
    EXPECT_EQ(plain.exit_status, 0) << argv[0] << ": " << plain.out.substr(0, 500);
    if (!output.empty()) plain.out = ReadFile(output);
    EXPECT_FALSE(plain.out.empty()) << argv[0];
    if (!output.empty()) unlink(output.c_str());
    scratch_.ClearLogs();
    Remount();
    RunResult speculated = RunSpeculated(argv, extra);
    if (!output.empty()) speculated.out = ReadFile(output);
    EXPECT_EQ(speculated.exit_status, 0) << argv[0];
    EXPECT_TRUE(speculated.out == plain.out) << argv[0] << ": outputs differ";
    auto stats = scratch_.Stats();
    EXPECT_GE(stats["forks"], 1u) << argv[0];
    if (require_hints_consumed_) {
      EXPECT_GE(stats["hints_consumed"], 1u) << argv[0] << " was not speculated on; libtipspec's "
                                             << "counters:\n"
                                             << ReadFile(scratch_.stats_file());
    }
    return speculated.out;
  }

  // `run_options`: more options of `tipfs run`.
  RunResult RunSpeculated(const std::vector<std::string>& argv, const Environment& extra = {},
                          const std::vector<std::string>& run_options = {}) {
    std::vector<std::string> command = {TipfsBinary(), "run"};
    command.insert(command.end(), run_options.begin(), run_options.end());
    if (!watch_every_mount_) command.insert(command.end(), {"--mount", mount_->mountpoint()});
    command.insert(command.end(), {"--stats-file", scratch_.stats_file(), "--"});
    command.insert(command.end(), argv.begin(), argv.end());
    // No hints from an earlier run of the same command: these tests count speculation's
    // (spec_history_test turns history on).
    Environment environment = {{"TIPSPEC_LIBRARY", TIPSPEC_LIBRARY_PATH},
                               {"TIPSPEC_LOCKSTEP", "1"},
                               {"TIPSPEC_STALL_USEC", "0"},
                               {"TIPSPEC_WAIT", "0"},
                               {"TIPSPEC_HISTORY", "0"}};
    environment.insert(environment.end(), extra.begin(), extra.end());
    return scratch_.Run(command, false, mount_->mountpoint(), environment);
  }

  // `program` and `count` text files under the mount, `name`0.. (file i: size + i * step bytes of
  // the text of seed + i), as its arguments.
  std::vector<std::string> ProgramOverTextFiles(const std::string& program, const std::string& name,
                                                int count, int seed, size_t size, size_t step) {
    std::vector<std::string> argv = {program};
    for (int i = 0; i < count; ++i) {
      argv.push_back(Path(name + std::to_string(i)));
      WriteFile(argv.back(), MakeText(seed + i, size + step * static_cast<size_t>(i)));
    }
    return argv;
  }

  // A tree of text files of assorted sizes under the mount.
  void MakeTree(const std::string& relative, int dirs, int files_per_dir) {
    for (int d = 0; d < dirs; ++d) {
      std::string dir = Path(relative + "/dir" + std::to_string(d));
      std::filesystem::create_directories(dir);
      for (int f = 0; f < files_per_dir; ++f) {
        WriteFile(dir + "/file" + std::to_string(f) + ".txt",
                  MakeText(d * 100 + f, 3000 + 9000 * ((d * 7 + f) % 11)));
      }
    }
  }

  std::vector<std::string> FilesUnder(const std::string& relative) {
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(Path(relative))) {
      if (entry.is_regular_file()) files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    return files;
  }

  SpecScratch scratch_;
  // RunSpeculated without --mount: libtipspec watches every fuse.tipfs mount.
  bool watch_every_mount_ = false;
  // ExpectSameOutput asks that the program used at least one hinted block.
  bool require_hints_consumed_ = true;
};

// Emulated disks (hdd): each of the program's reads of a cold file takes milliseconds, and the
// child (in lockstep one logged read ahead, and otherwise free) reads the next file meanwhile.
class SpecMountSlowDisksTest : public SpecMountTest {
 protected:
  std::string MoreMountArgs() const override { return "--disk-model hdd"; }
};

}  // namespace tipfs::spec::testing
