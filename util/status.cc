#include "util/status.h"

#include <cstring>

namespace tipfs {

std::string Status::ToString() const {
  if (ok()) return "OK";
  if (message_.empty()) return std::strerror(errno_);
  return message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(errno_, context + ": " + message_);
}

Status ErrnoStatus(const std::string& what, int err) {
  return Status::FromErrno(err, what + ": " + std::strerror(err));
}

}  // namespace tipfs
