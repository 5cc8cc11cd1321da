// Hazard 5, threads, signals and exec: threads that read watched files next to the main
// thread, signals raised during the reads, a forked child the program waits for with wait(2)
// (it must see its own child, never a speculating one, and get exactly one SIGCHLD), and an exec
// of itself, after which no speculating child of the old image may remain.
// usage: hazard_threads FILE... (the program execs itself as: hazard_threads --stage2 FILE...)
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <atomic>
#include <string>
#include <vector>

#include "tests/speculate/hazard_common.h"

using hazard::Fnv;

namespace {

std::atomic<int> g_usr1{0};
std::atomic<int> g_chld{0};

uint64_t HashFile(const char* path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) hazard::Die("open");
  char buffer[3000];
  uint64_t hash = 0;
  ssize_t n;
  int pieces = 0;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) {
    hash = Fnv(buffer, static_cast<size_t>(n), hash);
    if (++pieces % 5 == 0) raise(SIGUSR1);
  }
  close(fd);
  return hash;
}

void* ThreadMain(void* arg) {
  auto* path = static_cast<const char*>(arg);
  return reinterpret_cast<void*>(static_cast<uintptr_t>(HashFile(path) & 0xffffffff));
}

// Children of this process (every thread), as the kernel lists them.
int CountChildren() {
  int count = 0;
  DIR* tasks = opendir("/proc/self/task");
  while (struct dirent* task = readdir(tasks)) {
    if (task->d_name[0] == '.') continue;
    std::string path = std::string("/proc/self/task/") + task->d_name + "/children";
    FILE* f = fopen(path.c_str(), "r");
    if (f == nullptr) continue;
    int pid;
    while (fscanf(f, "%d", &pid) == 1) ++count;
    fclose(f);
  }
  closedir(tasks);
  return count;
}

}  // namespace

int main(int argc, char** argv) {
  hazard::RememberProgramPid();
  signal(SIGUSR1, [](int) { ++g_usr1; });
  if (argc >= 2 && strcmp(argv[1], "--stage2") == 0) {
    // Before any read of the mount: nothing may be left of the old image's speculation.
    printf("stage2 children before reading: %d\n", CountChildren());
    for (int i = 2; i < argc; ++i) {
      printf("stage2 %016llx\n", (unsigned long long)HashFile(argv[i]));
    }
    return 0;
  }
  if (argc < 4) return 2;
  signal(SIGCHLD, [](int) { ++g_chld; });

  printf("main first %016llx\n", (unsigned long long)HashFile(argv[1]));
  std::vector<pthread_t> threads;
  for (int i = 2; i < argc; ++i) {
    pthread_t t;
    pthread_create(&t, nullptr, ThreadMain, argv[i]);
    threads.push_back(t);
  }
  printf("main again %016llx\n", (unsigned long long)HashFile(argv[1]));
  for (size_t i = 0; i < threads.size(); ++i) {
    void* result;
    pthread_join(threads[i], &result);
    printf("thread %zu %08lx\n", i, (unsigned long)reinterpret_cast<uintptr_t>(result));
  }

  pid_t forked = fork();
  if (forked == 0) _exit(static_cast<int>(HashFile(argv[2]) % 100));
  int status = 0;
  pid_t waited;
  do {
    waited = wait(&status);
  } while (waited < 0 && errno == EINTR);
  printf("wait returned our child: %s, exit %d\n", waited == forked ? "yes" : "no",
         WEXITSTATUS(status));
  printf("main last %016llx\n", (unsigned long long)HashFile(argv[argc - 1]));
  printf("SIGCHLD %d, SIGUSR1 %d\n", g_chld.load(), g_usr1.load());
  fflush(stdout);

  std::vector<char*> args = {argv[0], const_cast<char*>("--stage2")};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv("/proc/self/exe", args.data());
  hazard::Die("execv");
}
