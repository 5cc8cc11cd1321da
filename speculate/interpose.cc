// The preloaded entry points of libtipspec.so: the read, open, close, dup and exec families and
// fopen/fdopen. Each one costs a table lookup on the fast path (a descriptor not on the mount,
// or speculation off) and then calls the libc function it shadows (found with RTLD_NEXT).
//
// stdio: glibc's fread/fgets/getc refill their buffers with an internal read that no
// preloaded symbol can see. A read-only FILE opened on a watched file is therefore a
// fopencookie stream whose read function is the speculated read below (so the program's
// stdio reads are checked against the hint log like its read() calls), with its real descriptor
// kept in the public _fileno field so fileno(), fstat(fileno(f)) and posix_fadvise still work.
// In the speculating child the sandbox traps every read whatever its origin, so nothing here is
// needed for the child's safety; these hooks only let the program see its own reads.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <new>

#include "speculate/read_window.h"
#include "speculate/speculator.h"

#define TIPSPEC_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using tipfs::spec::ReadWindow;
using tipfs::spec::Speculator;

template <typename Fn>
Fn* Next(const char* name) {
  return reinterpret_cast<Fn*>(dlsym(RTLD_NEXT, name));
}
#define REAL(name) static auto* real_##name = Next<decltype(::name)>(#name)

Speculator& Spec() { return Speculator::Instance(); }

// Runs `read` (a real libc read) around the on-track check when fd is watched.
template <typename ReadFn>
ssize_t ObservedRead(int fd, int64_t explicit_offset, ReadFn read) {
  const Speculator::ReadTicket ticket = Spec().BeforeRead(fd, explicit_offset);
  ssize_t result = read();
  if (ticket.start_nanos > 0) {
    int err = errno;  // the program sees the read's errno, not that of our bookkeeping
    Spec().AfterRead(ticket, fd, result);
    errno = err;
  }
  return result;
}

void Forget(int fd) {
  if (fd >= 0) Spec().ForgetFd(fd);
}

mode_t ModeArgument(int flags, va_list ap) {
  return (flags & (O_CREAT | __O_TMPFILE)) != 0 ? static_cast<mode_t>(va_arg(ap, int)) : 0;
}

// ---- stdio streams on watched files --------------------------------------------------------

// What a stream reads after a seek: more than glibc's BUFSIZ, because a transfer of 32 KiB
// costs less than the positioning or round trip a second read would (hp-c2247: 9.4 ms against
// 15.6 ms; ssd 59 us against 90 us; nvme 11 us against 20 us; FUSE: a round trip of 30-60 us),
// and a small file comes whole: GNU ld's objects (median 20 KB) are then read once per stream,
// 358 reads of the mount for its 320 objects where glibc's own streams make 5,137.
constexpr size_t kSeekRead = 32 * 1024;

struct CookieFile {
  int fd;
  off64_t fd_offset;  // where the descriptor stands (the stream's reads move it)
  char* buffer;       // glibc's buffer of the stream
  char* storage;      // the window's bytes
  ReadWindow window;
};

void FreeCookie(CookieFile* file) {
  file->window.~ReadWindow();
  free(file->buffer);
  free(file->storage);
  free(file);
}

ssize_t CookieRead(void* cookie, char* buffer, size_t size) {
  REAL(read);
  auto* file = static_cast<CookieFile*>(cookie);
  return file->window.Read(buffer, size, [file](off64_t offset, char* into, size_t length) {
    if (file->fd_offset != offset) {
      if (lseek64(file->fd, offset, SEEK_SET) < 0) return ssize_t{-1};
      file->fd_offset = offset;
    }
    const ssize_t n = ObservedRead(file->fd, -1, [&] { return real_read(file->fd, into, length); });
    if (n > 0) file->fd_offset += n;
    return n;
  });
}

ssize_t CookieWrite(void*, const char*, size_t) {
  errno = EBADF;  // only read-only streams are converted
  return -1;
}

int CookieSeek(void* cookie, off64_t* position, int whence) {
  auto* file = static_cast<CookieFile*>(cookie);
  off64_t target = *position;
  if (whence == SEEK_CUR) {
    target += file->window.position();
  } else if (whence == SEEK_END) {
    target = lseek64(file->fd, *position, SEEK_END);
    if (target < 0) return -1;
    file->fd_offset = target;
  } else if (whence != SEEK_SET) {
    errno = EINVAL;
    return -1;
  }
  if (target < 0) {
    errno = EINVAL;
    return -1;
  }
  file->window.Seek(target);
  *position = target;
  return 0;
}

