// metadata_churn: creates, stats and unlinks N files in a directory, and prints the elapsed
// seconds. The metadata half of the foundation benchmark (issue 2): run it on a native directory
// and on a tipfs mount side by side.
//
// `metadata_churn --round-trip FILE COUNT` prints instead the mean microseconds of one
// fgetxattr(2) of an xattr FILE does not have (ENODATA): on FUSE every call is one request to the
// daemon and back (the kernel caches no xattrs), with one metadata read in the daemon, so it is
// the floor of what each request of the churn costs (bench/fast/README.md, "Metadata churn").
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int RoundTrips(const char* file, long count) {
  int fd = open(file, O_RDONLY);
  if (fd < 0) {
    std::perror(file);
    return 1;
  }
  char value[16];
  auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < count; ++i) {
    if (fgetxattr(fd, "user.tipfs-round-trip", value, sizeof(value)) >= 0 || errno != ENODATA) {
      std::fprintf(stderr, "%s: fgetxattr: expected ENODATA, got %s\n", file, std::strerror(errno));
      close(fd);
      return 1;
    }
  }
  std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
  close(fd);
  std::printf("%.3f\n", elapsed.count() / static_cast<double>(count));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--round-trip") == 0) {
    return RoundTrips(argv[2], std::strtol(argv[3], nullptr, 10));
  }
  if (argc != 3) {
    std::fprintf(
        stderr, "usage: metadata_churn DIR COUNT\n       metadata_churn --round-trip FILE COUNT\n");
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
