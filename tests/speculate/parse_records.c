/* A program that parses and validates every file it reads, as linkers and loaders do (the
 * libtipspec tests of issue 10 run it with and without `tipfs run`):
 *
 *   parse_records [--huge-on-bad] [--unlink-after PATH] [--skip-unreadable] [--one-site]
 *                 [--whole [--size-check]] [--trailer PATH] [--work N] [--tables] FILE...
 *   parse_records --make N DIR
 *
 * Each FILE holds a 16-byte header ("REC1", record count, a checksum of the records) and that
 * many 64-byte records. The program reads the header, then the records it announces, checks the
 * sum and prints "NAME records SUM"; on a bad magic or sum it says so on stderr and exits 1
 * (a speculating child fed zeros takes exactly that path). With --huge-on-bad, a bad header makes
 * it first read up to 64 MiB of that file in one call (the garbage-driven huge range a budget must
 * stop). --unlink-after PATH removes PATH (if it exists) after each file, as a linker removes its
 * temporary files: a call the speculating child may not make, so it ends there by itself.
 * --skip-unreadable: a FILE that cannot be opened is reported on stdout ("NAME unreadable") and
 * skipped instead of ending the program (exit status 2).
 * --one-site: the header and the records are read in one piece each, both by the same read call
 * (one read site, as GNU grep reads every file). --work N: each file's records are summed N
 * times more (CPU work per file, so that a child covering one file costs more than it saves).
 * --whole: each file is read whole, as a data loader reads a sample (fstat, then reads of st_size
 * + 1 bytes until end of file, all from one call), and the header must account for every byte
 * read. --size-check too: the bytes read must be st_size, and the header's records lie within
 * them (a program that checks its reads against the file's size, not against the header).
 * --trailer PATH: after the k-th FILE is checked, 8 bytes at k * 64 KiB of PATH are read
 * from a call of their own and not checked (a read whose bytes steer nothing, as a linker reads a
 * string table: a child that gets zeros there goes on, and dies at the next file's header).
 * --tables: a linker's two passes. Pass 1 reads every FILE's header (its record count, which must
 * account for the file's size, as a linker checks an object's header against fstat); pass 2
 * reads every FILE's records as two tables from one call (one read site, as a linker reads each
 * object's relocation sections), the first count/2 records, then the rest, and checks each entry,
 * as a linker checks each relocation, instead of the sum: the first 4 bytes of a record in the
 * first table name a record of the file (1..count), in the second one of 8 kinds (1..8); 0 (what
 * zeros name) or a larger name is an error (exit 1). It prints "NAME records SUM".
 * --make N DIR writes N such files of assorted sizes into DIR and exits (every record's first 4
 * bytes a valid name for --tables). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct header {
  char magic[4];
  uint32_t count;
  uint64_t sum;
};

static uint64_t mix(uint64_t sum, const unsigned char* record) {
  for (int i = 0; i < 64; ++i) sum = (sum ^ record[i]) * 1099511628211ull;
  return sum;
}

static int make(int n, const char* dir) {
  for (int f = 0; f < n; ++f) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/rec%03d.bin", dir, f);
    FILE* out = fopen(path, "wb");
    if (out == NULL) return 1;
    struct header h;
    memcpy(h.magic, "REC1", 4);
    h.count = 40 + (uint32_t)(f * 37 % 200);
    h.sum = 14695981039346656037ull;
    unsigned char* records = malloc((size_t)h.count * 64);
    for (uint32_t r = 0; r < h.count; ++r) {
      for (int i = 0; i < 64; ++i) records[r * 64 + i] = (unsigned char)(f * 131 + r * 7 + i);
      const uint32_t name = r < h.count / 2 ? 1 + (r * 7 + (uint32_t)f) % h.count : 1 + (r + f) % 8;
      memcpy(records + r * 64, &name, sizeof(name));
      h.sum = mix(h.sum, records + r * 64);
    }
    fwrite(&h, sizeof(h), 1, out);
    fwrite(records, 64, h.count, out);
    free(records);
    if (fclose(out) != 0) return 1;
  }
  return 0;
}

/* Reads exactly n bytes at the current offset; 0 on success. */
static int read_all(int fd, void* buffer, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = read(fd, (char*)buffer + done, n - done);
    if (got <= 0) return -1;
    done += (size_t)got;
  }
  return 0;
}

static char huge[64 << 20];

/* --trailer: 8 bytes of the side file at `offset`, not checked. */
static __attribute__((noinline)) void read_trailer(int fd, off_t offset) {
  static volatile uint64_t trailer;
  uint64_t bytes = 0;
  if (pread(fd, &bytes, sizeof(bytes), offset) == (ssize_t)sizeof(bytes)) trailer ^= bytes;
}