int CookieClose(void* cookie) {
  REAL(close);
  auto* file = static_cast<CookieFile*>(cookie);
  Forget(file->fd);
  int result = real_close(file->fd);
  FreeCookie(file);
  return result;
}

bool ReadOnlyMode(const char* mode) {
  return mode != nullptr && mode[0] == 'r' && strpbrk(mode, "+wa,m") == nullptr;
}

// A stdio stream over fd whose refills go through the speculated read. Null: use a plain one.
FILE* SpeculatedStream(int fd, const char* mode) {
  struct stat st;
  if (fstat(fd, &st) != 0) return nullptr;
  const off64_t position = lseek64(fd, 0, SEEK_CUR);
  if (position < 0) return nullptr;
  // glibc's own stream buffers st_blksize bytes when that is below BUFSIZ, else BUFSIZ
  // (filedoalloc.c): this one's buffer too, each refill served from the window. The window reads
  // kSeekRead bytes after a seek (less when st_blksize is smaller) and up to st_blksize (the
  // mount's: a stripe unit or more) for a reader that goes on.
  const size_t buffer_size = st.st_blksize > 0 && st.st_blksize < BUFSIZ
                                 ? static_cast<size_t>(st.st_blksize)
                                 : static_cast<size_t>(BUFSIZ);
  const size_t capacity = std::max(buffer_size, static_cast<size_t>(st.st_blksize));
  const size_t first_read = std::min(capacity, std::max(buffer_size, kSeekRead));
  auto* cookie = static_cast<CookieFile*>(calloc(1, sizeof(CookieFile)));
  if (cookie == nullptr) return nullptr;
  cookie->fd = fd;
  cookie->fd_offset = position;
  cookie->buffer = static_cast<char*>(malloc(buffer_size));
  cookie->storage = static_cast<char*>(malloc(capacity));
  new (&cookie->window) ReadWindow(cookie->storage, capacity, first_read, position);
  cookie_io_functions_t functions = {CookieRead, CookieWrite, CookieSeek, CookieClose};
  FILE* stream = cookie->buffer != nullptr && cookie->storage != nullptr
                     ? fopencookie(cookie, mode, functions)
                     : nullptr;
  if (stream == nullptr) {
    FreeCookie(cookie);
    return nullptr;
  }
  stream->_fileno = fd;
  setvbuf(stream, cookie->buffer, _IOFBF, buffer_size);
  return stream;
}

FILE* OpenStream(const char* path, const char* mode, FILE* (*real_open)(const char*, const char*)) {
  if (!Spec().started() || !ReadOnlyMode(mode)) return real_open(path, mode);
  REAL(fdopen);
  REAL(close);
  REAL(openat);
  int flags = O_RDONLY | (strchr(mode, 'e') != nullptr ? O_CLOEXEC : 0);
  int fd = real_openat(AT_FDCWD, path, flags);
  if (fd < 0) return nullptr;
  Forget(fd);
  FILE* stream = Spec().IsWatched(fd) ? SpeculatedStream(fd, mode) : nullptr;
  if (stream == nullptr) stream = real_fdopen(fd, mode);
  if (stream == nullptr) {
    int err = errno;
    real_close(fd);
    errno = err;
  }
  return stream;
}

}  // namespace

// ---- reads ---------------------------------------------------------------------------------

TIPSPEC_EXPORT ssize_t read(int fd, void* buffer, size_t size) {
  REAL(read);
  if (!Spec().MaybeWatched(fd)) return real_read(fd, buffer, size);
  return ObservedRead(fd, -1, [&] { return real_read(fd, buffer, size); });
}

TIPSPEC_EXPORT ssize_t __read_chk(int fd, void* buffer, size_t size, size_t buffer_size) {
  REAL(__read_chk);
  if (!Spec().MaybeWatched(fd)) return real___read_chk(fd, buffer, size, buffer_size);
  return ObservedRead(fd, -1, [&] { return real___read_chk(fd, buffer, size, buffer_size); });
}

TIPSPEC_EXPORT ssize_t pread(int fd, void* buffer, size_t size, off_t offset) {
  REAL(pread);
  if (!Spec().MaybeWatched(fd)) return real_pread(fd, buffer, size, offset);
  return ObservedRead(fd, offset, [&] { return real_pread(fd, buffer, size, offset); });
}

TIPSPEC_EXPORT ssize_t pread64(int fd, void* buffer, size_t size, off64_t offset) {
  REAL(pread64);
  if (!Spec().MaybeWatched(fd)) return real_pread64(fd, buffer, size, offset);
  return ObservedRead(fd, offset, [&] { return real_pread64(fd, buffer, size, offset); });
}

