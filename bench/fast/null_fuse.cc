// tipfs-null-fuse: the FUSE ceiling of this machine (issue 11, bench/fast/README.md "A measured
// FUSE ceiling"). A libfuse low-level file system with one regular file, /file, of --size bytes
// served from memory, mounted with the session settings of tipfs's daemon (fusefs/daemon.cc,
// fusefs/fuse_bridge.cc OnInit and SetOpenFlags in direct mode): FOPEN_DIRECT_IO, max_write and
// max_readahead 1 MiB, max_background 64, the multithreaded loop with --threads workers, all of
// them kept idle. A read is answered with one writev from the file's bytes, as tipfs answers a
// hit (fuse_reply_iov over the cache's buffers), so what tipfs spends beyond this file system on
// the same fio run is the daemon's own work, and what this one reaches is what FUSE allows.
//
// --clone-fd and --splice try libfuse's options on the same path (one /dev/fuse descriptor per
// worker; replies of two pages or more spliced through a pipe, fuse_reply_data).
//
// Runs in the foreground until unmounted (fusermount3 -u, umount) or signalled. Single-threaded
// set-up; the handlers only read the file's bytes, which never change after the mount.
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace {

constexpr fuse_ino_t kFileIno = 2;
constexpr char kFileName[] = "file";

struct NullFs {
  std::vector<char> bytes;  // the file's contents; constant while mounted
  bool splice = false;
};

NullFs* FsOf(fuse_req_t req) { return static_cast<NullFs*>(fuse_req_userdata(req)); }

struct stat StatOf(const NullFs& fs, fuse_ino_t ino) {
  struct stat st = {};
  st.st_ino = ino;
  st.st_uid = getuid();
  st.st_gid = getgid();
  if (ino == FUSE_ROOT_ID) {
    st.st_mode = S_IFDIR | 0755;
    st.st_nlink = 2;
  } else {
    st.st_mode = S_IFREG | 0644;
    st.st_nlink = 1;
    st.st_size = static_cast<off_t>(fs.bytes.size());
    st.st_blocks = st.st_size / 512;
  }
  st.st_blksize = 128 * 1024;  // tipfs's st_blksize for a 64 KiB stripe unit
  return st;
}

void OnInit(void* userdata, fuse_conn_info* conn) {
  auto* fs = static_cast<NullFs*>(userdata);
  // As tipfs's OnInit (fusefs/fuse_bridge.cc).
  conn->max_write = 1024 * 1024;
  conn->max_readahead = 1024 * 1024;
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
  if (fs->splice) {
    if (conn->capable & FUSE_CAP_SPLICE_WRITE) {
      conn->want |= FUSE_CAP_SPLICE_WRITE;
    } else {
      std::fprintf(stderr, "tipfs-null-fuse: the kernel offers no splice writes\n");
    }
  }
}

void OnLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (parent != FUSE_ROOT_ID || std::strcmp(name, kFileName) != 0) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  fuse_entry_param e = {};
  e.ino = kFileIno;
  e.generation = 1;
  e.attr = StatOf(*FsOf(req), kFileIno);
  e.attr_timeout = 10.0;  // tipfs's default --attr-timeout
  e.entry_timeout = 10.0;
  fuse_reply_entry(req, &e);
}

void OnGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  if (ino != FUSE_ROOT_ID && ino != kFileIno) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  struct stat st = StatOf(*FsOf(req), ino);
  fuse_reply_attr(req, &st, 10.0);
}

void OnOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (ino != kFileIno) {
    fuse_reply_err(req, EISDIR);
    return;
  }
  if ((fi->flags & O_ACCMODE) != O_RDONLY) {
    fuse_reply_err(req, EROFS);
    return;
  }
  fi->direct_io = 1;  // tipfs --data-cache direct
  fi->noflush = 1;
  fuse_reply_open(req, fi);
}

void OnRead(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info*) {
  const NullFs& fs = *FsOf(req);
  const size_t start = std::min(static_cast<size_t>(off), fs.bytes.size());
  const size_t n = std::min(size, fs.bytes.size() - start);
  char* data = const_cast<char*>(fs.bytes.data()) + start;
  if (fs.splice) {
    fuse_bufvec buf = FUSE_BUFVEC_INIT(n);
    buf.buf[0].mem = data;
    fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
    return;
  }
  iovec iov{data, n};
  fuse_reply_iov(req, &iov, 1);
}

void OnOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (ino != FUSE_ROOT_ID) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
  fuse_reply_open(req, fi);
}

void OnReaddir(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info*) {
  std::vector<char> buffer(size);
  size_t used = 0;
  const char* names[] = {".", "..", kFileName};
  const fuse_ino_t inos[] = {FUSE_ROOT_ID, FUSE_ROOT_ID, kFileIno};
  for (off_t i = off; i < 3; ++i) {
    struct stat st = StatOf(*FsOf(req), inos[i]);
    const size_t needed =
        fuse_add_direntry(req, buffer.data() + used, size - used, names[i], &st, i + 1);
    if (needed > size - used) break;
    used += needed;
  }
  fuse_reply_buf(req, buffer.data(), used);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tipfs-null-fuse: one file served from memory over FUSE, mounted as tipfs mounts"};
  std::string mountpoint;
  std::string size_text = "1G";
  uint32_t threads = 16;
  bool clone_fd = false;
  NullFs fs;
  app.add_option("mountpoint", mountpoint, "an empty directory")->required();
  app.add_option("--size", size_text, "bytes of /file (suffix K, M, G)")->capture_default_str();
  app.add_option("--threads", threads, "most FUSE workers (tipfs mount --fuse-threads)")
      ->capture_default_str();
  app.add_flag("--clone-fd", clone_fd, "one /dev/fuse descriptor per worker");
  app.add_flag("--splice", fs.splice, "splice replies of 2 pages or more (FUSE_CAP_SPLICE_WRITE)");
  CLI11_PARSE(app, argc, argv);

  char* end = nullptr;
  unsigned long long size = std::strtoull(size_text.c_str(), &end, 10);
  if (end == size_text.c_str()) {
    std::fprintf(stderr, "tipfs-null-fuse: --size %s is not a size\n", size_text.c_str());
    return 2;
  }
  switch (*end) {
    case 'G':
      size <<= 30;
      break;
    case 'M':
      size <<= 20;
      break;
    case 'K':
      size <<= 10;
      break;
    case '\0':
      break;
    default:
      std::fprintf(stderr, "tipfs-null-fuse: --size %s is not a size\n", size_text.c_str());
      return 2;
  }
  // A byte pattern that differs at every 4 KiB offset, so a reply from the wrong place shows.
  fs.bytes.resize(size);
  for (size_t i = 0; i < fs.bytes.size(); ++i) {
    fs.bytes[i] = static_cast<char>((i >> 12) * 31 + (i & 0xfff));
  }

  fuse_lowlevel_ops ops = {};
  ops.init = OnInit;
  ops.lookup = OnLookup;
  ops.getattr = OnGetattr;
  ops.open = OnOpen;
  ops.read = OnRead;
  ops.opendir = OnOpendir;
  ops.readdir = OnReaddir;
  std::string mount_opts = "fsname=tipfs-null,subtype=tipfs-null,default_permissions";
  std::vector<std::string> argv_strings = {"tipfs-null-fuse", "-o", mount_opts};
  std::vector<char*> fuse_argv;
  for (std::string& s : argv_strings) fuse_argv.push_back(s.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(fuse_argv.size()), fuse_argv.data());
  fuse_session* session = fuse_session_new(&args, &ops, sizeof(ops), &fs);
  if (session == nullptr) return 1;
  int rc = 1;
  if (fuse_set_signal_handlers(session) == 0) {
    if (fuse_session_mount(session, mountpoint.c_str()) == 0) {
      fuse_loop_config* config = fuse_loop_cfg_create();
      // As tipfs's Session::Loop: at most `threads` workers, none retired when idle.
      fuse_loop_cfg_set_max_threads(config, threads);
      fuse_loop_cfg_set_idle_threads(config, threads);
      fuse_loop_cfg_set_clone_fd(config, clone_fd ? 1 : 0);
      rc = fuse_session_loop_mt(session, config) == 0 ? 0 : 1;
      fuse_loop_cfg_destroy(config);
      fuse_session_unmount(session);
    }
    fuse_remove_signal_handlers(session);
  }
  fuse_session_destroy(session);
  return rc;
}
