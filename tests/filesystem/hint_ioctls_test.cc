// The daemon side of the hint ABI: every ioctl validated completely before anything changes,
// paths resolved with the caller's permissions, streams of other processes refused, and the
// speculation registry.
#include "fusefs/hint_ioctls.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "tests/filesystem/fs_rig.h"
#include "tipfs/hint.h"

namespace tipfs::testing {
namespace {

using fusefs::Caller;
using fusefs::IoctlCaller;
using meta::kRootIno;

constexpr char kMount[] = "/mnt/tipfs-test";

class HintIoctlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hints_ = std::make_unique<fusefs::HintIoctls>(rig_.fs(), rig_.fs()->cache(), kMount);
    file_ = MakeFile(kRootIno, "data", 0644, 1 << 20);
    dir_ = rig_.fs()->MakeNode(Caller{}, kRootIno, "dir", S_IFDIR | 0755, 0)->ino;
    MakeFile(dir_, "inner", 0644, 200'000);
    secret_ = MakeFile(kRootIno, "secret", 0600, 100'000);
  }

  uint64_t MakeFile(uint64_t parent, const char* name, uint32_t mode, size_t size) {
    auto opened = rig_.fs()->Create(Caller{}, parent, name, mode, O_RDWR);
    EXPECT_TRUE(opened.ok());
    std::string data(size, 'z');
    EXPECT_TRUE(rig_.fs()->Write(opened->inode.ino, 0, data.data(), data.size()).ok());
    EXPECT_TRUE(rig_.fs()->Release(opened->inode.ino).ok());
    return opened->inode.ino;
  }

  static tipfs_hint_header Header(uint32_t source = TIPFS_SOURCE_MANUAL) {
    tipfs_hint_header h{};
    h.version = TIPFS_HINT_VERSION;
    h.source = source;
    return h;
  }

  template <typename T>
  int Call(unsigned int command, const T& request, IoctlCaller caller, uint64_t ino = 0,
           int flags = O_RDONLY, std::string* out = nullptr) {
    std::string ignored;
    Status st = hints_->Handle(caller, ino == 0 ? file_ : ino, flags, command, &request,
                               sizeof(request), sizeof(tipfs_query), out ? out : &ignored);
    return st.error();
  }

  IoctlCaller Me(uint32_t uid = 0) const {
    return IoctlCaller{uid, uid, static_cast<uint32_t>(gettid())};
  }

  std::unique_ptr<tipfs_hint_fd> FdRequest(std::initializer_list<tipfs_segment> segments) {
    auto request = std::make_unique<tipfs_hint_fd>();
    std::memset(request.get(), 0, sizeof(*request));
    request->header = Header();
    for (const tipfs_segment& s : segments) request->segments[request->header.count++] = s;
    return request;
  }

  std::unique_ptr<tipfs_hint_paths> PathRequest(std::initializer_list<const char*> paths) {
    auto request = std::make_unique<tipfs_hint_paths>();
    std::memset(request.get(), 0, sizeof(*request));
    request->header = Header();
    for (const char* path : paths) {
      tipfs_path_record record{};
      record.path_length = static_cast<uint32_t>(std::strlen(path));
      std::memcpy(request->records + request->bytes, &record, sizeof(record));
      std::memcpy(request->records + request->bytes + sizeof(record), path, record.path_length);
      request->bytes += static_cast<uint32_t>(sizeof(record) + ((record.path_length + 7) & ~7u));
      ++request->header.count;
    }
    return request;
  }

  uint64_t HintedBytes() {
    cache::CacheStats stats = rig_.fs()->cache()->Stats();
    return stats.bytes_hinted[0] + stats.bytes_hinted[1] + stats.bytes_hinted[2];
  }

  FsRig rig_;
  std::unique_ptr<fusefs::HintIoctls> hints_;
  uint64_t file_ = 0, dir_ = 0, secret_ = 0;
};

TEST_F(HintIoctlsTest, FdHintsAreClippedToEndOfFile) {
  auto request = FdRequest({{0, 65536}, {1 << 20, 4096}, {(1 << 20) - 100, 0}});
  EXPECT_EQ(Call(TIPFS_IOC_HINT_FD, *request, Me()), 0);
  EXPECT_EQ(HintedBytes(), 65536u + 100u);  // the second is past EOF, the third reaches it
}

TEST_F(HintIoctlsTest, BadRequestsChangeNothing) {
  auto request = FdRequest({{0, 4096}});
  request->header.version = 99;
  EXPECT_EQ(Call(TIPFS_IOC_HINT_FD, *request, Me()), EPROTO);
  request->header.version = TIPFS_HINT_VERSION;
  request->header.source = 7;
  EXPECT_EQ(Call(TIPFS_IOC_HINT_FD, *request, Me()), EINVAL);
  request->header.source = TIPFS_SOURCE_MANUAL;
  request->header.count = TIPFS_FD_SEGMENTS_MAX + 1;
  EXPECT_EQ(Call(TIPFS_IOC_HINT_FD, *request, Me()), EINVAL);
  request->header.count = 1;
  // A valid segment followed by an overflowing one: the whole call is refused.
  auto overflow = FdRequest({{0, 4096}, {UINT64_MAX - 10, 100}});
  EXPECT_EQ(Call(TIPFS_IOC_HINT_FD, *overflow, Me()), EINVAL);
  auto negative = FdRequest({{uint64_t{1} << 63, 10}});
  EXPECT_EQ(Call(TIPFS_IOC_HINT_FD, *negative, Me()), EINVAL);
  EXPECT_EQ(Call(TIPFS_IOC_HINT_FD, *request, Me(), file_, O_WRONLY), EBADF);
  EXPECT_EQ(Call(TIPFS_IOC_HINT_FD, *request, Me(), dir_), EISDIR);
  std::string ignored;
  EXPECT_EQ(
      hints_->Handle(Me(), file_, O_RDONLY, TIPFS_IOC_HINT_FD, request.get(), 100, 0, &ignored)
          .error(),
      EINVAL);
  EXPECT_EQ(hints_->Handle(Me(), file_, O_RDONLY, 0x1234, request.get(), 100, 0, &ignored).error(),
            ENOTTY);
  EXPECT_EQ(HintedBytes(), 0u);
}

TEST_F(HintIoctlsTest, PathHintsResolveRelativeAbsoluteAndSymlinkedPaths) {
  ASSERT_TRUE(rig_.fs()->MakeNode(Caller{}, kRootIno, "link", S_IFLNK | 0777, 0, "dir/inner").ok());
  auto request = PathRequest({"data", "/mnt/tipfs-test/dir/inner", "link", "./dir/../data"});
  EXPECT_EQ(Call(TIPFS_IOC_HINT_PATHS, *request, Me()), 0);
  EXPECT_EQ(HintedBytes(), (1u << 20) + 200'000u + 200'000u + (1u << 20));
}

TEST_F(HintIoctlsTest, PathHintErrorsNameTheProblemAndHintNothing) {
  EXPECT_EQ(Call(TIPFS_IOC_HINT_PATHS, *PathRequest({"data", "missing"}), Me()), ENOENT);
  EXPECT_EQ(Call(TIPFS_IOC_HINT_PATHS, *PathRequest({"/etc/passwd"}), Me()), EXDEV);
  EXPECT_EQ(Call(TIPFS_IOC_HINT_PATHS, *PathRequest({"/mnt/tipfs-testX/data"}), Me()), EXDEV);
  EXPECT_EQ(Call(TIPFS_IOC_HINT_PATHS, *PathRequest({"data/x"}), Me()), ENOTDIR);
  EXPECT_EQ(Call(TIPFS_IOC_HINT_PATHS, *PathRequest({"dir"}), Me()), EISDIR);
  EXPECT_EQ(Call(TIPFS_IOC_HINT_PATHS, *PathRequest({"secret"}), Me(1000)), EACCES);
  auto malformed = PathRequest({"data"});
  malformed->bytes = TIPFS_PATH_RECORDS_BYTES + 1;
  EXPECT_EQ(Call(TIPFS_IOC_HINT_PATHS, *malformed, Me()), EINVAL);
  auto truncated = PathRequest({"data"});
  truncated->header.count = 2;
  EXPECT_EQ(Call(TIPFS_IOC_HINT_PATHS, *truncated, Me()), EINVAL);
  EXPECT_EQ(HintedBytes(), 0u);
  // Root reads what it likes, as the kernel lets it.
  EXPECT_EQ(Call(TIPFS_IOC_HINT_PATHS, *PathRequest({"secret"}), Me(0)), 0);
}

TEST_F(HintIoctlsTest, SymlinkLoopsStop) {
  ASSERT_TRUE(rig_.fs()->MakeNode(Caller{}, kRootIno, "a", S_IFLNK | 0777, 0, "b").ok());
  ASSERT_TRUE(rig_.fs()->MakeNode(Caller{}, kRootIno, "b", S_IFLNK | 0777, 0, "a").ok());
  EXPECT_EQ(Call(TIPFS_IOC_HINT_PATHS, *PathRequest({"a"}), Me()), ELOOP);
}

TEST_F(HintIoctlsTest, StreamsOfOtherProcessesAreRefused) {
  auto request = FdRequest({{0, 4096}});
  uint32_t other = getppid() == 1 ? 2 : 1;
  request->header.stream = other;
  EXPECT_EQ(Call(TIPFS_IOC_HINT_FD, *request, Me()), EPERM);
  request->header.stream = getppid();  // libtipspec's child hints for its parent
  EXPECT_EQ(Call(TIPFS_IOC_HINT_FD, *request, Me()), 0);
  request->header.stream = (uint64_t{1} << 32) | 7;  // a named stream of our own
  EXPECT_EQ(Call(TIPFS_IOC_HINT_FD, *request, Me()), 0);
  request->header.stream = uint64_t{5} << 32;  // named, but low bits zero
  EXPECT_EQ(Call(TIPFS_IOC_HINT_FD, *request, Me()), EINVAL);
}

TEST_F(HintIoctlsTest, QueryReportsTheCallersStreamAndCancelEmptiesIt) {
  auto request = FdRequest({{0, 128 * 1024}});
  ASSERT_EQ(Call(TIPFS_IOC_HINT_FD, *request, Me()), 0);
  tipfs_query query{};
  query.header = Header();
  std::string out;
  ASSERT_EQ(Call(TIPFS_IOC_QUERY, query, Me(), 0, O_RDONLY, &out), 0);
  ASSERT_EQ(out.size(), sizeof(tipfs_query));
  tipfs_query reply;
  std::memcpy(&reply, out.data(), sizeof(reply));
  EXPECT_EQ(reply.cache_block_bytes, 64u * 1024);
  EXPECT_GT(reply.stream_segments_pending + reply.stream_blocks_prefetched, 0u);

  tipfs_cancel cancel{};
  cancel.header = Header();
  cancel.flags = TIPFS_CANCEL_ALL;
  ASSERT_EQ(Call(TIPFS_IOC_CANCEL, cancel, Me()), 0);
  ASSERT_EQ(Call(TIPFS_IOC_QUERY, query, Me(), 0, O_RDONLY, &out), 0);
  std::memcpy(&reply, out.data(), sizeof(reply));
  EXPECT_EQ(reply.stream_hinted_bytes, 0u);
  cancel.flags = 0x80;
  EXPECT_EQ(Call(TIPFS_IOC_CANCEL, cancel, Me()), EINVAL);
}

TEST_F(HintIoctlsTest, AttachedProcessesReadSpeculativelyUntilTheyDetach) {
  uint32_t tid = static_cast<uint32_t>(gettid());
  EXPECT_FALSE(hints_->ReadContextFor(tid).speculative);
  tipfs_spec_attach attach{};
  attach.header = Header(TIPFS_SOURCE_SPECULATIVE);
  attach.header.stream = getppid();
  attach.header.epoch = 3;
  attach.wait_for_data = 1;
  ASSERT_EQ(Call(TIPFS_IOC_SPEC_ATTACH, attach, Me()), 0);
  cache::ReadContext context = hints_->ReadContextFor(tid);
  EXPECT_TRUE(context.speculative);
  EXPECT_TRUE(context.wait_for_data);
  EXPECT_EQ(context.spec_stream, static_cast<uint64_t>(getppid()));
  EXPECT_EQ(context.spec_epoch, 3u);
  EXPECT_EQ(hints_->attached(), 1u);
  ASSERT_EQ(Call(TIPFS_IOC_SPEC_DETACH, attach, Me()), 0);
  EXPECT_FALSE(hints_->ReadContextFor(tid).speculative);
  EXPECT_EQ(Call(TIPFS_IOC_SPEC_DETACH, attach, Me()), EINVAL);
}

TEST_F(HintIoctlsTest, SharedStreamsAreConsumableByDescendantsOfTheSameUserOnly) {
  const uint32_t me = static_cast<uint32_t>(getpid());
  tipfs_share share{};
  share.header = Header();
  share.header.stream = (uint64_t{1} << 32) | 5;  // a named stream of mine
  share.flags = TIPFS_SHARE_DESCENDANTS;
  ASSERT_EQ(Call(TIPFS_IOC_SHARE, share, Me()), 0);
  // A child (a loader's worker) of my user is vouched for; of another user, or not my
  // descendant (my parent, myself), it is not.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c = 1;
    (void)!write(ready[1], &c, 1);
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  const uint32_t worker = static_cast<uint32_t>(child);
  EXPECT_EQ(hints_->ReadContextFor(worker, 0).shared_owner, me);
  EXPECT_EQ(hints_->ReadContextFor(worker, 65534).shared_owner, 0u);
  EXPECT_EQ(hints_->ReadContextFor(worker).shared_owner, 0u);  // uid unknown
  EXPECT_EQ(hints_->ReadContextFor(static_cast<uint32_t>(getppid()), 0).shared_owner, 0u);
  EXPECT_EQ(hints_->ReadContextFor(me, 0).shared_owner, 0u);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
}

TEST_F(HintIoctlsTest, ShareRefusesBadFlagsAndStreamsOfOthers) {
  tipfs_share share{};
  share.header = Header();
  share.flags = 4;
  EXPECT_EQ(Call(TIPFS_IOC_SHARE, share, Me()), EINVAL);
  share.flags = TIPFS_SHARE_DESCENDANTS;
  share.reserved = 1;
  EXPECT_EQ(Call(TIPFS_IOC_SHARE, share, Me()), EINVAL);
  share.reserved = 0;
  share.header.stream = static_cast<uint64_t>(getppid());  // my parent's: a speculating child's
  EXPECT_EQ(Call(TIPFS_IOC_SHARE, share, Me()), EPERM);
  share.header.stream = 1;  // some other process
  EXPECT_EQ(Call(TIPFS_IOC_SHARE, share, Me()), EPERM);
  share.header.stream = uint64_t{1} << 32;  // named, zero low bits
  EXPECT_EQ(Call(TIPFS_IOC_SHARE, share, Me()), EINVAL);
  share.header.stream = TIPFS_STREAM_SELF;
  EXPECT_EQ(Call(TIPFS_IOC_SHARE, share, Me()), 0);
  share.flags = 0;  // and back
  EXPECT_EQ(Call(TIPFS_IOC_SHARE, share, Me()), 0);
}

// A child re-attaches tainted after its first read of data it did not get; a descriptor with
// O_NONBLOCK never waits, whatever the attach says; only speculative sources may attach.
TEST_F(HintIoctlsTest, AttachCarriesTheChildsSourceAndNonBlockingReadsNeverWait) {
  uint32_t tid = static_cast<uint32_t>(gettid());
  tipfs_spec_attach attach{};
  attach.header = Header(TIPFS_SOURCE_SPECULATIVE);
  attach.header.stream = getppid();
  attach.wait_for_data = 1;
  ASSERT_EQ(Call(TIPFS_IOC_SPEC_ATTACH, attach, Me()), 0);
  EXPECT_EQ(hints_->ReadContextFor(tid).spec_source, cache::HintSource::kSpeculative);
  EXPECT_TRUE(hints_->ReadContextFor(tid, fusefs::HintIoctls::kNoUid, O_RDONLY).wait_for_data);
  EXPECT_FALSE(
      hints_->ReadContextFor(tid, fusefs::HintIoctls::kNoUid, O_RDONLY | O_NONBLOCK).wait_for_data);
  attach.header.source = TIPFS_SOURCE_SPECULATIVE_TAINTED;
  ASSERT_EQ(Call(TIPFS_IOC_SPEC_ATTACH, attach, Me()), 0);
  EXPECT_EQ(hints_->ReadContextFor(tid).spec_source, cache::HintSource::kSpeculativeTainted);
  EXPECT_EQ(hints_->attached(), 1u);
  attach.header.source = TIPFS_SOURCE_MANUAL;
  EXPECT_EQ(Call(TIPFS_IOC_SPEC_ATTACH, attach, Me()), EINVAL);
  attach.header.source = 5;
  EXPECT_EQ(Call(TIPFS_IOC_SPEC_ATTACH, attach, Me()), EINVAL);
  attach.header.source = TIPFS_SOURCE_SPECULATIVE;
  ASSERT_EQ(Call(TIPFS_IOC_SPEC_DETACH, attach, Me()), 0);
}

TEST_F(HintIoctlsTest, CancellingTaintedHintsNeedsAnEpoch) {
  tipfs_cancel cancel{};
  cancel.header = Header(TIPFS_SOURCE_SPECULATIVE);
  cancel.flags = TIPFS_CANCEL_TAINTED;
  EXPECT_EQ(Call(TIPFS_IOC_CANCEL, cancel, Me()), EINVAL);
  cancel.flags = TIPFS_CANCEL_TAINTED | TIPFS_CANCEL_EPOCH | TIPFS_CANCEL_ALL;
  EXPECT_EQ(Call(TIPFS_IOC_CANCEL, cancel, Me()), EINVAL);
  cancel.flags = TIPFS_CANCEL_TAINTED | TIPFS_CANCEL_EPOCH;
  EXPECT_EQ(Call(TIPFS_IOC_CANCEL, cancel, Me()), 0);
}

}  // namespace
}  // namespace tipfs::testing
