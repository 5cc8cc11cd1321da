// ControlFiles: the hidden, read-only `.tipfs/` directory at the root of every mount. It is not
// listed by readdir (so `find`, `du` and `cp -a` of the mount never see it) but `.tipfs/stats`
// and friends can be opened by name. Each file's content is rendered when it is opened, so a
// reader sees one consistent snapshot; the files report size 0 and are served with direct I/O.
//
// Inode numbers of control files sit at the top of the 64-bit space, far above any number the
// metadata store hands out. Thread-safe (immutable after construction).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace tipfs::fusefs {

class ControlFiles {
 public:
  static constexpr uint64_t kBase = 0xFFFF'FFFF'0000'0000ull;
  static constexpr uint64_t kDirIno = kBase + 1;
  static constexpr std::string_view kDirName = ".tipfs";

  using Renderer = std::function<std::string()>;
  // A writable file's handler gets the written text; it returns an error to refuse it.
  using Writer = std::function<Status(std::string_view)>;

  // Adds a file; files get consecutive inode numbers in the order added.
  void Add(std::string name, Renderer render, Writer write = nullptr);

  static bool IsControl(uint64_t ino) { return ino > kBase; }
  // The file's inode number, or 0 when no such control file exists.
  uint64_t Lookup(std::string_view name) const;
  // Names and inode numbers, for listing `.tipfs/` itself.
  std::vector<std::pair<std::string, uint64_t>> List() const;
  // REQUIRES: IsControl(ino) && ino != kDirIno. NotFound for an unknown number.
  Result<std::string> Render(uint64_t ino) const;
  // EACCES for a read-only file.
  Status Write(uint64_t ino, std::string_view text) const;
  bool IsWritable(uint64_t ino) const;

 private:
  struct File {
    std::string name;
    Renderer render;
    Writer write;
  };
  const File* Find(uint64_t ino) const;

  std::vector<File> files_;
};

}  // namespace tipfs::fusefs
