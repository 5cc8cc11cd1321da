#include "fusefs/daemon.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "cache/file_cache.h"
#include "fsck/fsck.h"
#include "fusefs/control_files.h"
#include "fusefs/disk_array.h"
#include "fusefs/fuse_bridge.h"
#include "fusefs/fuse_ring.h"
#include "fusefs/hint_ioctls.h"
#include "fusefs/kernel_readahead.h"
#include "fusefs/metrics_server.h"
#include "fusefs/stats_report.h"
#include "stripe/disk_name.h"
#include "stripe/striped_io.h"
#include "stripe/volume.h"
#include "util/clock.h"
#include "util/durable_file.h"
#include "util/mount_table.h"

namespace tipfs::fusefs {
namespace {

// The fuse_session and its mount, torn down in the right order on every path.
class Session {
 public:
  ~Session() {
    if (session_ == nullptr) return;
    StopRing(nullptr);
    if (mounted_) fuse_session_unmount(session_);
    if (signals_) fuse_remove_signal_handlers(session_);
    fuse_session_destroy(session_);
  }

  Status Start(FuseBridge* bridge, const MountOptions& options, const std::string& fsname) {
    if (options.fuse_io_uring) {
      Status offered = CheckKernelOffersFuseRing();
      if (!offered.ok()) return offered.WithContext("--fuse-io-uring on");
    }
    std::string mount_opts = "fsname=" + fsname + ",subtype=tipfs,default_permissions";
    if (options.allow_other) mount_opts += ",allow_other";
    for (const std::string& flag : options.kernel_flags) mount_opts += "," + flag;
    std::vector<std::string> argv_strings = {"tipfs", "-o", mount_opts};
    std::vector<char*> argv;
    for (std::string& s : argv_strings) argv.push_back(s.data());
    fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
    session_ = fuse_session_new(&args, FuseBridge::Operations(), sizeof(fuse_lowlevel_ops), bridge);
    if (session_ == nullptr) return Status::InvalidArgument("cannot create a FUSE session");
    if (fuse_set_signal_handlers(session_) != 0) {
      return Status::IOError("cannot install signal handlers");
    }
    signals_ = true;
    if (fuse_session_mount(session_, options.mountpoint.c_str()) != 0) {
      return Status::IOError("mount " + options.mountpoint +
                             ": the kernel refused the FUSE mount (is /dev/fuse usable? "
                             "allow_other needs user_allow_other in /etc/fuse.conf)");
    }
    mounted_ = true;
    if (options.fuse_io_uring) {
      ring_ = std::make_unique<FuseRing>(session_, bridge->fs(), bridge->statistics(),
                                         options.fuse_threads);
      bridge->set_ring(ring_.get());
      return ring_->Attach();
    }
    return Status::OK();
  }

  // Stops taking requests over io_uring (FuseRing::StopServing), lets `drain` wait for the reads
  // the ring's threads started (their replies still go out), then closes the rings. After the
  // loop, before anything is made durable, so that no request is served after that.
  void StopRing(const std::function<void()>& drain) {
    if (ring_ == nullptr) return;
    ring_->StopServing();
    if (drain) drain();
    ring_->Close();
  }

  // Drops the kernel's cached attributes of `ino` (attributes only: the pages stay).
  void InvalidateAttributes(uint64_t ino) {
    if (session_ != nullptr) (void)fuse_lowlevel_notify_inval_inode(session_, ino, -1, 0);
  }

  int Loop(uint32_t threads) {
    fuse_loop_config* config = fuse_loop_cfg_create();
    fuse_loop_cfg_set_max_threads(config, threads);
    // Idle workers are kept, never retired: with asynchronous reads a worker is busy for a few
    // microseconds per request, so under many readers the count of idle ones swings across any
    // lower bound many times a second, and libfuse retired a worker (freeing its 1 MiB request
    // buffer, unmapping its stack) and started a new one each time: at 32 readers the whole set of
    // workers was replaced every half second (issue 11, bench/fast/README.md "Per-miss account").
    // At most `threads` of them exist either way.
    fuse_loop_cfg_set_idle_threads(config, threads);
    int rc = fuse_session_loop_mt(session_, config);
    fuse_loop_cfg_destroy(config);
    return rc;
  }

