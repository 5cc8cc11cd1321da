// Hazard 2 on any directory: hazard_side_effects (a hostile program whose run-ahead path tries
// one forbidden action before the program does the same once) run with and without libtipspec
// for every action, comparing the work directory, the signals this process received and the
// socket traffic it saw. spec_hazard_test runs it on a plain directory (hints to a log file),
// spec_mount_test on a tipfs mount. The test executable defines HAZARD_SIDE_EFFECTS.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tests/speculate/spec_test_support.h"

namespace tipfs::spec::testing {

// `input`: a file the program reads (on the watched tree or mount); `work_root`: where the
// per-run work directories go (work-plain, work-speculated); `environment`: added to the
// speculated runs (SpecScratch::Run). Reports failures through gtest.
void ExpectNoSideEffects(const SpecScratch& scratch, const std::string& input,
                         const std::string& work_root,
                         const std::vector<std::pair<std::string, std::string>>& environment);

}  // namespace tipfs::spec::testing
