// Linked into a test binary, makes every volume of tests/support/mount_fixture live on
// namespaces of the test cluster (the same tests then run over RADOS disks).
#include "tests/rados/rados_test_env.h"

namespace {
const bool installed = (tipfs::testing::InstallRadosDiskBackend(), true);
}  // namespace