 private:
  fuse_session* session_ = nullptr;
  std::unique_ptr<FuseRing> ring_;  // stopped and closed before the session goes
  bool signals_ = false;
  bool mounted_ = false;
};

// The pid in `pid_file` when it names a running tipfs daemon other than this process, else 0.
pid_t LiveDaemon(const std::string& pid_file) {
  pid_t pid = 0;
  std::ifstream(pid_file) >> pid;
  if (pid <= 0 || pid == getpid()) return 0;
  std::string comm;
  std::ifstream("/proc/" + std::to_string(pid) + "/comm") >> comm;
  return comm == "tipfs" ? pid : 0;
}

// A daemon of this volume that is still running: when the volume is mounted, the mount is
// refused; when it was just unmounted (umount(8) returns before the daemon has made everything
// durable and exited), the new one waits for it to finish rather than race it for the store.
Status WaitForEarlierDaemon(const std::string& pid_file, const std::string& disk0) {
  const pid_t live = LiveDaemon(pid_file);
  if (live == 0) return Status::OK();  // none, or it died (the mount recovers, see below)
  for (const MountEntry& entry : ReadMountTable()) {
    if (entry.fstype == "fuse.tipfs" && entry.source == disk0) {
      return Status::Busy("volume " + disk0 + " is already mounted at " + entry.mountpoint +
                          " (daemon pid " + std::to_string(live) + ")");
    }
  }
  for (int waited_ms = 0; waited_ms < 60'000; waited_ms += 20) {
    if (LiveDaemon(pid_file) == 0) return Status::OK();
    usleep(20'000);
  }
  return Status::Busy("volume " + disk0 + " is still served by daemon pid " +
                      std::to_string(LiveDaemon(pid_file)) +
                      ", which has not exited a minute after its unmount");
}

// chmod `path` to `mode` unless it has it already (a read-only backing store that is right is
// no error).
Status EnsureMode(const std::string& path, mode_t mode) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return ErrnoStatus("stat " + path);
  if (S_ISLNK(st.st_mode) || (st.st_mode & 07777) == mode) return Status::OK();
  if (chmod(path.c_str(), mode) != 0) return ErrnoStatus("make " + path + " private (chmod)");
  return Status::OK();
}

}  // namespace

Status MakeVolumePrivate(const stripe::Label& label) {
  for (const std::string& disk : label.disk_names) {
    // A RADOS disk's objects are guarded by the cluster's caps (cephx), not by file modes.
    if (stripe::IsRadosName(disk)) continue;
    const std::string objects = disk + "/objects";
    TIPFS_RETURN_IF_ERROR(EnsureMode(objects, 0700));
    if (DIR* dir = opendir(objects.c_str())) {
      while (dirent* d = readdir(dir)) {
        if (d->d_name[0] == '.' || d->d_type != DT_DIR) continue;
        Status st = EnsureMode(objects + "/" + d->d_name, 0700);
        if (!st.ok()) {
          closedir(dir);
          return st;
        }
      }
      closedir(dir);
    }
  }
  const std::string meta = stripe::MetaPath(label);
  TIPFS_RETURN_IF_ERROR(EnsureMode(meta, 0700));
  DIR* dir = opendir(meta.c_str());
  if (dir == nullptr) return ErrnoStatus("list " + meta);
  Status st;
  while (dirent* d = readdir(dir)) {
    if (d->d_name[0] == '.') continue;
    const std::string path = meta + "/" + d->d_name;
    st = EnsureMode(path, d->d_type == DT_DIR ? 0700 : 0600);
    if (!st.ok()) break;
  }
  closedir(dir);
  return st;
}

std::string PidFilePath(const std::string& disk0) { return disk0 + "/tipfs.pid"; }

Status CheckMountpoint(const std::string& mountpoint) {
  const std::string canonical = CanonicalPath(mountpoint);
  const MountEntry* there = nullptr;
  std::vector<MountEntry> table = ReadMountTable();
  for (const MountEntry& entry : table) {
    if (entry.mountpoint == canonical) there = &entry;  // the last one is the visible one
  }
  struct stat st;
  if (stat(mountpoint.c_str(), &st) != 0) {
    if (DaemonGoneError(errno) && there != nullptr) {
      return Status::FromErrno(ENOTCONN, "mountpoint " + mountpoint +
                                             ": the daemon of the tipfs mount there is gone; run "
                                             "tipfs umount " +
                                             mountpoint + " first");
    }
    return ErrnoStatus("mountpoint " + mountpoint);
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::FromErrno(ENOTDIR, "mountpoint " + mountpoint + " is not a directory");
  }
  if (there != nullptr) {
    // Never let a caller take an old mount for the new one: say whose it is.
    if (there->fstype == "fuse.tipfs") {
      return Status::Busy("mountpoint " + mountpoint + " is busy: tipfs volume " + there->source +
                          " is still mounted there (tipfs umount " + mountpoint + " first)");
    }
    return Status::Busy("mountpoint " + mountpoint + " is busy: " + there->fstype + " " +
                        there->source + " is mounted there");
  }
  return Status::OK();
}

Status ServeMount(const MountOptions& options, const std::function<void(const Status&)>& ready) {
  bool announced = false;
  // Tells the caller once whether the mount came up; returns the status for `return fail(st)`.
  auto announce = [&](const Status& st) {
    if (!announced) ready(st);
    announced = true;
    return st;
  };
  auto fail = announce;

  Status st = CheckMountpoint(options.mountpoint);
  if (!st.ok()) return fail(st);
  // Everything the daemon creates on the disks (objects, the store's files) is its owner's alone.
  umask(077);

  Clock* clock = SystemClock::Default();
  Statistics statistics;
  Result<DiskArray> disks = OpenDiskArray(options, clock, &statistics);
  if (!disks.ok()) return fail(disks.status());
  stripe::Volume* volume = disks->volume.get();
  const stripe::Label& label = volume->label();

  st = cache::FileCache::ValidateOptions(options.cache, label.stripe_unit);
  if (!st.ok()) return fail(st.WithContext("--cache-size"));

  // A pid file left behind means the last daemon did not exit cleanly (killed, or the power
  // failed): the store's log may end in a torn record, and objects may need repair (below).
  const std::string pid_file = PidFilePath(stripe::HomeDir(label));
  st = WaitForEarlierDaemon(pid_file, stripe::HomeDir(label));
  if (!st.ok()) return fail(st);
  // Before the store opens: a volume made with looser modes is repaired at every mount (a
  // read-only mount of a volume on a read-only store included, when its modes are right).
  st = MakeVolumePrivate(label);
  if (!st.ok()) return fail(st);
  const bool unclean = access(pid_file.c_str(), F_OK) == 0;
  meta::MetaStoreOptions store_options;
  store_options.after_unclean_shutdown = unclean;
  Result<std::unique_ptr<meta::MetaStore>> meta =
      meta::MetaStore::Open(stripe::MetaPath(label), label.volume_uuid, store_options);
  // A daemon of this volume that has just unmounted removes its pid file a moment before it
  // closes the store: give it that moment (a store held for longer stays refused).
  for (int tries = 0; tries < 100 && !meta.ok() && meta.error() == EBUSY; ++tries) {
    usleep(50'000);
    meta = meta::MetaStore::Open(stripe::MetaPath(label), label.volume_uuid, store_options);
  }
  if (!meta.ok()) return fail(meta.status());

  stripe::StripedIo io(volume);
  cache::FileCache cache(&io, clock, options.cache);
  // Prefetches stop going to a disk whose reads fail (and resume when it works again).
  disks->health->SetListener(
      [&cache](uint32_t disk, bool failing) { cache.SetDiskReadsFailing(disk, failing); });
  struct ListenerGuard {  // the cache goes before the board: unhook it first, on every path
    stripe::DiskHealthBoard* board;
    ~ListenerGuard() { board->SetListener(nullptr); }
  } listener_guard{disks->health.get()};
  FileSystem fs(volume, meta->get(), &cache);
  fs.set_atime_mode(options.read_only ? AtimeMode::kNever : options.atime);
  st = fs.Recover();
  if (!st.ok()) return fail(st.WithContext("reclaiming unlinked files"));
  // After an unclean shutdown, objects may hold bytes past their file's recorded end (a write
  // whose new size was not recorded), which a later write past the end would expose inside a
  // hole, or belong to no inode (a create whose metadata was lost). fsck's object pass fixes
  // both before any read.
  if (unclean) {
    fsck::CheckResult objects = fsck::RepairObjects(volume, meta->get());
    if (objects.ExitCode() > 1) {
      std::string why = objects.error.ToString();
      for (const fsck::Problem& p : objects.problems) {
        if (!p.repaired) why = p.Line();
      }
      return fail(Status::IOError("recovering after an unclean shutdown: " + why));
    }
    std::fprintf(stderr, "tipfs: recovered after an unclean shutdown: %zu objects repaired\n",
                 objects.repaired());
  }

  ControlFiles control;
  HintIoctls hints(&fs, &cache, options.mountpoint);
  StatsReport report(&fs, &cache, &disks.value(), &hints, &statistics, clock, options.mountpoint,
                     options.data_cache);
  report.Register(&control);
  MetricsServer metrics;  // stopped before the report it renders goes
  if (!options.metrics_listen.empty()) {
    st = metrics.Start(options.metrics_listen, [&report] { return report.Prometheus(); });
    if (!st.ok()) return fail(st);
  }

  FuseBridge bridge(&fs, &control, &hints, &statistics, options);
  // Before the mount: resolving the path afterwards would ask the daemon, which is not serving.
  const std::string mounted_at = CanonicalPath(options.mountpoint);
  Session session;
  st = session.Start(&bridge, options, stripe::HomeDir(label));
  if (!st.ok()) return fail(st);
  if (options.data_cache == DataCacheMode::kKernel) {
    // The page cache's sequential reads reach the daemon in max_readahead requests, not the
    // kernel's default 128 KiB (fusefs/kernel_readahead.h). Without it reads still work.
    st = RaiseKernelReadahead(mounted_at, kKernelReadaheadBytes / 1024);
    if (!st.ok())
      std::fprintf(stderr, "tipfs: kernel read-ahead stays small: %s\n", st.ToString().c_str());
  }
  // A write that takes set-id bits away must not leave the kernel executing the file with them.
  fs.SetAttributeListener([&session](Ino ino) { session.InvalidateAttributes(ino); });

  // Durable before any request is served: after a power loss it is what tells the next mount
  // to recover (see above).
  st = WriteFileDurably(pid_file, std::to_string(getpid()) + "\n");
  if (!st.ok()) return fail(st);
  (void)announce(Status::OK());  // the mount is usable

  int rc = session.Loop(options.fuse_threads);
  Status result = rc < 0 ? ErrnoStatus("FUSE session loop", -rc) : Status::OK();
  // Reads still waiting for the disks reply from their completions: before the session goes.
  cache.WaitForFetches();
  // Over io_uring the queues' threads may have started reads since: they answer too.
  session.StopRing([&cache] { cache.WaitForFetches(); });

  // Everything acknowledged becomes durable before the daemon exits.
  Status sync = fs.SyncAll();
  for (stripe::Disk* disk : volume->disks()) sync = stripe::MergeDiskErrors(sync, disk->SyncAll());
  unlink(pid_file.c_str());
  return result.ok() ? sync : result;
}

}  // namespace tipfs::fusefs
