// The disk backend of tests/support/mount_fixture that makes test volumes out of namespaces of
// the test cluster; see rados_test_env.h.
#include <filesystem>

#include "stripe/disk_name.h"
#include "tests/rados/rados_test_env.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {

void InstallRadosDiskBackend() {
  DiskBackend backend;
  backend.rados = true;
  backend.unavailable = [] {
    std::string why = CephUnavailableReason();
    if (!why.empty() && CephRequired()) ADD_FAILURE() << why;
    return why;
  };
  backend.make = [](const std::string& root, int disks) {
    std::filesystem::create_directories(root + "/meta");
    std::vector<std::string> names;
    for (int i = 0; i < disks; ++i)
      names.push_back(RadosDiskName(FreshNamespace("d" + std::to_string(i))));
    return names;
  };
  backend.remove = [](const std::vector<std::string>& disks) {
    for (const std::string& disk : disks) {
      Result<stripe::DiskName> name = stripe::ParseDiskName(disk);
      if (name.ok()) EmptyNamespace(name->rados.nspace);
    }
  };
  backend.mkfs_args = "--meta {root}/meta";
  backend.mount_name = "{root}/meta";
  SetDiskBackend(std::move(backend));
}

}  // namespace tipfs::testing
