#include "tests/support/loop_ext4.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"

namespace tipfs::testing {

LoopExt4::~LoopExt4() {
  if (before_unmount) before_unmount();
  if (mounted_ && RunCommand("umount " + ShellQuote(dir_)) != 0) {
    // Still busy: detach now; the auto-clearing loop device goes when the last user lets go.
    RunCommand("umount -l " + ShellQuote(dir_));
  }
  if (!image_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(image_dir_, ignored);
  }
}

std::string LoopExt4::Mount(const std::string& dir, const std::string& size) {
  if (geteuid() != 0) return "needs root for loop devices";
  if (RunCommand("command -v losetup && command -v mkfs.ext4") != 0) {
    return "losetup or mkfs.ext4 missing";
  }
  char pattern[] = "/tmp/tipfs-loop-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return "mkdtemp failed";
  image_dir_ = pattern;
  image_ = image_dir_ + "/disk.img";
  dir_ = dir;
  std::string output;
  if (RunCommand("truncate -s " + size + " " + image_ + " && mkfs.ext4 -q -F -b 4096 " + image_,
                 &output) != 0) {
    return "mkfs.ext4 failed: " + output;
  }
  // `mount -o loop` sets the loop device up with auto-clear: unmounting detaches it.
  if (RunCommand("mount -o loop " + image_ + " " + ShellQuote(dir), &output) != 0) {
    return "mount -o loop failed: " + output;
  }
  mounted_ = true;
  if (RunCommand("losetup -j " + image_ + " | cut -d: -f1", &output) != 0 || output.empty()) {
    return "no loop device for " + image_;
  }
  device_ = output.substr(0, output.find('\n'));
  rmdir((dir + "/lost+found").c_str());
  return "";
}

std::string LoopExt4::Shrink(const std::string& size) {
  std::string output;
  if (RunCommand("truncate -s " + size + " " + image_ + " && losetup -c " + device_, &output) !=
      0) {
    return "shrinking " + device_ + " failed: " + output;
  }
  return "";
}

}  // namespace tipfs::testing
