/* tipfs hint API: disclose future reads to a tipfs mount (informed prefetching, TIP).
 *
 * A stable C ABI. Every call is an ioctl(2) on an open file or directory inside a tipfs mount.
 * FUSE forwards only "restricted" ioctls: the argument size is encoded in the command number
 * (at most 16383 bytes) and no pointer inside it is followed, so every structure here is flat
 * and fixed-size. Each structure starts with `version`; the daemon refuses versions it does not
 * know with EPROTO and changes nothing.
 *
 * Hints are disclosures, not commands: the file system prefetches hinted data when a disk is idle
 * and its cost-benefit manager says the buffer is worth more than what it would evict.
 * See tipfs_hint(3).
 */
#ifndef TIPFS_HINT_H
#define TIPFS_HINT_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TIPFS_HINT_VERSION 1u

/* Where a hint came from. Every source but manual is discounted by its measured accuracy. */
enum tipfs_hint_source {
  TIPFS_SOURCE_MANUAL = 0,      /* the program itself */
  TIPFS_SOURCE_SPECULATIVE = 1, /* libtipspec's speculating child, on data it really read */
  TIPFS_SOURCE_WARMUP = 2,      /* `tipfs hint` from the shell: prefetch in this order */
  TIPFS_SOURCE_HISTORY = 3,     /* `tipfs run` replaying the reads of the last run of a command */
  TIPFS_SOURCE_SPECULATIVE_TAINTED = 4, /* a speculating child after it read data it did not get:
                                           capped (tipfs(8)), cancelled apart */
};

/* Stream 0 means "the calling process's own stream" (its thread group id). */
#define TIPFS_STREAM_SELF 0ull

/* Common first part of every request. */
struct tipfs_hint_header {
  uint32_t version; /* TIPFS_HINT_VERSION */
  uint32_t source;  /* enum tipfs_hint_source */
  uint64_t stream;  /* TIPFS_STREAM_SELF or an id the caller chose */
  uint32_t epoch;   /* speculation epoch; 0 for manual hints */
  uint32_t count;   /* number of used entries in the array that follows */
};

/* A byte range of a file. length 0 means "to end of file". Ranges past end of file are clipped. */
struct tipfs_segment {
  uint64_t offset;
  uint64_t length;
};

/* TIPFS_IOC_HINT_FD: hint segments of the file the ioctl is issued on, in the order they will be
 * read. Up to TIPFS_FD_SEGMENTS_MAX per call; call again to disclose more (appended in order). */
#define TIPFS_FD_SEGMENTS_MAX 1020
struct tipfs_hint_fd {
  struct tipfs_hint_header header;
  struct tipfs_segment segments[TIPFS_FD_SEGMENTS_MAX];
};

/* TIPFS_IOC_HINT_PATHS: hint files by path, for files the program has not opened yet (a search
 * over many files). `records` holds `header.count` packed records, each
 *   struct tipfs_path_record, followed by path_length bytes of path (no NUL),
 *   padded with zeros to a multiple of 8 bytes.
 * A path is absolute (inside the mount) or relative to the mount's root. `bytes` is the number of
 * bytes of `records` in use. The ioctl may be issued on any file or directory of the mount. */
#define TIPFS_PATH_RECORDS_BYTES 16000
struct tipfs_path_record {
  uint64_t offset;
  uint64_t length;
  uint32_t path_length; /* 1..4095 */
  uint32_t reserved;    /* 0 */
};
struct tipfs_hint_paths {
  struct tipfs_hint_header header;
  uint32_t bytes;
  uint32_t reserved;
  char records[TIPFS_PATH_RECORDS_BYTES];
};

/* TIPFS_IOC_CANCEL: drop outstanding hints. flags TIPFS_CANCEL_ALL: every stream of the calling
 * process; otherwise the stream in header.stream, and with TIPFS_CANCEL_EPOCH only the hints of
 * header.epoch (a speculation restart), with TIPFS_CANCEL_TAINTED only its tainted ones
 * (TIPFS_SOURCE_SPECULATIVE_TAINTED: a speculating child ended; its clean hints stay).
 * header.count is ignored. */
#define TIPFS_CANCEL_ALL 1u
#define TIPFS_CANCEL_EPOCH 2u
#define TIPFS_CANCEL_TAINTED 4u
struct tipfs_cancel {
  struct tipfs_hint_header header;
  uint32_t flags;
  uint32_t reserved;
};

