#include "fusefs/control_files.h"

namespace tipfs::fusefs {

void ControlFiles::Add(std::string name, Renderer render, Writer write) {
  files_.push_back(File{std::move(name), std::move(render), std::move(write)});
}

uint64_t ControlFiles::Lookup(std::string_view name) const {
  for (size_t i = 0; i < files_.size(); ++i) {
    if (files_[i].name == name) return kDirIno + 1 + i;
  }
  return 0;
}

std::vector<std::pair<std::string, uint64_t>> ControlFiles::List() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (size_t i = 0; i < files_.size(); ++i) out.emplace_back(files_[i].name, kDirIno + 1 + i);
  return out;
}

const ControlFiles::File* ControlFiles::Find(uint64_t ino) const {
  if (ino <= kDirIno || ino - kDirIno - 1 >= files_.size()) return nullptr;
  return &files_[ino - kDirIno - 1];
}

Result<std::string> ControlFiles::Render(uint64_t ino) const {
  const File* file = Find(ino);
  if (file == nullptr) return Status::NotFound("no such control file");
  return file->render();
}

Status ControlFiles::Write(uint64_t ino, std::string_view text) const {
  const File* file = Find(ino);
  if (file == nullptr) return Status::NotFound("no such control file");
  if (!file->write)
    return Status::FromErrno(EACCES, "control file " + file->name + " is read-only");
  return file->write(text);
}

bool ControlFiles::IsWritable(uint64_t ino) const {
  const File* file = Find(ino);
  return file != nullptr && file->write != nullptr;
}

}  // namespace tipfs::fusefs
