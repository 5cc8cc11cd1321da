// Hostile input to the hint ioctls on a real mount: every documented refusal gives its errno and
// changes nothing; then several processes send thousands of random commands, sizes, contents,
// ranges, streams and descriptors (closed, write-only, directories, control files). The daemon
// must stay the same live process, answer every call with a documented errno, keep serving
// correct bytes, and keep its resident memory under what the caps allow: the memory at mount
// plus the cache, plus 64 bytes per hint segment the caps let the hostile processes hold
// (man tipfs_hint(3), ENOBUFS), plus a margin for FUSE buffers and allocator slack.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/fs_inspect.h"
#include "tests/support/mount_fixture.h"
#include "tests/tip/tip_support.h"
#include "tipfs/hint.h"

namespace tipfs::testing::tip {
namespace {

constexpr uint64_t kCacheBytes = 12ull << 20;
constexpr uint64_t kBigSize = 4ull << 20;
constexpr uint64_t kSegmentCapPerProcess = 65536;  // CacheOptions default, tipfs_hint(3)
constexpr uint64_t kBytesPerSegment = 64;          // tipfs_hint(3): "about 64 bytes per segment"
constexpr int kProcesses = 4;
constexpr int kCallsPerProcess = 2000;
constexpr int kRounds = 2;

// The errnos of tipfs_hint(3), and ENAMETOOLONG for a path component longer than 255 bytes (the
// file system's answer to such a name; not listed in the man page yet).
const std::set<int>& DocumentedErrnos() {
  static const std::set<int> errnos = {0,      ENOTTY,  EPROTO, EINVAL,  EBADF,
                                       ENOENT, ENOTDIR, EACCES, ELOOP,   EISDIR,
                                       EXDEV,  EPERM,   EDQUOT, ENOBUFS, ENAMETOOLONG};
  return errnos;
}

int IoctlErrno(int fd, unsigned long command, void* argument) {
  return ioctl(fd, command, argument) == 0 ? 0 : errno;
}

tipfs_hint_header Header(uint32_t count, uint64_t stream = TIPFS_STREAM_SELF,
                         uint32_t source = TIPFS_SOURCE_MANUAL) {
  tipfs_hint_header h;
  tipfs_hint_header_init(&h, source, stream, 0, count);
  return h;
}

class HostileIoctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = FuseUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << "FUSE unavailable: " << reason;
    files_ = SmallFileSet(16, 3);
    big_ = TestFile{"big", PatternBytes(kBigSize, 99)};
    std::vector<TestFile> all = files_;
    all.push_back(big_);
    ASSERT_EQ(volume_.Create(all), "");
    ASSERT_EQ(volume_.Remount("--cache-size 12M --disk-model ssd --data-cache direct"), "");
    mnt_ = volume_.mountpoint();
    daemon_ = volume_.DaemonPid();
    ASSERT_GT(daemon_, 0);
    rss_at_mount_kib_ = ResidentKiB(daemon_);
    ASSERT_GT(rss_at_mount_kib_, 0u);
    ASSERT_EQ(mkdir((mnt_ + "/d").c_str(), 0755), 0);
    ASSERT_EQ(symlink("loop2", (mnt_ + "/loop1").c_str()), 0);
    ASSERT_EQ(symlink("loop1", (mnt_ + "/loop2").c_str()), 0);
    ASSERT_EQ(symlink("/etc/passwd", (mnt_ + "/out").c_str()), 0);
    root_ = open(mnt_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    big_fd_ = open((mnt_ + "/big").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(root_, 0);
    ASSERT_GE(big_fd_, 0);
  }

  void TearDown() override {
    if (root_ >= 0) close(root_);
    if (big_fd_ >= 0) close(big_fd_);
  }

  int HintSegments(int fd, const std::vector<tipfs_segment>& segments,
                   uint64_t stream = TIPFS_STREAM_SELF, uint32_t version = TIPFS_HINT_VERSION) {
    auto request = std::make_unique<tipfs_hint_fd>();
    std::memset(request.get(), 0, sizeof(*request));
    request->header = Header(static_cast<uint32_t>(segments.size()), stream);
    request->header.version = version;
    std::memcpy(request->segments, segments.data(),
                std::min<size_t>(segments.size(), TIPFS_FD_SEGMENTS_MAX) * sizeof(tipfs_segment));
    return IoctlErrno(fd, TIPFS_IOC_HINT_FD, request.get());
  }

  int HintPaths(const std::vector<std::string>& paths) {
    auto request = std::make_unique<tipfs_hint_paths>();
    tipfs_hint_paths_init(request.get(), TIPFS_SOURCE_MANUAL, TIPFS_STREAM_SELF, 0);
    for (const std::string& p : paths) {
      if (tipfs_hint_paths_add(request.get(), p.c_str(), 0, 0) != 0) return errno;
    }
    return IoctlErrno(root_, TIPFS_IOC_HINT_PATHS, request.get());
  }

  // hints.calls, outstanding bytes, active streams: what a refused call must leave alone.
  std::string HintState() {
    StatsSnapshot s = ReadStats(mnt_);
    return std::to_string(s.Count("hints.calls")) + "/" +
           std::to_string(s.Count("hints.outstanding.bytes")) + "/" +
           std::to_string(s.Count("hints.streams.active"));
  }

  // The daemon is the same live process and serves correct bytes and stats.
  void ExpectDaemonHealthy() {
    EXPECT_TRUE(ProcessAlive(daemon_));
    EXPECT_EQ(volume_.DaemonPid(), daemon_);
    EXPECT_EQ(ReadAndVerify(mnt_, files_), static_cast<int>(files_.size()));
    EXPECT_EQ(ReadAndVerify(mnt_, {big_}), 1);
    tipfs_query query;
    EXPECT_EQ(tipfs_hint_query(root_, TIPFS_STREAM_SELF, &query), 0) << strerror(errno);
    EXPECT_EQ(query.cache_capacity_bytes, kCacheBytes);
  }

  std::vector<TestFile> files_;
  TestFile big_;
  TipVolume volume_;
  std::string mnt_;
  pid_t daemon_ = 0;
  uint64_t rss_at_mount_kib_ = 0;
  int root_ = -1;
  int big_fd_ = -1;
};

TEST_F(HostileIoctlTest, EveryRefusalHasItsErrnoAndChangesNothing) {
  const std::string state = HintState();
  // Unknown commands, unknown versions, sizes that do not match a command.
  char buffer[64] = {};
  EXPECT_EQ(ErrnoName(IoctlErrno(root_, _IOW('T', 99, uint64_t), buffer)), "ENOTTY");
  EXPECT_EQ(ErrnoName(IoctlErrno(big_fd_, _IOW('T', 1, uint64_t), buffer)), "ENOTTY");
  EXPECT_EQ(ErrnoName(HintSegments(big_fd_, {{0, 10}}, TIPFS_STREAM_SELF, 0)), "EPROTO");
  EXPECT_EQ(ErrnoName(HintSegments(big_fd_, {{0, 10}}, TIPFS_STREAM_SELF, 2)), "EPROTO");
  // Counts and ranges.
  {
    auto request = std::make_unique<tipfs_hint_fd>();
    std::memset(request.get(), 0, sizeof(*request));
    request->header = Header(TIPFS_FD_SEGMENTS_MAX + 1);
    EXPECT_EQ(ErrnoName(IoctlErrno(big_fd_, TIPFS_IOC_HINT_FD, request.get())), "EINVAL");
  }
  EXPECT_EQ(ErrnoName(HintSegments(big_fd_, {{uint64_t{1} << 63, 1}})), "EINVAL");
  EXPECT_EQ(ErrnoName(HintSegments(big_fd_, {{uint64_t{1} << 62, uint64_t{1} << 62}})), "EINVAL");
  EXPECT_EQ(ErrnoName(HintSegments(big_fd_, {{UINT64_MAX - 1, 5}})), "EINVAL");
  // A valid range before a bad one: the whole call is refused.
  EXPECT_EQ(ErrnoName(HintSegments(big_fd_, {{0, 4096}, {UINT64_MAX, 1}})), "EINVAL");
  {
    auto request = std::make_unique<tipfs_hint_fd>();
    std::memset(request.get(), 0, sizeof(*request));
    request->header = Header(1, TIPFS_STREAM_SELF, 5);  // no such source
    EXPECT_EQ(ErrnoName(IoctlErrno(big_fd_, TIPFS_IOC_HINT_FD, request.get())), "EINVAL");
  }
  // Descriptors: write-only, a directory, a closed one (refused by the kernel).
  const int write_only = open((mnt_ + "/" + files_[0].name).c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(write_only, 0);
  EXPECT_EQ(ErrnoName(HintSegments(write_only, {{0, 10}})), "EBADF");
  close(write_only);
  EXPECT_EQ(ErrnoName(HintSegments(write_only, {{0, 10}})), "EBADF");
  EXPECT_EQ(ErrnoName(HintSegments(root_, {{0, 10}})), "EISDIR");
  // A control file is not a file of the volume: refused, but any descriptor of the mount may
  // query.
  const int control = open((mnt_ + "/.tipfs/stats.json").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(control, 0);
  const int control_hint = HintSegments(control, {{0, 10}});
  EXPECT_NE(control_hint, 0);
  EXPECT_TRUE(DocumentedErrnos().count(control_hint)) << ErrnoName(control_hint);
  tipfs_query query;
  EXPECT_EQ(ErrnoName(tipfs_hint_query(control, TIPFS_STREAM_SELF, &query) == 0 ? 0 : errno), "OK");
  close(control);
  // Paths: missing, outside the mount, directories, loops, through a file, malformed records.
  EXPECT_EQ(ErrnoName(HintPaths({"missing"})), "ENOENT");
  EXPECT_EQ(ErrnoName(HintPaths({files_[0].name, "missing"})), "ENOENT");
  EXPECT_EQ(ErrnoName(HintPaths({"/etc/passwd"})), "EXDEV");
  EXPECT_EQ(ErrnoName(HintPaths({"out"})), "EXDEV");
  EXPECT_EQ(ErrnoName(HintPaths({"../../../etc/passwd"})), "ENOENT");
  EXPECT_EQ(ErrnoName(HintPaths({"d"})), "EISDIR");
  EXPECT_EQ(ErrnoName(HintPaths({"loop1"})), "ELOOP");
  EXPECT_EQ(ErrnoName(HintPaths({"big/x"})), "ENOTDIR");
  {
    auto request = std::make_unique<tipfs_hint_paths>();
    tipfs_hint_paths_init(request.get(), TIPFS_SOURCE_MANUAL, TIPFS_STREAM_SELF, 0);
    ASSERT_EQ(tipfs_hint_paths_add(request.get(), "big", 0, 0), 0);
    request->records[sizeof(tipfs_path_record) + 1] = '\0';  // "b\0g"
    EXPECT_EQ(ErrnoName(IoctlErrno(root_, TIPFS_IOC_HINT_PATHS, request.get())), "EINVAL");
    request->records[sizeof(tipfs_path_record) + 1] = 'i';
    request->bytes = TIPFS_PATH_RECORDS_BYTES + 1;
    EXPECT_EQ(ErrnoName(IoctlErrno(root_, TIPFS_IOC_HINT_PATHS, request.get())), "EINVAL");
    request->bytes = sizeof(tipfs_path_record) + 8;
    request->header.count = 2;  // the second record runs past `bytes`
    EXPECT_EQ(ErrnoName(IoctlErrno(root_, TIPFS_IOC_HINT_PATHS, request.get())), "EINVAL");
  }
  // Streams of other processes, malformed named streams, unknown flags.
  const uint64_t stranger = getppid() == 2 ? 3 : 2;  // a process that is neither us nor our parent
  EXPECT_EQ(ErrnoName(HintSegments(big_fd_, {{0, 10}}, stranger)), "EPERM");
  EXPECT_EQ(ErrnoName(HintSegments(big_fd_, {{0, 10}}, uint64_t{1} << 32)), "EINVAL");
  {
    tipfs_cancel cancel;
    std::memset(&cancel, 0, sizeof(cancel));
    cancel.header = Header(0);
    cancel.flags = 4;
    EXPECT_EQ(ErrnoName(IoctlErrno(root_, TIPFS_IOC_CANCEL, &cancel)), "EINVAL");
  }
  EXPECT_EQ(ErrnoName(tipfs_hint_spec_detach(root_) == 0 ? 0 : errno), "EINVAL");
  EXPECT_EQ(HintState(), state) << "a refused call changed the hint state";
  // A range wholly past end of file is clipped to nothing: accepted, nothing outstanding.
  EXPECT_EQ(ErrnoName(HintSegments(big_fd_, {{kBigSize + 1, 100}})), "OK");
  EXPECT_EQ(ReadStats(mnt_).Count("hints.outstanding.bytes"), 0u);
  EXPECT_EQ(ErrnoName(tipfs_hint_cancel(root_, TIPFS_STREAM_SELF) == 0 ? 0 : errno), "OK");
  ExpectDaemonHealthy();
}

TEST_F(HostileIoctlTest, CapsRefuseTheExcessAndCancelMakesRoom) {
  // One-byte segments of the big file: 64 full calls fit the per-process segment cap, the 65th
  // does not.
  std::vector<tipfs_segment> segments(TIPFS_FD_SEGMENTS_MAX);
  for (size_t i = 0; i < segments.size(); ++i) segments[i] = {i * 4096, 1};
  const uint64_t fitting = kSegmentCapPerProcess / TIPFS_FD_SEGMENTS_MAX;
  for (uint64_t call = 0; call < fitting; ++call) {
    ASSERT_EQ(ErrnoName(HintSegments(big_fd_, segments)), "OK") << "call " << call;
  }
  const StatsSnapshot full = ReadStats(mnt_);
  EXPECT_EQ(full.Count("hints.outstanding.bytes"), fitting * TIPFS_FD_SEGMENTS_MAX);
  EXPECT_EQ(ErrnoName(HintSegments(big_fd_, segments)), "EDQUOT");
  const StatsSnapshot refused = ReadStats(mnt_);
  EXPECT_EQ(refused.Count("hints.outstanding.bytes"), full.Count("hints.outstanding.bytes"));
  EXPECT_EQ(refused.Count("hints.refused"), full.Count("hints.refused") + 1);
  // The stream-count cap: 64 streams per process (the caller's own is one of them).
  int streams_accepted = 0, first_refusal = 0;
  for (uint64_t named = 1; named <= 64 && first_refusal == 0; ++named) {
    const int err = HintSegments(big_fd_, {{0, 1}}, (uint64_t{1} << 32) | named);
    if (err == 0) ++streams_accepted;
    if (err != 0) first_refusal = err;
  }
  EXPECT_EQ(ErrnoName(first_refusal), "EDQUOT");
  // Cancelling everything makes room again at once.
  ASSERT_EQ(tipfs_hint_cancel_all(root_), 0);
  EXPECT_EQ(ReadStats(mnt_).Count("hints.outstanding.bytes"), 0u);
  EXPECT_EQ(ErrnoName(HintSegments(big_fd_, segments)), "OK");
  ASSERT_EQ(tipfs_hint_cancel_all(root_), 0);
  ExpectDaemonHealthy();
}

// ---- random calls from several processes ----

struct FuzzTargets {
  int root, big, small, write_only, control, directory, closed;
  const std::string* big_bytes;
};

// One random call; returns its errno. `rng` drives every choice. A hoarder never cancels
// its hints nor reads (reads that match nothing retire its streams), so it runs into the caps
// and keeps what they allow.
int RandomCall(std::mt19937_64& rng, const FuzzTargets& t, bool hoarder,
               std::vector<char>& buffer) {
  auto pick = [&rng](uint64_t n) { return static_cast<uint64_t>(rng() % n); };
  const int fds[] = {t.root, t.big, t.big, t.small, t.write_only, t.control, t.directory, t.closed};
  const int fd = fds[pick(std::size(fds))];
  for (char& c : buffer) c = static_cast<char>(rng());
  auto random_stream = [&]() -> uint64_t {
    switch (pick(6)) {
      case 0:
        return TIPFS_STREAM_SELF;
      case 1:
        return static_cast<uint64_t>(getpid());
      case 2:
        return static_cast<uint64_t>(getppid());
      case 3:
        return (uint64_t{1} << 32) | (1 + pick(80));
      case 4:
        return uint64_t{1} << 32;
      default:
        return rng();
    }
  };
  auto random_header = [&](uint32_t count) {
    tipfs_hint_header h = Header(count, random_stream(), static_cast<uint32_t>(pick(4)));
    if (pick(8) == 0) h.version = static_cast<uint32_t>(rng());
    h.epoch = static_cast<uint32_t>(pick(3));
    return h;
  };
  auto random_offset = [&]() -> uint64_t {
    switch (pick(5)) {
      case 0:
        return pick(kBigSize);
      case 1:
        return kBigSize + pick(1 << 20);
      case 2:
        return (uint64_t{1} << 63) - pick(4);
      case 3:
        return UINT64_MAX - pick(4);
      default:
        return pick(64 * 1024);
    }
  };
  void* arg = buffer.data();
  switch (pick(10)) {
    case 0: {  // a random command of our magic, any direction and size (but the VFS's own)
      const unsigned dir = static_cast<unsigned>(pick(4));
      const unsigned nr = static_cast<unsigned>(pick(64));
      const unsigned size =
          pick(2) ? static_cast<unsigned>(pick(16384)) : static_cast<unsigned>(pick(64));
      if (dir == _IOC_NONE && size == 0 && (nr == 0x1B || nr == 0x21))
        return 0;  // FIONREAD, FIONBIO
      return IoctlErrno(fd, _IOC(dir, 'T', nr, size), arg);
    }
    case 1: {  // a known command full of random bytes
      const unsigned long commands[] = {TIPFS_IOC_HINT_FD, TIPFS_IOC_HINT_PATHS, TIPFS_IOC_CANCEL,
                                        TIPFS_IOC_QUERY};
      return IoctlErrno(fd, commands[pick(std::size(commands))], arg);
    }
    case 2:
    case 3: {  // fd hints with random counts and ranges
      auto* r = reinterpret_cast<tipfs_hint_fd*>(arg);
      const uint32_t counts[] = {
          0, 1, 7, TIPFS_FD_SEGMENTS_MAX, TIPFS_FD_SEGMENTS_MAX + 1, static_cast<uint32_t>(rng())};
      r->header = random_header(counts[pick(std::size(counts))]);
      for (auto& s : r->segments) {
        s.offset = random_offset();
        s.length = pick(4) == 0 ? rng() : pick(200000);
      }
      return IoctlErrno(fd, TIPFS_IOC_HINT_FD, arg);
    }
    case 4: {  // a flood of valid segments (runs into the caps)
      auto* r = reinterpret_cast<tipfs_hint_fd*>(arg);
      r->header = Header(TIPFS_FD_SEGMENTS_MAX);
      for (auto& s : r->segments) s = {pick(kBigSize), 1 + pick(65536)};
      return IoctlErrno(t.big, TIPFS_IOC_HINT_FD, arg);
    }
    case 5:
    case 6: {  // path hints: plausible, hostile and malformed paths
      auto* r = reinterpret_cast<tipfs_hint_paths*>(arg);
      tipfs_hint_paths_init(r, TIPFS_SOURCE_MANUAL, TIPFS_STREAM_SELF, 0);
      r->header = random_header(0);
      const std::string long_name(4095, 'a');
      const char* paths[] = {"big",    "dir0/file0", "missing", "/etc/passwd", "out",
                             "loop1",  "d",          "../..",   "big/x",       ".tipfs/stats.json",
                             ".tipfs", "/",          "//big",   "d/../big",    long_name.c_str()};
      const uint64_t records = pick(40);
      for (uint64_t i = 0; i < records; ++i) {
        if (tipfs_hint_paths_add(r, paths[pick(std::size(paths))], random_offset(),
                                 pick(3) == 0 ? rng() : pick(100000)) != 0) {
          break;
        }
      }
      if (pick(4) == 0) r->bytes = static_cast<uint32_t>(rng());
      if (pick(4) == 0) r->header.count = static_cast<uint32_t>(rng());
      if (pick(6) == 0 && r->bytes > 8)
        r->records[pick(std::min<uint32_t>(r->bytes, TIPFS_PATH_RECORDS_BYTES))] =
            static_cast<char>(rng());
      return IoctlErrno(fd, TIPFS_IOC_HINT_PATHS, arg);
    }
    case 7: {  // cancel with random flags and streams
      auto* r = reinterpret_cast<tipfs_cancel*>(arg);
      r->header = random_header(0);
      r->flags = static_cast<uint32_t>(pick(8));
      if (hoarder) r->flags |= 8;  // an unknown flag: refused, nothing cancelled
      return IoctlErrno(fd, TIPFS_IOC_CANCEL, arg);
    }
    case 8: {  // query, and speculation attach + detach (never left attached: reads would EAGAIN)
      if (pick(2) == 0) {
        auto* r = reinterpret_cast<tipfs_query*>(arg);
        r->header = random_header(0);
        return IoctlErrno(fd, TIPFS_IOC_QUERY, arg);
      }
      auto* r = reinterpret_cast<tipfs_spec_attach*>(arg);
      r->header = random_header(0);
      r->wait_for_data = static_cast<uint32_t>(pick(3));
      r->reserved = pick(4) == 0 ? 1 : 0;
      const int err = IoctlErrno(fd, TIPFS_IOC_SPEC_ATTACH, arg);
      if (err == 0) {
        const int detached = tipfs_hint_spec_detach(t.root) == 0 ? 0 : errno;
        if (detached != 0) return detached;
      }
      return err;
    }
    default: {  // a read of the big file, which must return its bytes whatever was hinted
      if (hoarder) return IoctlErrno(t.big, TIPFS_IOC_HINT_FD, arg);  // random bytes instead
      const uint64_t offset = pick(kBigSize);
      const size_t length = 1 + pick(200000);
      std::string got(length, '\0');
      const ssize_t n = pread(t.big, got.data(), length, static_cast<off_t>(offset));
      if (n < 0) return errno;
      const size_t expect = std::min<uint64_t>(length, kBigSize - offset);
      if (static_cast<size_t>(n) != expect ||
          got.compare(0, expect, *t.big_bytes, offset, expect) != 0) {
        return -1;  // wrong bytes: reported as errno -1
      }
      return 0;
    }
  }
}

// Runs in a forked child: `calls` random calls, then writes "errno count" lines to `out`.
void FuzzChild(const std::string& mnt, const std::string& small_name, const std::string& big_bytes,
               uint64_t seed, bool hoarder, int calls, int out) {
  FuzzTargets t;
  t.root = open(mnt.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  t.big = open((mnt + "/big").c_str(), O_RDONLY | O_CLOEXEC);
  t.small = open((mnt + "/" + small_name).c_str(), O_RDONLY | O_CLOEXEC);
  t.write_only = open((mnt + "/" + small_name).c_str(), O_WRONLY | O_CLOEXEC);
  t.control = open((mnt + "/.tipfs/stats.json").c_str(), O_RDONLY | O_CLOEXEC);
  t.directory = open((mnt + "/d").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  t.closed = open("/dev/null", O_RDONLY | O_CLOEXEC);
  close(t.closed);
  t.big_bytes = &big_bytes;
  std::map<int, int> seen;
  if (t.root < 0 || t.big < 0 || t.small < 0 || t.write_only < 0 || t.control < 0 ||
      t.directory < 0) {
    seen[-2] = 1;  // could not open the targets
  } else {
    std::mt19937_64 rng(seed);
    std::vector<char> buffer(16384 + 64);
    for (int i = 0; i < calls; ++i) ++seen[RandomCall(rng, t, hoarder, buffer)];
  }
  std::string report;
  for (const auto& [err, count] : seen)
    report += std::to_string(err) + " " + std::to_string(count) + "\n";
  (void)!write(out, report.data(), report.size());
}

// Forks `processes` children running FuzzChild; returns errno -> count over all of them.
std::map<int, int> FuzzRound(const std::string& mnt, const std::string& small_name,
                             const std::string& big_bytes, uint64_t seed) {
  std::vector<std::pair<pid_t, int>> children;
  for (int p = 0; p < kProcesses; ++p) {
    int fds[2];
    if (pipe(fds) != 0) {
      ADD_FAILURE() << "pipe: " << strerror(errno);
      break;
    }
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      FuzzChild(mnt, small_name, big_bytes, seed * 1000 + static_cast<uint64_t>(p), p % 2 == 0,
                kCallsPerProcess, fds[1]);
      _exit(0);
    }
    close(fds[1]);
    children.emplace_back(pid, fds[0]);
  }
  std::map<int, int> seen;
  for (const auto& [pid, fd] : children) {
    std::string text;
    char chunk[4096];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof(chunk))) > 0) text.append(chunk, static_cast<size_t>(n));
    close(fd);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "fuzz child " << pid;
    std::istringstream lines(text);
    int err, count;
    while (lines >> err >> count) seen[err] += count;
  }
  return seen;
}

TEST_F(HostileIoctlTest, RandomCallsFromSeveralProcessesNeverHurtTheDaemon) {
  // Bound: memory at mount + cache + what the caps let all hostile processes of all rounds hold
  // (their streams outlive them until retired) + the expansion budget + a margin for FUSE
  // request buffers (16 threads of about 1 MiB) and allocator slack.
  const uint64_t hint_kib =
      kRounds * kProcesses * kSegmentCapPerProcess * kBytesPerSegment / 1024 + 65536 * 80 / 1024;
  const uint64_t bound_kib = rss_at_mount_kib_ + kCacheBytes / 1024 + hint_kib + 48 * 1024;
  std::map<int, int> all;
  for (int round = 0; round < kRounds; ++round) {
    const std::map<int, int> seen = FuzzRound(mnt_, files_[1].name, big_.bytes, 17 + round);
    int calls = 0;
    for (const auto& [err, count] : seen) {
      calls += count;
      all[err] += count;
      EXPECT_TRUE(DocumentedErrnos().count(err)) << "undocumented answer " << ErrnoName(err) << " ("
                                                 << err << ") to " << count << " calls";
    }
    EXPECT_EQ(calls, kProcesses * kCallsPerProcess);
    ASSERT_TRUE(ProcessAlive(daemon_)) << "the daemon died in round " << round;
    const uint64_t rss = ResidentKiB(daemon_);
    EXPECT_LE(rss, bound_kib) << "round " << round << ": VmRSS " << rss << " KiB, at mount "
                              << rss_at_mount_kib_ << " KiB";
    std::printf("round %d: daemon VmRSS %lu KiB (at mount %lu KiB, bound %lu KiB)\n", round,
                static_cast<unsigned long>(rss), static_cast<unsigned long>(rss_at_mount_kib_),
                static_cast<unsigned long>(bound_kib));
  }
  std::string histogram;
  for (const auto& [err, count] : all)
    histogram += " " + ErrnoName(err) + "=" + std::to_string(count);
  std::printf("answers:%s\n", histogram.c_str());
  // The fuzz reached the daemon's checks, not only the kernel's.
  for (int err : {0, EINVAL, EPROTO, ENOTTY, EDQUOT}) EXPECT_GT(all[err], 0) << ErrnoName(err);
  const StatsSnapshot stats = ReadStats(mnt_);
  EXPECT_LE(stats.Count("hints.streams.active"), 4096u);
  ExpectDaemonHealthy();
}

}  // namespace
}  // namespace tipfs::testing::tip