/* TIPFS_IOC_QUERY: the state of one stream (header.stream) and the mount's cache counters. */
struct tipfs_query {
  struct tipfs_hint_header header; /* in: version, stream */
  /* out: the stream */
  uint64_t stream_hinted_bytes;      /* disclosed and not yet consumed or cancelled */
  uint64_t stream_segments_pending;  /* segments not yet consumed */
  uint64_t stream_blocks_consumed;   /* hinted blocks read by the stream so far */
  uint64_t stream_blocks_prefetched; /* blocks fetched for the stream's hints */
  uint64_t stream_cap_bytes;         /* the per-process cap on outstanding hinted bytes */
  /* out: the whole cache */
  uint64_t cache_capacity_bytes;
  uint64_t cache_block_bytes;
  uint64_t demand_hits;
  uint64_t demand_misses;
  uint64_t readahead_hits;
  uint64_t hinted_prefetched;
  uint64_t hinted_used;
  uint64_t hinted_evicted_unused;
  uint64_t hinted_cancelled;
  uint64_t stall_nanos;
  uint64_t prefetch_horizon; /* blocks */
  uint64_t lru_buffers;
  uint64_t hinted_buffers;
  /* out: hinted blocks read from every stream of the stream's owner process since its first hint,
   * by source (enum tipfs_hint_source; while the mount remembers the process, the last 4096) */
  uint64_t process_consumed[5];
  uint32_t stream_exists; /* out: 1 when the stream holds hints (or was just emptied by reads) */
  uint32_t reserved32;
  uint64_t reserved[2];
};

/* TIPFS_IOC_SPEC_ATTACH / DETACH: libtipspec's speculating child declares itself. While attached,
 * the calling process's reads never wait for the disk: data in the cache is returned, data not
 * in the cache is hinted (header.source: TIPFS_SOURCE_SPECULATIVE or _SPECULATIVE_TAINTED;
 * header.stream / header.epoch) and the read fails with EAGAIN, so that nothing the child did
 * not really read can enter any cache. With wait_for_data the read waits for the data after
 * hinting it, except through a descriptor opened (or set) O_NONBLOCK, which never waits.
 * Attaching again changes source, epoch and wait_for_data. */
struct tipfs_spec_attach {
  struct tipfs_hint_header header; /* stream: the parent's stream; epoch: the current epoch */
  uint32_t wait_for_data; /* 1: reads of uncached data wait for it (follow true dependencies) */
  uint32_t reserved;
};

/* TIPFS_IOC_SHARE: with flags TIPFS_SHARE_DESCENDANTS, lets the reads of the caller's
 * descendants (children, their children...) that run as the caller's user consume the hints of
 * the caller's stream header.stream (TIPFS_STREAM_SELF or one of its named streams), in any order:
 * a loader discloses its order and its worker processes, each reading its own part, consume it.
 * flags 0 stops sharing. Other processes' reads never consume the stream; only the caller may
 * cancel it. The stream may be shared before or after it is hinted. See tipfs_hint(3). */
#define TIPFS_SHARE_DESCENDANTS 1u
struct tipfs_share {
  struct tipfs_hint_header header; /* stream: the caller's stream to share */
  uint32_t flags;                  /* TIPFS_SHARE_DESCENDANTS, or 0 */
  uint32_t reserved;               /* 0 */
};

#define TIPFS_IOC_MAGIC 'T'
#define TIPFS_IOC_HINT_FD _IOW(TIPFS_IOC_MAGIC, 1, struct tipfs_hint_fd)
#define TIPFS_IOC_HINT_PATHS _IOW(TIPFS_IOC_MAGIC, 2, struct tipfs_hint_paths)
#define TIPFS_IOC_CANCEL _IOW(TIPFS_IOC_MAGIC, 3, struct tipfs_cancel)
#define TIPFS_IOC_QUERY _IOWR(TIPFS_IOC_MAGIC, 4, struct tipfs_query)
#define TIPFS_IOC_SPEC_ATTACH _IOW(TIPFS_IOC_MAGIC, 5, struct tipfs_spec_attach)
#define TIPFS_IOC_SPEC_DETACH _IOW(TIPFS_IOC_MAGIC, 6, struct tipfs_spec_attach)
#define TIPFS_IOC_SHARE _IOW(TIPFS_IOC_MAGIC, 7, struct tipfs_share)

/* ---- Convenience helpers ------------------------------------------------------------------
 * Header-only (static inline), no library to link. Each returns 0 on success or -1 with errno
 * set, as ioctl(2) does; the errno values are those of tipfs_hint(3). `fd` is any open file or
 * directory inside the tipfs mount (for tipfs_hint_segments and tipfs_hint_range: the file whose
 * ranges are hinted, open for reading). Hints go to the caller's own stream unless a _stream
 * variant names another. Function names never repeat a structure tag (tipfs_hint_query, not
 * tipfs_query), so C++ code can keep naming the structures without the `struct` keyword. */