TIPSPEC_EXPORT ssize_t __pread_chk(int fd, void* buffer, size_t size, off_t offset,
                                   size_t buffer_size) {
  REAL(__pread_chk);
  if (!Spec().MaybeWatched(fd)) return real___pread_chk(fd, buffer, size, offset, buffer_size);
  return ObservedRead(fd, offset,
                      [&] { return real___pread_chk(fd, buffer, size, offset, buffer_size); });
}

TIPSPEC_EXPORT ssize_t __pread64_chk(int fd, void* buffer, size_t size, off64_t offset,
                                     size_t buffer_size) {
  REAL(__pread64_chk);
  if (!Spec().MaybeWatched(fd)) return real___pread64_chk(fd, buffer, size, offset, buffer_size);
  return ObservedRead(fd, offset,
                      [&] { return real___pread64_chk(fd, buffer, size, offset, buffer_size); });
}

TIPSPEC_EXPORT ssize_t readv(int fd, const struct iovec* iov, int count) {
  REAL(readv);
  if (!Spec().MaybeWatched(fd)) return real_readv(fd, iov, count);
  return ObservedRead(fd, -1, [&] { return real_readv(fd, iov, count); });
}

TIPSPEC_EXPORT ssize_t preadv(int fd, const struct iovec* iov, int count, off_t offset) {
  REAL(preadv);
  if (!Spec().MaybeWatched(fd)) return real_preadv(fd, iov, count, offset);
  return ObservedRead(fd, offset, [&] { return real_preadv(fd, iov, count, offset); });
}

TIPSPEC_EXPORT ssize_t preadv64(int fd, const struct iovec* iov, int count, off64_t offset) {
  REAL(preadv64);
  if (!Spec().MaybeWatched(fd)) return real_preadv64(fd, iov, count, offset);
  return ObservedRead(fd, offset, [&] { return real_preadv64(fd, iov, count, offset); });
}

TIPSPEC_EXPORT ssize_t preadv2(int fd, const struct iovec* iov, int count, off_t offset,
                               int flags) {
  REAL(preadv2);
  if (!Spec().MaybeWatched(fd)) return real_preadv2(fd, iov, count, offset, flags);
  return ObservedRead(fd, offset, [&] { return real_preadv2(fd, iov, count, offset, flags); });
}

TIPSPEC_EXPORT ssize_t preadv64v2(int fd, const struct iovec* iov, int count, off64_t offset,
                                  int flags) {
  REAL(preadv64v2);
  if (!Spec().MaybeWatched(fd)) return real_preadv64v2(fd, iov, count, offset, flags);
  return ObservedRead(fd, offset, [&] { return real_preadv64v2(fd, iov, count, offset, flags); });
}

// ---- descriptors coming and going ------------------------------------------------------------

#define TIPSPEC_OPEN(name, ...)                               \
  TIPSPEC_EXPORT int name(const char* path, int flags, ...) { \
    REAL(name);                                               \
    va_list ap;                                               \
    va_start(ap, flags);                                      \
    mode_t mode = ModeArgument(flags, ap);                    \
    va_end(ap);                                               \
    int fd = real_##name(path, flags, mode);                  \
    Forget(fd);                                               \
    return fd;                                                \
  }
TIPSPEC_OPEN(open)
TIPSPEC_OPEN(open64)

#define TIPSPEC_OPENAT(name)                                              \
  TIPSPEC_EXPORT int name(int dir_fd, const char* path, int flags, ...) { \
    REAL(name);                                                           \
    va_list ap;                                                           \
    va_start(ap, flags);                                                  \
    mode_t mode = ModeArgument(flags, ap);                                \
    va_end(ap);                                                           \
    int fd = real_##name(dir_fd, path, flags, mode);                      \
    Forget(fd);                                                           \
    return fd;                                                            \
  }
TIPSPEC_OPENAT(openat)
TIPSPEC_OPENAT(openat64)

TIPSPEC_EXPORT int __open_2(const char* path, int flags) {
  REAL(__open_2);
  int fd = real___open_2(path, flags);
  Forget(fd);
  return fd;
}

TIPSPEC_EXPORT int __open64_2(const char* path, int flags) {
  REAL(__open64_2);
  int fd = real___open64_2(path, flags);
  Forget(fd);
  return fd;
}

TIPSPEC_EXPORT int __openat_2(int dir_fd, const char* path, int flags) {
  REAL(__openat_2);
  int fd = real___openat_2(dir_fd, path, flags);
  Forget(fd);
  return fd;
}

