// RingWorkers (fusefs/ring_workers.h): which FUSE requests the ring's queue thread serves itself,
// and the pool that serves the others: a request that waits does not hold up the next one, and
// stopping serves what was handed over before the workers leave.
#include "fusefs/ring_workers.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fuse.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "fusefs/filesystem.h"
#include "tests/filesystem/fs_rig.h"
#include "util/mutex.h"

namespace tipfs::fusefs {
namespace {

// Whether a request of `opcode` whose arguments start with `first_field` (open flags, or a
// SETATTR's valid mask) is served inline.
bool Inline(uint32_t opcode, uint32_t first_field = 0) {
  fuse_in_header in = {};
  in.opcode = opcode;
  fuse_setattr_in args = {};  // the largest of the argument structs used here
  args.valid = first_field;
  return ServedInline(in, &args, sizeof args, /*fs=*/nullptr);
}

TEST(ServedInlineTest, RequestsThatNeverWaitForADiskAndWritesStayOnTheQueuesThread) {
  for (uint32_t op : {FUSE_READ, FUSE_LOOKUP, FUSE_GETATTR, FUSE_READDIR, FUSE_READDIRPLUS,
                      FUSE_OPENDIR, FUSE_RELEASEDIR, FUSE_GETXATTR, FUSE_LISTXATTR, FUSE_FLUSH,
                      FUSE_MKDIR, FUSE_MKNOD, FUSE_SYMLINK, FUSE_LINK}) {
    EXPECT_TRUE(Inline(op)) << "opcode " << op;
  }
  EXPECT_TRUE(Inline(FUSE_WRITE)) << "a write's waits are noticed (util/wait_notice.h)";
  // An unlink, rmdir, rename or release may reclaim the data and sync the metadata store; without
  // a file system to ask, they go to the workers.
  for (uint32_t op :
       {FUSE_FSYNC, FUSE_FSYNCDIR, FUSE_UNLINK, FUSE_RMDIR, FUSE_RENAME, FUSE_RENAME2, FUSE_RELEASE,
        FUSE_FALLOCATE, FUSE_STATFS, FUSE_IOCTL, FUSE_COPY_FILE_RANGE, FUSE_LSEEK}) {
    EXPECT_FALSE(Inline(op)) << "opcode " << op;
  }
  EXPECT_FALSE(Inline(4242)) << "an opcode the list does not know may wait";
  // An open or create that empties an existing file truncates it on the disks.
  EXPECT_TRUE(Inline(FUSE_OPEN, O_RDWR));
  EXPECT_FALSE(Inline(FUSE_OPEN, O_RDWR | O_TRUNC));
  EXPECT_TRUE(Inline(FUSE_CREATE, O_WRONLY | O_CREAT | O_EXCL));
  EXPECT_FALSE(Inline(FUSE_CREATE, O_WRONLY | O_CREAT | O_TRUNC));
  // chmod, chown and utimes change metadata; truncate cuts the data on the disks.
  EXPECT_TRUE(Inline(FUSE_SETATTR, FATTR_MODE | FATTR_UID | FATTR_MTIME));
  EXPECT_FALSE(Inline(FUSE_SETATTR, FATTR_SIZE));
  EXPECT_FALSE(Inline(FUSE_SETATTR, FATTR_SIZE | FATTR_MTIME));
}

// A rename's arguments into the root: `Args` (fuse_rename_in or fuse_rename2_in), then the names.
template <typename Args>
std::string RenameArgs(const std::string& from, const std::string& to, uint32_t flags = 0) {
  Args args = {};
  args.newdir = meta::kRootIno;
  if constexpr (std::is_same_v<Args, fuse_rename2_in>) args.flags = flags;
  std::string bytes(reinterpret_cast<const char*>(&args), sizeof args);
  return bytes + from + '\0' + to + '\0';
}

// With the file system to ask, an unlink, rename or release stays on the queue's thread unless it
// would free a file's bytes after syncing the metadata store (FileSystem::UnlinkWouldSync).
TEST(ServedInlineTest, UnlinksRenamesAndReleasesThatWouldNotSyncStayOnTheQueuesThread) {
  testing::FsRig rig;
  fusefs::FileSystem* fs = rig.fs();
  auto empty = fs->Create(Caller{}, meta::kRootIno, "empty", 0644, O_RDWR);
  auto full = fs->Create(Caller{}, meta::kRootIno, "full", 0644, O_RDWR);
  ASSERT_TRUE(empty.ok() && full.ok());
  ASSERT_TRUE(fs->Write(full->inode.ino, 0, "bytes", 5).ok());
  fuse_in_header in = {};
  in.opcode = FUSE_RELEASE;
  in.nodeid = full->inode.ino;
  fuse_release_in release = {};
  EXPECT_TRUE(ServedInline(in, &release, sizeof release, fs)) << "a linked file keeps its bytes";
  ASSERT_TRUE(fs->Release(empty->inode.ino).ok() && fs->Release(full->inode.ino).ok());

  in.opcode = FUSE_UNLINK;
  in.nodeid = meta::kRootIno;
  EXPECT_TRUE(ServedInline(in, "empty", sizeof "empty", fs));
  EXPECT_FALSE(ServedInline(in, "full", sizeof "full", fs));
  EXPECT_FALSE(ServedInline(in, "empty", sizeof "empty", nullptr));
  EXPECT_FALSE(ServedInline(in, "empty", 3, fs)) << "a name not terminated inside the request";

  // A rename stays unless it replaces a file that the unlink above would have synced for.
  in.opcode = FUSE_RENAME;
  EXPECT_FALSE(ServedInline(in, RenameArgs<fuse_rename_in>("empty", "new").data(), 0, fs))
      << "arguments too short to hold a rename's";
  auto rename = [&](uint32_t opcode, const std::string& args) {
    in.opcode = opcode;
    return ServedInline(in, args.data(), args.size(), fs);
  };
  EXPECT_TRUE(rename(FUSE_RENAME, RenameArgs<fuse_rename_in>("empty", "new")));
  EXPECT_TRUE(rename(FUSE_RENAME, RenameArgs<fuse_rename_in>("full", "empty")));
  EXPECT_FALSE(rename(FUSE_RENAME, RenameArgs<fuse_rename_in>("empty", "full")));
  EXPECT_FALSE(rename(FUSE_RENAME2, RenameArgs<fuse_rename2_in>("empty", "full")));
  EXPECT_TRUE(rename(FUSE_RENAME2, RenameArgs<fuse_rename2_in>("empty", "full", RENAME_EXCHANGE)));
  std::string unterminated = RenameArgs<fuse_rename_in>("empty", "new");
  unterminated.pop_back();
  EXPECT_FALSE(rename(FUSE_RENAME, unterminated));
}

// Records what it served; a request whose first byte is 'w' waits until `open` is set.
struct Server {
  Mutex mu;
  CondVar changed;
  bool open GUARDED_BY(mu) = false;
  std::vector<std::string> served GUARDED_BY(mu);

