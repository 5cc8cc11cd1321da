// Status and Result<T>: errors as values, each carrying an errno and a one-line message.
// Cheap on the fast path (an OK status holds no string). Immutable after construction, so a
// Status may be copied between threads freely. Nothing in tipfs throws across a FUSE or C boundary.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace tipfs {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK

  static Status OK() { return Status(); }
  // `err` must be a positive errno value.
  static Status FromErrno(int err, std::string message) { return Status(err, std::move(message)); }
  static Status NotFound(std::string m) { return Status(ENOENT, std::move(m)); }
  static Status IOError(std::string m) { return Status(EIO, std::move(m)); }
  static Status InvalidArgument(std::string m) { return Status(EINVAL, std::move(m)); }
  static Status Corruption(std::string m) { return Status(EUCLEAN, std::move(m)); }
  static Status Busy(std::string m) { return Status(EBUSY, std::move(m)); }
  static Status Exists(std::string m) { return Status(EEXIST, std::move(m)); }
  static Status NoSpace(std::string m) { return Status(ENOSPC, std::move(m)); }

  bool ok() const { return errno_ == 0; }
  // The errno this error maps to (0 when ok). FUSE replies use it directly.
  int error() const { return errno_; }
  const std::string& message() const { return message_; }
  // "message (strerror)" or "OK".
  std::string ToString() const;

  // Prefixes the message with context ("mount /x: " + message), keeping the errno.
  Status WithContext(const std::string& context) const;

 private:
  Status(int err, std::string message) : errno_(err), message_(std::move(message)) {}

  int errno_ = 0;
  std::string message_;
};

namespace internal {
// Reading the value of an error Result is a bug of the caller: it aborts loudly, naming the
// error, instead of throwing (nothing may throw across a FUSE boundary).
[[noreturn]] void DieOnValueOfError(const Status& status);
// A Result built from an OK Status has neither a value nor an error; it becomes this EIO.
Status ValuelessResult();
}  // namespace internal

// A value or the Status explaining why there is none. `Result<T> r = value;` or `= status`.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  // NOLINTNEXTLINE(google-explicit-constructor)
  Result(Status status) : v_(status.ok() ? internal::ValuelessResult() : std::move(status)) {}

  bool ok() const { return v_.index() == 0; }
  // REQUIRES: ok() (else the process aborts with the error's message).
  T& value() & { return *Checked(); }
  const T& value() const& { return *Checked(); }
  T&& value() && { return std::move(*Checked()); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  // OK when a value is held.
  Status status() const { return ok() ? Status::OK() : *std::get_if<1>(&v_); }
  int error() const { return ok() ? 0 : std::get_if<1>(&v_)->error(); }

 private:
  T* Checked() {
    if (T* v = std::get_if<0>(&v_)) return v;
    internal::DieOnValueOfError(*std::get_if<1>(&v_));
  }
  const T* Checked() const {
    if (const T* v = std::get_if<0>(&v_)) return v;
    internal::DieOnValueOfError(*std::get_if<1>(&v_));
  }

  std::variant<T, Status> v_;
};

// Status of a failed libc call: errno plus "what: strerror".
Status ErrnoStatus(const std::string& what, int err = errno);

}  // namespace tipfs

#define TIPFS_RETURN_IF_ERROR(expr) \
  do {                              \
    ::tipfs::Status _st = (expr);   \
    if (!_st.ok()) return _st;      \
  } while (0)
