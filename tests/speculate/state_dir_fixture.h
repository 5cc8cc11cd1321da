// A fixture for the tests of what libtipspec keeps between runs (learned sites, recordings): the
// state directory (TIPSPEC_STATE_DIR) is a fresh scratch directory, removed afterwards, so these
// tests never touch the user's ~/.local/state.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace tipfs::spec::testing {

class StateDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/tipspec-state-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    setenv("TIPSPEC_STATE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("TIPSPEC_STATE_DIR");
    std::filesystem::remove_all(dir_);
  }
  std::string dir_;
};

}  // namespace tipfs::spec::testing
