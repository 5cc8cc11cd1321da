/* libtipspec: automatic hints by speculative execution (SpecHint, Chang & Gibson, OSDI 1999).
 *
 * Preloaded by `tipfs run` (LD_PRELOAD=libtipspec.so, configured by TIPSPEC_* variables), or
 * linked into a program that starts and stops speculation itself through this API. While it is
 * on, a read of a file on a tipfs mount forks a speculating child that runs the program ahead
 * at idle priority, in a seccomp sandbox, turning its future reads into hints. See libtipspec(3).
 *
 * Thread-safety: every function may be called from any thread. Speculation follows the reads of
 * one thread of the program (the first that reads a watched file).
 */
#ifndef TIPFS_SPEC_H
#define TIPFS_SPEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TIPSPEC_API_VERSION 2u

/* tipspec_options.wait_for_data (TIPSPEC_WAIT): which of the child's reads of data not cached
 * wait for it. */
#define TIPSPEC_WAIT_NEVER 0u   /* none: on with whatever the buffer holds */
#define TIPSPEC_WAIT_ALWAYS 1u  /* all: follow every true data dependency */
#define TIPSPEC_WAIT_LEARNED 2u /* the default: at the read sites learned to be data-critical */

struct tipspec_options {
  uint32_t version;           /* TIPSPEC_API_VERSION */
  uint32_t wait_for_data;     /* TIPSPEC_WAIT_LEARNED (default), _NEVER or _ALWAYS */
  const char* mount;          /* mount to watch; NULL or "": every tipfs mount */
  uint32_t max_ahead_hints;   /* bounded run-ahead, reads (default 512) */
  uint32_t stall_usec;        /* fork only after a read this slow (default 200) */
  uint64_t max_ahead_bytes;   /* bounded run-ahead, bytes (default 32 MiB) */
  uint32_t lockstep;          /* 1: wait for a lagging child instead of restarting (tests) */
  uint32_t print_stats;       /* 1: print counters at exit (stderr, or stats_file) */
  const char* hint_log;       /* tests: hints as lines in this file instead of ioctls */
  const char* stats_file;     /* NULL: stderr */
  uint32_t max_behind_reads;  /* reads a child may lag before it is replaced (0: default 64) */
  uint32_t overhead_permille; /* fork only while speculation has cost the program less than
                                 this share of its run time, in 1/1000 (0: default 10 = 1%;
                                 UINT32_MAX: no limit) */
  uint64_t reserved[3];
};

