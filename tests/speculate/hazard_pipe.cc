// Hazard 2 for the program's peers: a speculating child inherits every descriptor, and a pipe or
// socket end it kept would keep the peer from seeing EOF (or a hang-up) after the program closes
// its own. Here the run-ahead path sleeps (a child paused, as at its run-ahead bound) while the
// program closes the pipe to a helper process and waits for the helper to see EOF.
// usage: hazard_pipe WATCHED_FILE SIDE_FILE
//   prints what the program saw; writes to SIDE_FILE how many children the program had when it
//   closed the pipe (the test checks a speculating child was alive then).
#include <dirent.h>
#include <poll.h>
#include <sys/wait.h>

#include <string>

#include "tests/speculate/hazard_common.h"

using hazard::Fnv;

namespace {

// Children of this process, as the kernel lists them (the helper, and any speculating child).
int CountChildren() {
  std::string path = "/proc/self/task/" + std::to_string(getpid()) + "/children";
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return -1;
  int count = 0;
  int pid;
  while (fscanf(f, "%d", &pid) == 1) ++count;
  fclose(f);
  return count;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  hazard::RememberProgramPid();
  int to_helper[2];
  int done[2];
  if (pipe(to_helper) != 0 || pipe(done) != 0) hazard::Die("pipe");
  pid_t helper = fork();
  if (helper < 0) hazard::Die("fork");
  if (helper == 0) {
    // The helper: reads until EOF, then says so.
    close(to_helper[1]);
    close(done[0]);
    char buffer[256];
    while (read(to_helper[0], buffer, sizeof(buffer)) > 0) {
    }
    (void)!write(done[1], "E", 1);
    _exit(0);
  }
  close(to_helper[0]);
  close(done[1]);
  if (write(to_helper[1], "hello\n", 6) != 6) hazard::Die("write");

  int fd = open(argv[1], O_RDONLY);
  if (fd < 0) hazard::Die("open");
  char piece[4096];
  uint64_t hash = 0;
  for (int i = 0; i < 3; ++i) {  // a speculating child is forked at one of these reads
    ssize_t n = read(fd, piece, sizeof(piece));
    hash = Fnv(piece, n > 0 ? static_cast<size_t>(n) : 0, hash);
  }
  if (hazard::Speculating()) {
    // The run-ahead stops here, alive, holding whatever it kept of the program's descriptors.
    for (;;) sleep(3600);
  }
  FILE* side = fopen(argv[2], "w");
  if (side == nullptr) hazard::Die("fopen");
  fprintf(side, "children at close: %d\n", CountChildren() - 1);  // the helper is one
  fclose(side);
  close(to_helper[1]);
  // The helper sees EOF once no process holds the write end; a minute is "never" here.
  struct pollfd wait_done = {done[0], POLLIN, 0};
  bool eof = poll(&wait_done, 1, 60 * 1000) == 1;
  printf("helper saw EOF after the close: %s\n", eof ? "yes" : "no");
  ssize_t n;
  while ((n = read(fd, piece, sizeof(piece))) > 0) hash = Fnv(piece, static_cast<size_t>(n), hash);
  printf("file hash %016llx\n", (unsigned long long)hash);
  int status = 0;
  if (!eof) kill(helper, SIGKILL);
  waitpid(helper, &status, 0);
  return 0;
}
