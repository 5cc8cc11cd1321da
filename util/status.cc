#include "util/status.h"

#include <cstdio>
#include <cstdlib>
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

namespace internal {

void DieOnValueOfError(const Status& status) {
  std::fprintf(stderr, "INTERNAL ERROR: the value of a failed Result was read: %s\n",
               status.ToString().c_str());
  std::abort();
}

Status ValuelessResult() {
  return Status::IOError("INTERNAL ERROR: a Result was made from an OK status (no value)");
}

}  // namespace internal
}  // namespace tipfs
