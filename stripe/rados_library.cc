// Forwarders to librados.so.2, opened on first use; see rados_library.h.
#include "stripe/rados_library.h"

#include <dlfcn.h>
#include <rados/librados.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tipfs::stripe {

namespace {

// Every librados function tipfs calls: (return type, name, parameters, arguments), exactly as
// librados.h declares it (the compiler checks each definition below against the header).
#define TIPFS_RADOS_FUNCTIONS(X)                                                                   \
  X(int, rados_aio_create_completion2,                                                             \
    (void *cb_arg, rados_callback_t cb_complete, rados_completion_t *pc),                          \
    (cb_arg, cb_complete, pc))                                                                     \
  X(int, rados_aio_flush, (rados_ioctx_t io), (io))                                                \
  X(int, rados_aio_get_return_value, (rados_completion_t c), (c))                                  \
  X(int, rados_aio_read,                                                                           \
    (rados_ioctx_t io, const char *oid, rados_completion_t completion, char *buf, size_t len,      \
     uint64_t off),                                                                                \
    (io, oid, completion, buf, len, off))                                                          \
  X(void, rados_aio_release, (rados_completion_t c), (c))                                          \
  X(int, rados_aio_read_op_operate,                                                                \
    (rados_read_op_t read_op, rados_ioctx_t io, rados_completion_t completion, const char *oid,    \
     int flags),                                                                                   \
    (read_op, io, completion, oid, flags))                                                         \
  X(int, rados_aio_remove, (rados_ioctx_t io, const char *oid, rados_completion_t completion),     \
    (io, oid, completion))                                                                         \
  X(int, rados_aio_stat,                                                                           \
    (rados_ioctx_t io, const char *o, rados_completion_t completion, uint64_t *psize,              \
     time_t *pmtime),                                                                              \
    (io, o, completion, psize, pmtime))                                                            \
  X(int, rados_aio_wait_for_complete, (rados_completion_t c), (c))                                 \
  X(int, rados_aio_write_op_operate,                                                               \
    (rados_write_op_t write_op, rados_ioctx_t io, rados_completion_t completion, const char *oid,  \
     time_t *mtime, int flags),                                                                    \
    (write_op, io, completion, oid, mtime, flags))                                                 \
  X(int, rados_break_lock,                                                                         \
    (rados_ioctx_t io, const char *o, const char *name, const char *client, const char *cookie),   \
    (io, o, name, client, cookie))                                                                 \
  X(void, rados_buffer_free, (char *buf), (buf))                                                   \
  X(int, rados_cluster_fsid, (rados_t cluster, char *buf, size_t len), (cluster, buf, len))        \
  X(int, rados_cluster_stat, (rados_t cluster, struct rados_cluster_stat_t * result),              \
    (cluster, result))                                                                             \
  X(int, rados_conf_get, (rados_t cluster, const char *option, char *buf, size_t len),             \
    (cluster, option, buf, len))                                                                   \
  X(int, rados_conf_parse_env, (rados_t cluster, const char *var), (cluster, var))                 \
  X(int, rados_conf_read_file, (rados_t cluster, const char *path), (cluster, path))               \
  X(int, rados_conf_set, (rados_t cluster, const char *option, const char *value),                 \
    (cluster, option, value))                                                                      \
  X(int, rados_connect, (rados_t cluster), (cluster))                                              \
  X(int, rados_create2,                                                                            \
    (rados_t * pcluster, const char *const clustername, const char *const name, uint64_t flags),   \
    (pcluster, clustername, name, flags))                                                          \
  X(rados_read_op_t, rados_create_read_op, (void), ())                                             \
  X(rados_write_op_t, rados_create_write_op, (void), ())                                           \
  X(int, rados_ioctx_create, (rados_t cluster, const char *pool_name, rados_ioctx_t *ioctx),       \
    (cluster, pool_name, ioctx))                                                                   \
  X(void, rados_ioctx_destroy, (rados_ioctx_t io), (io))                                           \
  X(int64_t, rados_ioctx_get_id, (rados_ioctx_t io), (io))                                         \
  X(void, rados_ioctx_set_namespace, (rados_ioctx_t io, const char *nspace), (io, nspace))         \
  X(ssize_t, rados_list_lockers,                                                                   \
    (rados_ioctx_t io, const char *o, const char *name, int *exclusive, char *tag,                 \
     size_t *tag_len, char *clients, size_t *clients_len, char *cookies, size_t *cookies_len,      \
     char *addrs, size_t *addrs_len),                                                              \
    (io, o, name, exclusive, tag, tag_len, clients, clients_len, cookies, cookies_len, addrs,      \
     addrs_len))                                                                                   \
  X(int, rados_lock_exclusive,                                                                     \
    (rados_ioctx_t io, const char *oid, const char *name, const char *cookie, const char *desc,    \
     struct timeval *duration, uint8_t flags),                                                     \
    (io, oid, name, cookie, desc, duration, flags))                                                \
  X(int, rados_mon_command,                                                                        \
    (rados_t cluster, const char **cmd, size_t cmdlen, const char *inbuf, size_t inbuflen,         \
     char **outbuf, size_t *outbuflen, char **outs, size_t *outslen),                              \
    (cluster, cmd, cmdlen, inbuf, inbuflen, outbuf, outbuflen, outs, outslen))                     \
  X(void, rados_nobjects_list_close, (rados_list_ctx_t ctx), (ctx))                                \
  X(int, rados_nobjects_list_next2,                                                                \
    (rados_list_ctx_t ctx, const char **entry, const char **key, const char **nspace,              \
     size_t *entry_size, size_t *key_size, size_t *nspace_size),                                   \
    (ctx, entry, key, nspace, entry_size, key_size, nspace_size))                                  \
  X(int, rados_nobjects_list_open, (rados_ioctx_t io, rados_list_ctx_t * ctx), (io, ctx))          \
  X(void, rados_omap_get_end, (rados_omap_iter_t iter), (iter))                                    \
  X(int, rados_omap_get_next2,                                                                     \
    (rados_omap_iter_t iter, char **key, char **val, size_t *key_len, size_t *val_len),            \
    (iter, key, val, key_len, val_len))                                                            \
  X(int, rados_read, (rados_ioctx_t io, const char *oid, char *buf, size_t len, uint64_t off),     \
    (io, oid, buf, len, off))                                                                      \
  X(void, rados_read_op_omap_get_keys2,                                                            \
    (rados_read_op_t read_op, const char *start_after, uint64_t max_return,                        \
     rados_omap_iter_t *iter, unsigned char *pmore, int *prval),                                   \
    (read_op, start_after, max_return, iter, pmore, prval))                                        \
  X(int, rados_read_op_operate,                                                                    \
    (rados_read_op_t read_op, rados_ioctx_t io, const char *oid, int flags),                       \
    (read_op, io, oid, flags))                                                                     \
  X(void, rados_read_op_stat,                                                                      \
    (rados_read_op_t read_op, uint64_t * psize, time_t * pmtime, int *prval),                      \
    (read_op, psize, pmtime, prval))                                                               \
  X(void, rados_release_read_op, (rados_read_op_t read_op), (read_op))                             \
  X(void, rados_release_write_op, (rados_write_op_t write_op), (write_op))                         \
  X(int, rados_remove, (rados_ioctx_t io, const char *oid), (io, oid))                             \
  X(void, rados_shutdown, (rados_t cluster), (cluster))                                            \
  X(int, rados_unlock, (rados_ioctx_t io, const char *o, const char *name, const char *cookie),    \
    (io, o, name, cookie))                                                                         \
  X(int, rados_write,                                                                              \
    (rados_ioctx_t io, const char *oid, const char *buf, size_t len, uint64_t off),                \
    (io, oid, buf, len, off))                                                                      \
  X(int, rados_write_full, (rados_ioctx_t io, const char *oid, const char *buf, size_t len),       \
    (io, oid, buf, len))                                                                           \
  X(void, rados_write_op_create, (rados_write_op_t write_op, int exclusive, const char *category), \
    (write_op, exclusive, category))                                                               \
  X(void, rados_write_op_omap_rm_keys,                                                             \
    (rados_write_op_t write_op, const char *const *keys, size_t keys_len),                         \
    (write_op, keys, keys_len))                                                                    \
  X(void, rados_write_op_omap_set,                                                                 \
    (rados_write_op_t write_op, const char *const *keys, const char *const *vals,                  \
     const size_t *lens, size_t num),                                                              \
    (write_op, keys, vals, lens, num))                                                             \
  X(int, rados_write_op_operate,                                                                   \
    (rados_write_op_t write_op, rados_ioctx_t io, const char *oid, time_t *mtime, int flags),      \
    (write_op, io, oid, mtime, flags))                                                             \
  X(void, rados_write_op_truncate, (rados_write_op_t write_op, uint64_t offset),                   \
    (write_op, offset))                                                                            \
  X(void, rados_write_op_write,                                                                    \
    (rados_write_op_t write_op, const char *buffer, size_t len, uint64_t offset),                  \
    (write_op, buffer, len, offset))

struct Library {
  void *handle = nullptr;
  std::string error;  // empty when every function resolved
};

#define TIPFS_RADOS_NAME(ret, name, params, args) #name,
constexpr const char *kFunctionNames[] = {TIPFS_RADOS_FUNCTIONS(TIPFS_RADOS_NAME)};
#undef TIPFS_RADOS_NAME

Library Open() {
  Library library;
  // RTLD_LOCAL: librados' symbols serve only these forwarders, never another library's lookups.
  library.handle = dlopen(TIPFS_LIBRADOS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (library.handle == nullptr) {
    const char *why = dlerror();
    library.error = std::string(why != nullptr ? why : TIPFS_LIBRADOS_SONAME) +
                    " (RADOS disks need librados: install librados2)";
    return library;
  }
  for (const char *name : kFunctionNames) {
    if (dlsym(library.handle, name) == nullptr) {
      library.error =
          std::string(TIPFS_LIBRADOS_SONAME " has no ") + name + " (a librados2 too old for tipfs)";
      return library;
    }
  }
  return library;
}

const Library &Loaded() {
  static const Library library = Open();  // thread-safe: the first caller opens, others wait
  return library;
}

template <typename Function>
Function Resolve(const char *name) {
  const Library &library = Loaded();
  if (!library.error.empty()) {
    // A forwarder reached before LoadRadosLibrary succeeded: no RadosCluster can exist.
    std::fprintf(stderr, "INTERNAL ERROR: librados called without it: %s\n", library.error.c_str());
    std::abort();
  }
  return reinterpret_cast<Function>(dlsym(library.handle, name));
}

}  // namespace

Status LoadRadosLibrary() {
  const Library &library = Loaded();
  if (!library.error.empty()) return Status::FromErrno(ENOSYS, library.error);
  return Status::OK();
}

}  // namespace tipfs::stripe

// The definitions the linker binds tipfs's calls to (C linkage, librados' names). Each resolves
// its librados function once, at its first call.
#define TIPFS_RADOS_FORWARD(ret, name, params, args)                           \
  extern "C" ret name params {                                                 \
    static const auto real = tipfs::stripe::Resolve<decltype(&::name)>(#name); \
    return real args;                                                          \
  }
TIPFS_RADOS_FUNCTIONS(TIPFS_RADOS_FORWARD)
