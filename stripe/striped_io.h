// StripedIo: file-level reads and writes over a volume's disks. It maps a byte range to stripe
// units (Layout), sends the pieces to all their disks at once, and merges the results. Holes and
// bytes past an object's end read as zeros. Thread-safe; it holds no per-file state.
#pragma once

#include <cstdint>
#include <functional>

#include "stripe/disk.h"
#include "stripe/layout.h"
#include "stripe/volume.h"

namespace tipfs::stripe {

class StripedIo {
 public:
  // REQUIRES: volume outlives this object.
  explicit StripedIo(Volume* volume);

  const Layout& layout() const { return volume_->layout(); }
  Volume* volume() const { return volume_; }

  // Reads [offset, offset + length) of file `ino` into buffer, all disks in parallel. `done` runs
  // once, after every piece completed, with the merged error (MergeDiskErrors). It may run on the
  // calling thread before ReadAsync returns (in-memory disks, page-cache hits, holes).
  void ReadAsync(ObjectId ino, uint64_t offset, uint64_t length, char* buffer,
                 DiskRequest::Priority priority, std::function<void(Status)> done) {
    ReadAsync(ino, offset, length, buffer, priority, DiskRequest::Purpose::kDemand,
              std::move(done));
  }
  // The same, saying why the read is made (per-disk statistics and the timeline).
  void ReadAsync(ObjectId ino, uint64_t offset, uint64_t length, char* buffer,
                 DiskRequest::Priority priority, DiskRequest::Purpose purpose,
                 std::function<void(Status)> done);
  // Blocking forms.
  Status Read(ObjectId ino, uint64_t offset, uint64_t length, char* buffer);
  Status Write(ObjectId ino, uint64_t offset, const char* data, uint64_t length);

  // Makes every object of the file match a file of `new_size` bytes (shrinks drop data, growth
  // leaves holes). Call with the old size so objects that need no change are not touched.
  Status Truncate(ObjectId ino, uint64_t old_size, uint64_t new_size);
  // Flushes the file's objects on all disks to stable storage.
  Status Sync(ObjectId ino);
  // Deletes the file's objects on all disks.
  Status Remove(ObjectId ino);

 private:
  Volume* volume_;
};

}  // namespace tipfs::stripe
