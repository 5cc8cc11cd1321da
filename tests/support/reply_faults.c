/* Test-only LD_PRELOAD shim for the tipfs daemon: makes chosen FUSE replies fail the way a reply
 * to a request the kernel no longer waits for fails (libfuse returns -ENOENT), so the tests can
 * check what the daemon undoes then. $TIPFS_TEST_REPLY_FAULTS names a file of lines
 * "KIND COUNT PID" (KIND: open, buf): the next COUNT replies of that kind to requests made by
 * process PID answer EIO to the kernel instead of what the daemon sent, and return -ENOENT to the
 * daemon. Only the test's own requests fail: another process touching the mount meanwhile (under
 * ctest -j, any program that opens every tipfs mount) must not take the fault. Without the
 * variable nothing changes. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* True when the reply of `kind` to `req` must fail now (and counts it off the file). */
static int TakeFault(const char* kind, fuse_req_t req) {
  const char* path = getenv("TIPFS_TEST_REPLY_FAULTS");
  if (path == NULL) return 0;
  const long pid = (long)fuse_req_ctx(req)->pid;
  int fail = 0;
  pthread_mutex_lock(&g_mu);
  char kinds[8][16];
  long counts[8], pids[8];
  int n = 0;
  FILE* f = fopen(path, "r");
  if (f != NULL) {
    while (n < 8 && fscanf(f, "%15s %ld %ld", kinds[n], &counts[n], &pids[n]) == 3) ++n;
    fclose(f);
  }
  for (int i = 0; i < n; ++i) {
    if (strcmp(kinds[i], kind) == 0 && counts[i] > 0 && pids[i] == pid) {
      --counts[i];
      fail = 1;
    }
  }
  if (fail && (f = fopen(path, "w")) != NULL) {
    for (int i = 0; i < n; ++i) fprintf(f, "%s %ld %ld\n", kinds[i], counts[i], pids[i]);
    fclose(f);
  }
  pthread_mutex_unlock(&g_mu);
  return fail;
}

int fuse_reply_buf(fuse_req_t req, const char* buf, size_t size) {
  static int (*real)(fuse_req_t, const char*, size_t);
  if (real == NULL)
    real = (int (*)(fuse_req_t, const char*, size_t))dlsym(RTLD_NEXT, "fuse_reply_buf");
  if (TakeFault("buf", req)) {
    fuse_reply_err(req, EIO);
    return -ENOENT;
  }
  return real(req, buf, size);
}

int fuse_reply_open(fuse_req_t req, const struct fuse_file_info* fi) {
  static int (*real)(fuse_req_t, const struct fuse_file_info*);
  if (real == NULL) {
    real = (int (*)(fuse_req_t, const struct fuse_file_info*))dlsym(RTLD_NEXT, "fuse_reply_open");
  }
  if (TakeFault("open", req)) {
    fuse_reply_err(req, EIO);
    return -ENOENT;
  }
  return real(req, fi);
}
