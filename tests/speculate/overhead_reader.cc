// A reader for measuring what libtipspec costs a program whose reads all hit the cache (see
// measure_overhead.sh): reads every FILE to its end, PASSES times, with read(2) in BLOCK-byte
// pieces or through stdio (fopen/fread), and prints the byte count and a checksum so the work
// cannot be optimized away. On stderr: its wall time and its own CPU time (the program's
// critical path), and the CPU time of the children it reaped (speculating children).
// usage: overhead_reader read|stdio BLOCK PASSES FILE...
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <vector>

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s read|stdio BLOCK PASSES FILE...\n", argv[0]);
    return 2;
  }
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  bool use_stdio = strcmp(argv[1], "stdio") == 0;
  size_t block = strtoul(argv[2], nullptr, 10);
  int passes = atoi(argv[3]);
  std::vector<char> buffer(block);
  unsigned long long bytes = 0;
  unsigned long long sum = 0;
  for (int pass = 0; pass < passes; ++pass) {
    for (int i = 4; i < argc; ++i) {
      if (use_stdio) {
        FILE* f = fopen(argv[i], "r");
        if (f == nullptr) return 1;
        size_t n;
        while ((n = fread(buffer.data(), 1, block, f)) > 0) {
          bytes += n;
          sum += static_cast<unsigned char>(buffer[n - 1]);
        }
        fclose(f);
      } else {
        int fd = open(argv[i], O_RDONLY);
        if (fd < 0) return 1;
        ssize_t n;
        while ((n = read(fd, buffer.data(), block)) > 0) {
          bytes += static_cast<unsigned long long>(n);
          sum += static_cast<unsigned char>(buffer[n - 1]);
        }
        close(fd);
      }
    }
  }
  printf("%llu bytes, checksum %llu\n", bytes, sum);
  fflush(stdout);
  struct timespec end;
  clock_gettime(CLOCK_MONOTONIC, &end);
  auto millis = [](const struct timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  struct rusage self;
  struct rusage children;
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  fprintf(stderr, "wall_ms %.3f self_cpu_ms %.3f children_cpu_ms %.3f\n",
          (end.tv_sec - start.tv_sec) * 1e3 + (end.tv_nsec - start.tv_nsec) / 1e6,
          millis(self.ru_utime) + millis(self.ru_stime),
          millis(children.ru_utime) + millis(children.ru_stime));
  return 0;
}
