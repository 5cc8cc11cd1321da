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
#include <string.h>
#include <sys/ioctl.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TIPFS_HINT_VERSION 1u

/* Where a hint came from. Speculative hints are discounted by their measured accuracy. */
enum tipfs_hint_source {
  TIPFS_SOURCE_MANUAL = 0,      /* the program itself */
  TIPFS_SOURCE_SPECULATIVE = 1, /* libtipspec's speculating child */
  TIPFS_SOURCE_WARMUP = 2,      /* `tipfs hint` from the shell: prefetch in this order */
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
 * header.epoch (a speculation restart). header.count is ignored. */
#define TIPFS_CANCEL_ALL 1u
#define TIPFS_CANCEL_EPOCH 2u
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
  uint64_t reserved[8];
};

/* TIPFS_IOC_SPEC_ATTACH / DETACH: libtipspec's speculating child declares itself. While attached,
 * the calling process's reads never wait for the disk: data in the cache is returned, data not
 * in the cache is hinted (source speculative, header.stream / header.epoch) and the read fails
 * with EAGAIN, so that nothing the child did not really read can enter any cache. */
struct tipfs_spec_attach {
  struct tipfs_hint_header header; /* stream: the parent's stream; epoch: the current epoch */
  uint32_t wait_for_data; /* 1: reads of uncached data wait for it (follow true dependencies) */
  uint32_t reserved;
};

#define TIPFS_IOC_MAGIC 'T'
#define TIPFS_IOC_HINT_FD _IOW(TIPFS_IOC_MAGIC, 1, struct tipfs_hint_fd)
#define TIPFS_IOC_HINT_PATHS _IOW(TIPFS_IOC_MAGIC, 2, struct tipfs_hint_paths)
#define TIPFS_IOC_CANCEL _IOW(TIPFS_IOC_MAGIC, 3, struct tipfs_cancel)
#define TIPFS_IOC_QUERY _IOWR(TIPFS_IOC_MAGIC, 4, struct tipfs_query)
#define TIPFS_IOC_SPEC_ATTACH _IOW(TIPFS_IOC_MAGIC, 5, struct tipfs_spec_attach)
#define TIPFS_IOC_SPEC_DETACH _IOW(TIPFS_IOC_MAGIC, 6, struct tipfs_spec_attach)

#ifdef __cplusplus
}
#endif

#endif /* TIPFS_HINT_H */