static inline void tipfs_hint_header_init(struct tipfs_hint_header *h, uint32_t source,
                                          uint64_t stream, uint32_t epoch, uint32_t count) {
  h->version = TIPFS_HINT_VERSION;
  h->source = source;
  h->stream = stream;
  h->epoch = epoch;
  h->count = count;
}

/* Hints `n` segments of the file open on `fd`, in the order they will be read. Any n: more than
 * TIPFS_FD_SEGMENTS_MAX go out in several calls, in order; on an error the segments before the
 * failing call stay hinted. length 0 in a segment means "to end of file". */
static inline int tipfs_hint_segments_stream(int fd, uint64_t stream, uint32_t source,
                                             uint32_t epoch, const struct tipfs_segment *segs,
                                             size_t n) {
  struct tipfs_hint_fd *req = (struct tipfs_hint_fd *)malloc(sizeof(*req));
  size_t done = 0;
  if (req == NULL) return -1; /* errno ENOMEM from malloc */
  while (done < n) {
    size_t chunk = n - done < TIPFS_FD_SEGMENTS_MAX ? n - done : TIPFS_FD_SEGMENTS_MAX;
    memset(req, 0, sizeof(*req));
    tipfs_hint_header_init(&req->header, source, stream, epoch, (uint32_t)chunk);
    memcpy(req->segments, segs + done, chunk * sizeof(*segs));
    if (ioctl(fd, TIPFS_IOC_HINT_FD, req) != 0) {
      int saved = errno;
      free(req);
      errno = saved;
      return -1;
    }
    done += chunk;
  }
  free(req);
  return 0;
}

static inline int tipfs_hint_segments(int fd, const struct tipfs_segment *segs, size_t n,
                                      uint32_t source) {
  return tipfs_hint_segments_stream(fd, TIPFS_STREAM_SELF, source, 0, segs, n);
}

/* One range of the file open on `fd` (manual source, the caller's stream). */
static inline int tipfs_hint_range(int fd, uint64_t offset, uint64_t length) {
  struct tipfs_segment seg;
  seg.offset = offset;
  seg.length = length;
  return tipfs_hint_segments(fd, &seg, 1, TIPFS_SOURCE_MANUAL);
}

/* Path hints are built in a struct tipfs_hint_paths (about 16 KiB; allocate it, or keep one per
 * thread): init, add records until one does not fit (ENOSPC), send, and go on adding. */
static inline void tipfs_hint_paths_init(struct tipfs_hint_paths *req, uint32_t source,
                                         uint64_t stream, uint32_t epoch) {
  tipfs_hint_header_init(&req->header, source, stream, epoch, 0);
  req->bytes = 0;
  req->reserved = 0;
}

/* Appends one path record. ENOSPC: it does not fit (send first); EINVAL: the path is empty or
 * longer than 4095 bytes. The path is absolute inside the mount or relative to its root. */
static inline int tipfs_hint_paths_add(struct tipfs_hint_paths *req, const char *path,
                                       uint64_t offset, uint64_t length) {
  struct tipfs_path_record record;
  size_t path_length = strlen(path);
  size_t padded = (path_length + 7u) & ~(size_t)7u;
  size_t need = sizeof(record) + padded;
  if (path_length == 0 || path_length > 4095) {
    errno = EINVAL;
    return -1;
  }
  if (req->bytes + need > TIPFS_PATH_RECORDS_BYTES) {
    errno = ENOSPC;
    return -1;
  }
  record.offset = offset;
  record.length = length;
  record.path_length = (uint32_t)path_length;
  record.reserved = 0;
  memcpy(req->records + req->bytes, &record, sizeof(record));
  memcpy(req->records + req->bytes + sizeof(record), path, path_length);
  memset(req->records + req->bytes + sizeof(record) + path_length, 0, padded - path_length);
  req->bytes += (uint32_t)need;
  req->header.count += 1;
  return 0;
}

/* Sends the records built so far (nothing to send is not an error) and empties the request for
 * the next records; the header's source, stream and epoch are kept. */
static inline int tipfs_hint_paths_send(int fd, struct tipfs_hint_paths *req) {
  int rc = 0;
  if (req->header.count > 0) rc = ioctl(fd, TIPFS_IOC_HINT_PATHS, req);
  req->header.count = 0;
  req->bytes = 0;
  return rc == 0 ? 0 : -1;
}