/* --whole: the file read whole, its header checked against the bytes read (or, with
 * `size_check`, the bytes read against st_size). Returns 0, or -1 when short, -2 for a bad
 * header. *records is malloc'ed. */
static __attribute__((noinline)) int read_whole(int fd, int size_check, struct header* h,
                                                unsigned char** records) {
  struct stat st;
  if (fstat(fd, &st) != 0) return -1;
  const size_t capacity = (size_t)st.st_size + 1;
  unsigned char* bytes = malloc(capacity);
  size_t got = 0;
  ssize_t n;
  while (got < capacity && (n = read(fd, bytes + got, capacity - got)) > 0) got += (size_t)n;
  int status = 0;
  if (size_check && got != (size_t)st.st_size) {
    status = -1;
  } else if (got < sizeof(*h)) {
    status = -2;
  } else {
    memcpy(h, bytes, sizeof(*h));
    const size_t need = sizeof(*h) + (size_t)h->count * 64;
    if (memcmp(h->magic, "REC1", 4) != 0 || h->count > 100000 ||
        (size_check ? need > got : need != got)) {
      status = -2;
    } else {
      *records = malloc((size_t)h->count * 64 + 1);
      memcpy(*records, bytes + sizeof(*h), (size_t)h->count * 64);
    }
  }
  free(bytes);
  return status;
}

/* --one-site: the header, then the records it announces, from one call instruction. Returns 0, or
 * -1 when short, -2 for a bad header. *records is malloc'ed. */
static __attribute__((noinline)) int read_one_site(int fd, struct header* h,
                                                   unsigned char** records) {
  volatile int parts = 2; /* a count the compiler cannot see: one call, not one per part */
  for (int part = 0; part < parts; ++part) {
    void* where = part == 0 ? (void*)h : (void*)*records;
    size_t n = part == 0 ? sizeof(*h) : (size_t)h->count * 64;
    if (read_all(fd, where, n) != 0) return -1;
    if (part == 0) {
      if (memcmp(h->magic, "REC1", 4) != 0 || h->count > 100000) return -2;
      *records = malloc((size_t)h->count * 64 + 1);
    }
  }
  return 0;
}

/* --tables, pass 2: the records (after the header) as two tables, each entry checked, both from
 * one call instruction. Returns 0, or -1 when short, -2 for a bad entry. */
static __attribute__((noinline)) int read_tables(int fd, uint32_t count, unsigned char* records) {
  volatile int parts = 2; /* a count the compiler cannot see: one call, not one per part */
  for (int part = 0; part < parts; ++part) {
    const uint32_t from = part == 0 ? 0 : count / 2, to = part == 0 ? count / 2 : count;
    if (read_all(fd, records + (size_t)from * 64, (size_t)(to - from) * 64) != 0) return -1;
    for (uint32_t r = from; r < to; ++r) {
      uint32_t name;
      memcpy(&name, records + (size_t)r * 64, sizeof(name));
      if (name == 0 || name > (part == 0 ? count : 8)) return -2;
    }
  }
  return 0;
}

/* --tables: pass 1 (every header), then pass 2 (every file's tables). */
static int link_tables(int argc, char** argv, int first) {
  uint32_t* counts = calloc((size_t)argc, sizeof(uint32_t));
  for (int i = first; i < argc; ++i) {
    int fd = open(argv[i], O_RDONLY);
    struct header h;
    struct stat st;
    memset(&h, 0, sizeof(h));
    if (fd < 0 || fstat(fd, &st) != 0 || read_all(fd, &h, sizeof(h)) != 0 ||
        memcmp(h.magic, "REC1", 4) != 0 ||
        (off_t)(sizeof(h) + (size_t)h.count * 64) != st.st_size) {
      fprintf(stderr, "%s: not a record file\n", argv[i]);
      return 1;
    }
    counts[i] = h.count;
    close(fd);
  }
  for (int i = first; i < argc; ++i) {
    int fd = open(argv[i], O_RDONLY);
    /* zeroed: a child that gets no data sees zeros, not the last file's records */
    unsigned char* records = calloc((size_t)counts[i] + 1, 64);
    if (fd < 0 || lseek(fd, (off_t)sizeof(struct header), SEEK_SET) < 0) {
      perror(argv[i]);
      return 2;
    }
    int got = read_tables(fd, counts[i], records);
    if (got != 0) {
      fprintf(stderr, "%s: %s\n", argv[i], got == -2 ? "entry out of range" : "short");
      return 1;
    }
    uint64_t sum = 14695981039346656037ull;
    for (uint32_t r = 0; r < counts[i]; ++r) sum = mix(sum, records + (size_t)r * 64);
    free(records);
    close(fd);
    const char* name = strrchr(argv[i], '/');
    printf("%s %u %016llx\n", name != NULL ? name + 1 : argv[i], counts[i],
           (unsigned long long)sum);
  }
  free(counts);
  return 0;
}

