// Hazard 4, stdio: glibc's stdio refills its buffers with internal reads that LD_PRELOAD cannot
// see. Reads several watched files through fopen/fread/fgets/getc/fscanf/getline/ungetc/
// fseek/ftell and fileno, while the run-ahead path rewinds and drains the shared streams.
// usage: hazard_stdio FILE...
#include <string.h>
#include <sys/stat.h>

#include "tests/speculate/hazard_common.h"

using hazard::Fnv;

namespace {

void Disturb(FILE* f) {
  char buffer[4096];
  rewind(f);
  while (fread(buffer, 1, sizeof(buffer), f) > 0) {
  }
  fseek(f, 3, SEEK_SET);
}

void ReadStream(const char* path, int style) {
  FILE* f = fopen(path, "r");
  if (f == nullptr) hazard::Die("fopen");
  struct stat st;
  if (fstat(fileno(f), &st) != 0) hazard::Die("fstat(fileno)");
  uint64_t hash = 0;
  long items = 0;
  char buffer[1000];
  switch (style % 4) {
    case 0: {  // fread in odd sizes
      size_t n;
      while ((n = fread(buffer, 1, 333, f)) > 0) {
        hash = Fnv(buffer, n, hash);
        ++items;
        if (items == 2 && hazard::Speculating()) Disturb(f);
      }
      break;
    }
    case 1: {  // fgets, with a seek in the middle
      while (fgets(buffer, sizeof(buffer), f) != nullptr) {
        hash = Fnv(buffer, strlen(buffer), hash);
        if (++items == 50) {
          long here = ftell(f);
          fseek(f, here / 2, SEEK_SET);
          if (hazard::Speculating()) Disturb(f);
          fseek(f, here, SEEK_SET);
        }
      }
      break;
    }
    case 2: {  // getc and ungetc
      int c;
      while ((c = getc(f)) != EOF) {
        if (c == '\n' && ++items % 7 == 0) {
          ungetc('#', f);
          c = getc(f);
          if (hazard::Speculating()) Disturb(f);
        }
        char ch = static_cast<char>(c);
        hash = Fnv(&ch, 1, hash);
      }
      break;
    }
    case 3: {  // getline and fscanf
      char* line = nullptr;
      size_t capacity = 0;
      ssize_t n;
      while ((n = getline(&line, &capacity, f)) > 0) {
        hash = Fnv(line, static_cast<size_t>(n), hash);
        char word[64];
        long number;
        if (++items % 10 == 0 && fscanf(f, "%63s %ld", word, &number) == 2) {
          hash = Fnv(word, strlen(word), hash + static_cast<uint64_t>(number));
        }
        if (items == 3 && hazard::Speculating()) Disturb(f);
      }
      free(line);
      break;
    }
  }
  printf("%s style=%d size=%lld items=%ld hash=%016llx feof=%d\n", strrchr(path, '/') + 1,
         style % 4, (long long)st.st_size, items, (unsigned long long)hash, feof(f) != 0);
  fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  hazard::RememberProgramPid();
  for (int i = 1; i < argc; ++i) ReadStream(argv[i], i);
  return 0;
}