/* Hints whole files by path, in order, batching as needed (the search-over-many-files case). */
static inline int tipfs_hint_files(int fd, const char *const *paths, size_t n, uint32_t source) {
  struct tipfs_hint_paths *req = (struct tipfs_hint_paths *)malloc(sizeof(*req));
  size_t i;
  int rc = 0;
  if (req == NULL) return -1;
  tipfs_hint_paths_init(req, source, TIPFS_STREAM_SELF, 0);
  for (i = 0; i < n && rc == 0; ++i) {
    if (tipfs_hint_paths_add(req, paths[i], 0, 0) == 0) continue;
    if (errno != ENOSPC) {
      rc = -1;
      break;
    }
    rc = tipfs_hint_paths_send(fd, req);
    if (rc == 0) rc = tipfs_hint_paths_add(req, paths[i], 0, 0);
  }
  if (rc == 0) rc = tipfs_hint_paths_send(fd, req);
  {
    int saved = errno;
    free(req);
    errno = saved;
  }
  return rc;
}

static inline int tipfs_hint_cancel_request(int fd, uint64_t stream, uint32_t epoch,
                                            uint32_t flags) {
  struct tipfs_cancel req;
  memset(&req, 0, sizeof(req));
  tipfs_hint_header_init(&req.header, TIPFS_SOURCE_MANUAL, stream, epoch, 0);
  req.flags = flags;
  return ioctl(fd, TIPFS_IOC_CANCEL, &req) == 0 ? 0 : -1;
}

/* Drops every outstanding hint of `stream` (TIPFS_STREAM_SELF: the caller's own). */
static inline int tipfs_hint_cancel(int fd, uint64_t stream) {
  return tipfs_hint_cancel_request(fd, stream, 0, 0);
}

/* Drops the hints of one epoch of `stream` (a speculation restart). */
static inline int tipfs_hint_cancel_epoch(int fd, uint64_t stream, uint32_t epoch) {
  return tipfs_hint_cancel_request(fd, stream, epoch, TIPFS_CANCEL_EPOCH);
}

/* Drops every hint of every stream of the calling process. */
static inline int tipfs_hint_cancel_all(int fd) {
  return tipfs_hint_cancel_request(fd, TIPFS_STREAM_SELF, 0, TIPFS_CANCEL_ALL);
}

/* Fills *out with the state of `stream` and the mount's cache counters. */
static inline int tipfs_hint_query(int fd, uint64_t stream, struct tipfs_query *out) {
  memset(out, 0, sizeof(*out));
  tipfs_hint_header_init(&out->header, TIPFS_SOURCE_MANUAL, stream, 0, 0);
  return ioctl(fd, TIPFS_IOC_QUERY, out) == 0 ? 0 : -1;
}

/* Lets the caller's descendants of the same user consume `stream` (TIPFS_SHARE_DESCENDANTS), or
 * stops it (flags 0). */
static inline int tipfs_hint_share(int fd, uint64_t stream, uint32_t flags) {
  struct tipfs_share req;
  memset(&req, 0, sizeof(req));
  tipfs_hint_header_init(&req.header, TIPFS_SOURCE_MANUAL, stream, 0, 0);
  req.flags = flags;
  return ioctl(fd, TIPFS_IOC_SHARE, &req) == 0 ? 0 : -1;
}

/* Declares the calling process a speculating child hinting for `stream` in `epoch` (see
 * TIPFS_IOC_SPEC_ATTACH); detach ends it. */
static inline int tipfs_hint_spec_attach(int fd, uint64_t stream, uint32_t epoch,
                                         int wait_for_data) {
  struct tipfs_spec_attach req;
  memset(&req, 0, sizeof(req));
  tipfs_hint_header_init(&req.header, TIPFS_SOURCE_SPECULATIVE, stream, epoch, 0);
  req.wait_for_data = wait_for_data ? 1u : 0u;
  return ioctl(fd, TIPFS_IOC_SPEC_ATTACH, &req) == 0 ? 0 : -1;
}

static inline int tipfs_hint_spec_detach(int fd) {
  struct tipfs_spec_attach req;
  memset(&req, 0, sizeof(req));
  tipfs_hint_header_init(&req.header, TIPFS_SOURCE_SPECULATIVE, TIPFS_STREAM_SELF, 0, 0);
  return ioctl(fd, TIPFS_IOC_SPEC_DETACH, &req) == 0 ? 0 : -1;
}

#ifdef __cplusplus
}
#endif

#endif /* TIPFS_HINT_H */