int main(int argc, char** argv) {
  int first = 1, huge_on_bad = 0, skip_unreadable = 0, one_site = 0, whole = 0, size_check = 0;
  int trailer = -1, work = 0, tables = 0;
  const char* unlink_after = NULL;
  if (argc >= 4 && strcmp(argv[1], "--make") == 0) return make(atoi(argv[2]), argv[3]);
  for (;;) {
    if (first < argc && strcmp(argv[first], "--huge-on-bad") == 0) {
      huge_on_bad = 1;
      first += 1;
    } else if (first < argc && strcmp(argv[first], "--skip-unreadable") == 0) {
      skip_unreadable = 1;
      first += 1;
    } else if (first < argc && strcmp(argv[first], "--one-site") == 0) {
      one_site = 1;
      first += 1;
    } else if (first < argc && strcmp(argv[first], "--whole") == 0) {
      whole = 1;
      first += 1;
    } else if (first < argc && strcmp(argv[first], "--tables") == 0) {
      tables = 1;
      first += 1;
    } else if (first < argc && strcmp(argv[first], "--size-check") == 0) {
      size_check = 1;
      first += 1;
    } else if (first + 1 < argc && strcmp(argv[first], "--trailer") == 0) {
      trailer = open(argv[first + 1], O_RDONLY);
      if (trailer < 0) {
        perror(argv[first + 1]);
        return 2;
      }
      first += 2;
    } else if (first + 1 < argc && strcmp(argv[first], "--work") == 0) {
      work = atoi(argv[first + 1]);
      first += 2;
    } else if (first + 1 < argc && strcmp(argv[first], "--unlink-after") == 0) {
      unlink_after = argv[first + 1];
      first += 2;
    } else {
      break;
    }
  }
  if (tables) return link_tables(argc, argv, first);
  for (int i = first; i < argc; ++i) {
    int fd = open(argv[i], O_RDONLY);
    if (fd < 0 && skip_unreadable) {
      printf("%s unreadable\n", argv[i]);
      continue;
    }
    if (fd < 0) {
      perror(argv[i]);
      return 2;
    }
    struct header h;
    memset(&h, 0, sizeof(h)); /* a child that gets no data sees zeros, not the last header */
    unsigned char* records = NULL;
    if (one_site || whole) {
      int got = whole ? read_whole(fd, size_check, &h, &records) : read_one_site(fd, &h, &records);
      if (got != 0) {
        fprintf(stderr, "%s: %s\n", argv[i], got == -2 ? "not a record file" : "short");
        return 1;
      }
    } else if (read_all(fd, &h, sizeof(h)) != 0 || memcmp(h.magic, "REC1", 4) != 0 ||
               h.count > 100000) {
      fprintf(stderr, "%s: not a record file\n", argv[i]);
      if (huge_on_bad && read(fd, huge, sizeof(huge)) < 0) perror(argv[i]);
      return 1;
    }
    if (!one_site && !whole) {
      records = malloc((size_t)h.count * 64 + 1);
      /* In two reads, as a program reads a table and then what it points to. */
      const size_t half = (size_t)h.count / 2 * 64;
      if (read_all(fd, records, half) != 0 ||
          read_all(fd, records + half, (size_t)h.count * 64 - half) != 0) {
        fprintf(stderr, "%s: short\n", argv[i]);
        return 1;
      }
    }
    static volatile uint64_t spent; /* --work: kept, so the rounds are not optimised away */
    for (int round = 0; round < work; ++round) {
      uint64_t again = (uint64_t)round;
      for (uint32_t r = 0; r < h.count; ++r) again = mix(again, records + r * 64);
      spent ^= again;
    }
    uint64_t sum = 14695981039346656037ull;
    for (uint32_t r = 0; r < h.count; ++r) sum = mix(sum, records + r * 64);
    free(records);
    close(fd);
    if (sum != h.sum) {
      fprintf(stderr, "%s: bad checksum\n", argv[i]);
      return 1;
    }
    const char* name = strrchr(argv[i], '/');
    printf("%s %u %016llx\n", name != NULL ? name + 1 : argv[i], h.count, (unsigned long long)sum);
    if (trailer >= 0) read_trailer(trailer, (off_t)(i - first) << 16);
    if (unlink_after != NULL) unlink(unlink_after);
  }
  return 0;
}
