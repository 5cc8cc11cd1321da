/* A reader that seeks about each file through stdio, as GNU ld does about its objects:
 *
 *   stdio_seeker FILE...
 *
 * For each FILE: 64 bytes at its start, 100 at its middle, 100 at offset 100 (back near the
 * start), and prints the sum of the bytes read. A plain glibc stream reads one buffer (BUFSIZ) at
 * each of the three places; a stream buffering 128 KiB reads most of the file three times. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static unsigned long sum(FILE* f, long offset, size_t length) {
  unsigned char buffer[128];
  if (fseek(f, offset, SEEK_SET) != 0) return 0;
  size_t n = fread(buffer, 1, length, f);
  unsigned long total = 0;
  for (size_t i = 0; i < n; ++i) total += buffer[i];
  return total;
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    FILE* f = fopen(argv[i], "r");
    struct stat st;
    if (f == NULL || fstat(fileno(f), &st) != 0) {
      perror(argv[i]);
      return 1;
    }
    unsigned long total = sum(f, 0, 64) + sum(f, st.st_size / 2, 100) + sum(f, 100, 100);
    printf("%s %lu\n", argv[i], total);
    fclose(f);
  }
  return 0;
}
