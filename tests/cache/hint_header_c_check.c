/* Compiled as C (C99 or later) to prove include/tipfs/hint.h is valid C with the project's
 * warnings; the C++ test calls this to check what C code builds. */
#include <tipfs/hint.h>

int tipfs_test_build_paths_in_c(struct tipfs_hint_paths *req) {
  tipfs_hint_paths_init(req, TIPFS_SOURCE_WARMUP, TIPFS_STREAM_SELF, 3);
  if (tipfs_hint_paths_add(req, "dir/file-one", 0, 0) != 0) return -1;
  return tipfs_hint_paths_add(req, "/mnt/x/two", 4096, 8192);
}