  static void Serve(void* self, char* request, size_t bytes) {
    auto* s = static_cast<Server*>(self);
    MutexLock lock(&s->mu);
    while (request[0] == 'w' && !s->open) s->changed.Wait(&s->mu);
    s->served.emplace_back(request, bytes);
    s->changed.SignalAll();
  }
  std::vector<std::string> Served() {
    MutexLock lock(&mu);
    return served;
  }
  // Waits until `count` requests were served, or a minute (a bound on a hang, not a measure).
  bool WaitForServed(size_t count) {
    MutexLock lock(&mu);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (served.size() < count) {
      if (!changed.WaitUntil(&mu, give_up)) return served.size() >= count;
    }
    return true;
  }
  void Open() {
    MutexLock lock(&mu);
    open = true;
    changed.SignalAll();
  }
};

TEST(RingWorkersTest, ARequestThatWaitsDoesNotHoldUpTheNext) {
  Server server;
  RingWorkers workers(Server::Serve, &server, 2);
  ASSERT_TRUE(workers.Start().ok());
  char waits[] = "wait";
  char quick[] = "quick";
  workers.Hand(waits, 4);
  workers.Hand(quick, 5);
  EXPECT_TRUE(server.WaitForServed(1));
  EXPECT_EQ(server.Served(), std::vector<std::string>{"quick"});
  server.Open();
  EXPECT_TRUE(server.WaitForServed(2));
  workers.Stop();
  EXPECT_EQ(server.Served(), (std::vector<std::string>{"quick", "wait"}));
}

TEST(RingWorkersTest, StopServesEverythingHandedOverFirst) {
  Server server;
  RingWorkers workers(Server::Serve, &server, 1);
  ASSERT_TRUE(workers.Start().ok());
  char first[] = "wait 1";  // keeps the one worker busy while the others queue
  char second[] = "two";
  char third[] = "three";
  workers.Hand(first, 6);
  workers.Hand(second, 3);
  workers.Hand(third, 5);
  std::thread opener([&server] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    server.Open();
  });
  workers.Stop();
  opener.join();
  EXPECT_EQ(server.Served(), (std::vector<std::string>{"wait 1", "two", "three"}));
  workers.Stop();  // again: nothing left, returns
}

}  // namespace
}  // namespace tipfs::fusefs
