// LoopExt4: a small ext4 file system on a loop device, mounted on a directory, for tests that
// need a backing disk that really fails (shrink the device under it: reads and write-back of
// blocks past the new end fail with EIO in the block layer) or that has a real device name
// (ext4's sysfs knobs). Unmounted, detached (the loop device auto-clears) and deleted when it goes
// away. Needs root, losetup and mkfs.ext4; Mount says why not otherwise, for GTEST_SKIP.
//
// Not thread-safe; one object per file system.
#pragma once

#include <functional>
#include <string>

namespace tipfs::testing {

class LoopExt4 {
 public:
  LoopExt4() = default;
  ~LoopExt4();
  LoopExt4(const LoopExt4&) = delete;
  LoopExt4& operator=(const LoopExt4&) = delete;

  // Runs first when the object goes away: whatever still uses the file system (a tipfs daemon
  // holding objects open) must let go before it can be unmounted.
  std::function<void()> before_unmount;

  // Makes an image of `size` ("64M") in its own temporary directory, formats it (4 KiB blocks),
  // mounts it on `dir` and removes lost+found (tipfs mkfs wants an empty directory). Returns ""
  // when mounted, else why it cannot be done here.
  std::string Mount(const std::string& dir, const std::string& size);

  // Cuts the image and the device down to `size`: every block past it fails with EIO from now on.
  // Returns "" or what went wrong.
  std::string Shrink(const std::string& size);

  const std::string& device() const { return device_; }  // "/dev/loopN"
  const std::string& image() const { return image_; }

 private:
  std::string image_dir_, image_, dir_, device_;
  bool mounted_ = false;
};

}  // namespace tipfs::testing
