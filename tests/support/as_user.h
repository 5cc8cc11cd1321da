// Runs attempts as another user in a forked child and brings back each one's errno, so tests can
// check what a user other than the volume's owner (the tests run as root) is refused.
#pragma once

#include <grp.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <functional>
#include <vector>

namespace tipfs::testing {

inline constexpr uid_t kNobody = 65534;

// Forks, becomes user and group `uid` (no supplementary groups) and calls attempt(i) for each i
// below `count`; attempt returns 0 or an errno. The result has -1 for every attempt when the
// child could not change user (or died before answering).
inline std::vector<int> ErrnosAsUser(uid_t uid, size_t count,
                                     const std::function<int(size_t)>& attempt) {
  std::vector<int> result(count, -1);
  int fds[2];
  if (pipe(fds) != 0) return result;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (setgroups(0, nullptr) == 0 && setgid(uid) == 0 && setuid(uid) == 0) {
      for (size_t i = 0; i < count; ++i) result[i] = attempt(i);
    }
    (void)!write(fds[1], result.data(), result.size() * sizeof(int));
    _exit(0);
  }
  close(fds[1]);
  const size_t want = result.size() * sizeof(int);
  size_t got = 0;
  ssize_t n;
  while (got < want &&
         (n = read(fds[0], reinterpret_cast<char*>(result.data()) + got, want - got)) > 0) {
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return result;
}

}  // namespace tipfs::testing
