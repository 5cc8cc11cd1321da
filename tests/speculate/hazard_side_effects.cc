// Hazard 2, side effects: a hostile program whose run-ahead path tries one forbidden action
// (the "spec" variant, only ever reached by a speculating child) before the program itself does
// the same action once (the "real" variant). After the run, the work directory, the signals and
// the socket traffic the test observed must be what the program alone produces.
// usage: hazard_side_effects ACTION WATCHED_FILE WORK_DIR TEST_PID SOCKET_PATH
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <string>

#include "tests/speculate/hazard_common.h"

namespace {

std::string g_work;
int g_log_fd = -1;         // opened for appending before the fork point: inherited by the child
int g_mapped_fd = -1;      // opened read-write before the fork point
char* g_shared = nullptr;  // a shared writable mapping made before the fork point

std::string Path(const std::string& name) { return g_work + "/" + name; }

int Act(const std::string& action, const std::string& tag, pid_t test_pid,
        const char* socket_path) {
  std::string line = tag + "\n";
  if (action == "write") return write(g_log_fd, line.data(), line.size()) < 0 ? errno : 0;
  // The "spec" variants write where the "real" ones do not, so that neither hides the other.
  off_t where = tag == "spec" ? 100 : 0;
  if (action == "pwrite") return pwrite(g_mapped_fd, tag.data(), tag.size(), where) < 0 ? errno : 0;
  if (action == "create") {
    int fd = open(Path("created-" + tag).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return errno;
    int rc = write(fd, line.data(), line.size()) < 0 ? errno : 0;
    close(fd);
    return rc;
  }
  if (action == "truncate") return truncate(Path("victim-" + tag).c_str(), 1) != 0 ? errno : 0;
  if (action == "ftruncate") return ftruncate(g_mapped_fd, tag == "spec" ? 2 : 8192) ? errno : 0;
  if (action == "unlink") return unlink(Path("victim-" + tag).c_str()) != 0 ? errno : 0;
  if (action == "rename") {
    return rename(Path("victim-" + tag).c_str(), Path("renamed-" + tag).c_str()) ? errno : 0;
  }
  if (action == "mkdir") return mkdir(Path("dir-" + tag).c_str(), 0755) != 0 ? errno : 0;
  if (action == "symlink") {
    return symlink("target", Path("link-" + tag).c_str()) != 0 ? errno : 0;
  }
  if (action == "chmod") return chmod(Path("victim-" + tag).c_str(), 0600) != 0 ? errno : 0;
  if (action == "kill") return kill(test_pid, tag == "spec" ? SIGUSR1 : SIGUSR2) ? errno : 0;
  if (action == "connect") {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0) return errno;
    struct sockaddr_un address = {};
    address.sun_family = AF_UNIX;
    strncpy(address.sun_path, socket_path, sizeof(address.sun_path) - 1);
    if (connect(s, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return errno;
    int rc = write(s, line.data(), line.size()) < 0 ? errno : 0;
    close(s);
    return rc;
  }
  if (action == "fork") {
    pid_t pid = fork();
    if (pid < 0) return errno;
    if (pid == 0) {
      int fd = open(Path("forked-" + tag).c_str(), O_WRONLY | O_CREAT, 0644);
      _exit(fd < 0 ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WEXITSTATUS(status);
  }
  if (action == "mmap") {
    void* map = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, g_mapped_fd, 0);
    if (map == MAP_FAILED) return errno;
    memcpy(static_cast<char*>(map) + where, tag.data(), tag.size());
    munmap(map, 4096);
    return 0;
  }
  if (action == "mmap-then-mprotect") {  // read-only at first, so not a write mapping yet
    void* map = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, g_mapped_fd, 0);
    if (map == MAP_FAILED) return errno;
    if (mprotect(map, 4096, PROT_READ | PROT_WRITE) != 0) return errno;
    memcpy(static_cast<char*>(map) + where, tag.data(), tag.size());
    munmap(map, 4096);
    return 0;
  }
  if (action == "mremap-then-write") {  // the shared mapping moved where no one watched it
    void* target = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (target == MAP_FAILED) return errno;
    void* moved = mremap(g_shared, 4096, 4096, MREMAP_MAYMOVE | MREMAP_FIXED, target);
    if (moved == MAP_FAILED) return errno;
    if (mprotect(moved, 4096, PROT_READ | PROT_WRITE) != 0) return errno;
    memcpy(static_cast<char*>(moved) + where, tag.data(), tag.size());
    return 0;
  }
  if (action == "fifo") {         // opening a FIFO to read releases a writer blocked in open()
    if (tag == "real") return 0;  // the program itself never does: nobody writes to it
    int fd = open(Path("fifo").c_str(), O_RDONLY);
    if (fd < 0) return errno;
    close(fd);
    return 0;
  }
  if (action == "shared-memory") {
    memcpy(g_shared + where, tag.data(), tag.size());
    return 0;
  }
  if (action == "exec") {
    std::string command = "echo " + tag + " >> " + Path("exec-log");
    if (tag == "spec") {
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      return errno;
    }
    return 0;  // the program's own exec is its last act, in main
  }
  return EINVAL;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) return 2;
  hazard::RememberProgramPid();
  std::string action = argv[1];
  g_work = argv[3];
  pid_t test_pid = static_cast<pid_t>(atoi(argv[4]));
  g_log_fd = open(Path("log").c_str(), O_WRONLY | O_APPEND);
  g_mapped_fd = open(Path("mapped").c_str(), O_RDWR);
  int shared_fd = open(Path("shared").c_str(), O_RDWR);
  int watched = open(argv[2], O_RDONLY);
  if (g_log_fd < 0 || g_mapped_fd < 0 || shared_fd < 0 || watched < 0) hazard::Die("open");
  g_shared =
      static_cast<char*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, shared_fd, 0));
  if (g_shared == MAP_FAILED) hazard::Die("mmap");

  char byte;
  if (read(watched, &byte, 1) != 1) hazard::Die("read");  // a child is forked here
  if (hazard::Speculating()) Act(action, "spec", test_pid, argv[5]);
  if (read(watched, &byte, 1) != 1) hazard::Die("read");  // the program waits for the child
  int result = Act(action, "real", test_pid, argv[5]);
  if (read(watched, &byte, 1) != 1) hazard::Die("read");
  printf("%s real: %s\n", action.c_str(), result == 0 ? "ok" : strerror(result));
  fflush(stdout);
  if (action == "exec") {
    std::string command = "echo real >> " + Path("exec-log");
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    hazard::Die("exec");
  }
  return 0;
}