TIPSPEC_EXPORT int __openat64_2(int dir_fd, const char* path, int flags) {
  REAL(__openat64_2);
  int fd = real___openat64_2(dir_fd, path, flags);
  Forget(fd);
  return fd;
}

TIPSPEC_EXPORT int creat(const char* path, mode_t mode) {
  REAL(creat);
  int fd = real_creat(path, mode);
  Forget(fd);
  return fd;
}

TIPSPEC_EXPORT int close(int fd) {
  REAL(close);
  Forget(fd);
  return real_close(fd);
}

TIPSPEC_EXPORT int dup(int fd) {
  REAL(dup);
  int result = real_dup(fd);
  Forget(result);
  return result;
}

TIPSPEC_EXPORT int dup2(int old_fd, int new_fd) {
  REAL(dup2);
  int result = real_dup2(old_fd, new_fd);
  Forget(result);
  return result;
}

TIPSPEC_EXPORT int dup3(int old_fd, int new_fd, int flags) {
  REAL(dup3);
  int result = real_dup3(old_fd, new_fd, flags);
  Forget(result);
  return result;
}

// ---- stdio ---------------------------------------------------------------------------------

TIPSPEC_EXPORT FILE* fopen(const char* path, const char* mode) {
  REAL(fopen);
  return OpenStream(path, mode, real_fopen);
}

TIPSPEC_EXPORT FILE* fopen64(const char* path, const char* mode) {
  REAL(fopen64);
  return OpenStream(path, mode, real_fopen64);
}

TIPSPEC_EXPORT FILE* fdopen(int fd, const char* mode) {
  REAL(fdopen);
  if (Spec().started() && ReadOnlyMode(mode) && Spec().IsWatched(fd)) {
    if (FILE* stream = SpeculatedStream(fd, mode)) return stream;
  }
  return real_fdopen(fd, mode);
}

// ---- exec: the child must not outlive the image it speculates on ---------------------------

// ---- _exit: a fork child ending this way (fork servers, Python's multiprocessing) runs no
// destructor, and its counters would be missing from the tree's --stats-file -----------------

TIPSPEC_EXPORT void _exit(int status) {
  REAL(_exit);
  Spec().BeforeQuickExit();
  real__exit(status);
  for (;;) syscall(SYS_exit_group, status);  // not reached
}

TIPSPEC_EXPORT void _Exit(int status) {
  REAL(_Exit);
  Spec().BeforeQuickExit();
  real__Exit(status);
  for (;;) syscall(SYS_exit_group, status);  // not reached
}

TIPSPEC_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  REAL(execve);
  Spec().BeforeExec();
  return real_execve(path, argv, envp);
}

TIPSPEC_EXPORT int execv(const char* path, char* const argv[]) {
  REAL(execv);
  Spec().BeforeExec();
  return real_execv(path, argv);
}

TIPSPEC_EXPORT int execvp(const char* file, char* const argv[]) {
  REAL(execvp);
  Spec().BeforeExec();
  return real_execvp(file, argv);
}

TIPSPEC_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  REAL(execvpe);
  Spec().BeforeExec();
  return real_execvpe(file, argv, envp);
}

TIPSPEC_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  REAL(fexecve);
  Spec().BeforeExec();
  return real_fexecve(fd, argv, envp);
}

namespace {

// Collects the arguments of execl/execlp/execle (NULL-terminated) and, for execle, envp.
template <typename Exec>
int ExecList(const char* first, va_list ap, bool with_env, Exec exec) {
  size_t count = 1;
  va_list counting;
  va_copy(counting, ap);
  if (first != nullptr) {
    while (va_arg(counting, char*) != nullptr) ++count;
  }
  va_end(counting);
  char** argv = static_cast<char**>(alloca((count + 1) * sizeof(char*)));
  argv[0] = const_cast<char*>(first);
  argv[1] = nullptr;
  if (first != nullptr) {
    for (size_t i = 1; i <= count; ++i) argv[i] = va_arg(ap, char*);  // includes the NULL
  }
  char** envp = with_env ? va_arg(ap, char**) : environ;
  return exec(argv, envp);
}

}  // namespace

TIPSPEC_EXPORT int execl(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  int result = ExecList(arg, ap, false, [&](char** argv, char**) { return execv(path, argv); });
  va_end(ap);
  return result;
}

TIPSPEC_EXPORT int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  int result = ExecList(arg, ap, false, [&](char** argv, char**) { return execvp(file, argv); });
  va_end(ap);
  return result;
}

TIPSPEC_EXPORT int execle(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  int result =
      ExecList(arg, ap, true, [&](char** argv, char** envp) { return execve(path, argv, envp); });
  va_end(ap);
  return result;
}