/* Why speculation stopped or restarted, and how well it did. Cumulative for the process. */
struct tipspec_counters {
  uint64_t reads_checked; /* reads of watched files checked against the hint log */
  uint64_t hints_issued;  /* reads the children logged and hinted */
  uint64_t hint_bytes_issued;
  uint64_t hints_consumed;           /* hinted blocks the program's reads consumed, as the mount
                                        counted them (mount_consumed_*); without a mount (hint
                                        log), reads_on_track */
  uint64_t reads_without_data;       /* child reads the mount answered without data (EAGAIN) */
  uint64_t forks;                    /* speculating children started */
  uint64_t restarts;                 /* of those, started after an earlier child stopped */
  uint64_t offtrack_mismatch;        /* the program read something else than the next hint */
  uint64_t offtrack_behind;          /* the child lagged more than max_behind_reads reads */
  uint64_t child_ended_program_exit; /* the child ran to the program's end */
  uint64_t child_ended_forbidden;    /* the child tried a call the sandbox denies */
  uint64_t child_ended_stream_read;  /* ... a read of a shared pipe, socket or terminal, or an open
                                        of a FIFO, socket or device */
  uint64_t child_ended_shared_write; /* ... a write mapping of shared memory */
  uint64_t child_ended_signal;       /* ... a signal to another process */
  uint64_t child_killed_by_sandbox;  /* the kernel killed it (seccomp) */
  uint64_t child_died_by_signal;     /* it crashed (e.g. on data it never received) */
  uint64_t start_failures;           /* a child could not attach or sandbox itself */
  uint64_t last_forbidden_syscall;   /* the x86-64 number of the last denied call */
  uint32_t epoch;                    /* current speculation epoch */
  uint32_t active;                   /* 1 while speculation is on */
  uint64_t hint_bytes_consumed;      /* bytes of the hints counted in hints_consumed */
  uint64_t reads_behind;             /* program reads done before its child had logged them */
  uint64_t forks_deferred;           /* fork opportunities skipped: back-off after lost
                                        children, break-even, the overhead budget, no free log */
  uint64_t overhead_nanos;           /* estimated cost to the program: forks, ending children,
                                        copy-on-write faults after forks, the children's CPU
                                        and the daemon's work for their reads */
  uint64_t children_waiting;         /* of the forks, children that waited for every read */
  uint64_t reserved[3];
  /* Since TIPSPEC_API_VERSION 2 (tipspec_query_counters): */
  uint64_t hints_clean;            /* logged reads made on real data: up to and including each
                                      child's first read of data it did not get */
  uint64_t hints_tainted;          /* logged reads after it (made on garbage) */
  uint64_t reads_on_track;         /* program reads that matched its child's next logged read */
  uint64_t mount_consumed_clean;   /* the mount's count of this process's consumed hinted
                                      blocks: speculative (clean) */
  uint64_t mount_consumed_tainted; /* ... speculative_tainted */
  uint64_t sites_known;            /* data-critical read sites known at start (earlier runs) */
  uint64_t sites_learned;          /* sites learned in this run */
  uint64_t waits_at_sites;         /* child reads that waited at a learned site */
  uint64_t forks_at_once;          /* children forked at the read right after a child whose
                                      hints were used ended (no stall, no back-off) */
  /* Hints from the last run of the same command (TIPSPEC_HISTORY): */
  uint64_t history_hints;          /* recorded reads disclosed as history hints */
  uint64_t history_hint_bytes;     /* their bytes */
  uint64_t history_cancelled;      /* of those, cancelled unread when the program's reads
                                      stopped matching the recording */
  uint64_t history_files_changed;  /* recorded files not hinted: changed (inode, size, mtime),
                                      gone, or off the mount */
  uint64_t history_recorded;       /* reads (sequential ones coalesced) recorded in this run */
  uint64_t mount_consumed_history; /* the mount's count of this process's consumed hinted blocks:
                                      history */
  uint64_t reserved2[1];
  /* Added later (tipspec_query_counters; an older library leaves them as they were): how each
   * child paid off, and why fork opportunities were turned down (forks_deferred is their sum). */
  uint64_t children_paid;             /* ended children whose used hints saved the program more
                                         stall time than they cost it */
  uint64_t children_lost;             /* ended children that did not */
  uint64_t saved_nanos;               /* estimated stall time the used hints saved */
  uint64_t child_cpu_nanos;           /* CPU time the children used (part of overhead_nanos) */
  uint64_t forks_deferred_backoff;    /* skipped: back-off after lost children */
  uint64_t forks_deferred_break_even; /* the stall was shorter than what each used hint of the
                                         last lost child would have had to save */
  uint64_t forks_deferred_budget;     /* overhead_nanos - saved_nanos over the budget */
  uint64_t forks_deferred_no_log;     /* every hint log still held by a dying child */
  uint64_t ended_over_budget;         /* children ended while the program read ahead of them,
                                         once their own cost passed the first allowance */
  /* Added later still: learned waits that did not earn their keep (TIPSPEC_WAIT=learned). */
  uint64_t site_waits_dropped; /* 1 when later children of the run were given no learned
                                  sites: children waiting there at most of their reads
                                  lost twice in a row */
  uint64_t sites_refuted;      /* learned sites forgotten (not kept, not learned again):
                                  after the drop a child without the waits paid */
  /* Added later still (TIPSPEC_PREDICT): */
  uint64_t reads_predicted;     /* child reads at learned sites given the bytes of an earlier
                                   read there instead of waiting for data not cached */
  uint64_t sites_unpredictable; /* learned sites where a child went astray soon after such a
                                   read: later children of the run wait there */
  /* Added later still (whole-file predictions): */
  uint64_t reads_predicted_whole; /* of reads_predicted, reads given a whole kept file (and
                                     then its end) */
  uint64_t sites_not_whole;       /* learned sites where a whole file was blamed: later
                                     children of the run are given padded bytes there */
};

/* Fills `options` with the defaults (the TIPSPEC_* variables are not consulted). */
void tipspec_options_init(struct tipspec_options* options);

/* Starts speculation. NULL: read the TIPSPEC_* environment variables. Returns 0, or a negative
 * errno: -EALREADY when already on, -ENODEV when the mount is not a FUSE mount (and no hint
 * log is set), -EINVAL for a bad option. */
int tipspec_start(const struct tipspec_options* options);

/* Ends speculation: kills and reaps the child and cancels its hints. Returns 0 or -errno. */
int tipspec_stop(void);

/* Copies the counters up to reserved[3] (the fields of version 1). Returns 0 or -EINVAL. */
int tipspec_query(struct tipspec_counters* counters);

/* Copies min(size, sizeof(struct tipspec_counters)) bytes of the counters: pass
 * sizeof(*counters). Returns 0 or -EINVAL. */
int tipspec_query_counters(struct tipspec_counters* counters, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* TIPFS_SPEC_H */
