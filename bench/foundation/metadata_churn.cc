// metadata_churn: creates, stats and unlinks N files in a directory, and prints the elapsed
// seconds. The metadata half of the foundation benchmark (issue 2): run it on a native directory
// and on a tipfs mount side by side.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: metadata_churn DIR COUNT\n");
    return 2;
  }
  const std::string dir = argv[1];
  const long count = std::strtol(argv[2], nullptr, 10);
  auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < count; ++i) {
    std::string path = dir + "/f" + std::to_string(i);
    int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd < 0 || close(fd) != 0) {
      std::perror(path.c_str());
      return 1;
    }
  }
  for (long i = 0; i < count; ++i) {
    struct stat st;
    std::string path = dir + "/f" + std::to_string(i);
    if (stat(path.c_str(), &st) != 0) {
      std::perror(path.c_str());
      return 1;
    }
  }
  for (long i = 0; i < count; ++i) {
    std::string path = dir + "/f" + std::to_string(i);
    if (unlink(path.c_str()) != 0) {
      std::perror(path.c_str());
      return 1;
    }
  }
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  std::printf("%.6f\n", elapsed.count());
  return 0;
}
