#include "fusefs/ring_workers.h"

#include <linux/fuse.h>
#include <pthread.h>

#include <cstdio>
#include <system_error>

namespace tipfs::fusefs {

bool ServedInline(uint32_t opcode) {
  switch (opcode) {
    // Never wait for the disks.
    case FUSE_READ:  // asynchronous: a miss is answered from its completion
    case FUSE_LOOKUP:
    case FUSE_GETATTR:
    case FUSE_READLINK:
    case FUSE_FLUSH:
    case FUSE_OPENDIR:
    case FUSE_READDIR:
    case FUSE_READDIRPLUS:
    case FUSE_RELEASEDIR:
    case FUSE_GETXATTR:
    case FUSE_LISTXATTR:
    case FUSE_SETXATTR:
    case FUSE_REMOVEXATTR:
    case FUSE_ACCESS:
    case FUSE_MKDIR:
    case FUSE_MKNOD:
    case FUSE_SYMLINK:
    case FUSE_LINK:
    // Wait for the disks only in waits that are noticed (util/wait_notice.h): the thread passes
    // its ring to a spare first.
    case FUSE_WRITE:
    case FUSE_SETATTR:  // a truncation
    case FUSE_OPEN:     // O_TRUNC
    case FUSE_CREATE:
    case FUSE_RELEASE:  // the last close of an unlinked file removes its data
    case FUSE_UNLINK:
    case FUSE_RMDIR:
    case FUSE_RENAME:  // over a file, whose data goes
    case FUSE_RENAME2:
      return true;
    default:  // fsync (the metadata store's sync is not noticed), statfs, ioctl, lseek, new ones
      return false;
  }
}

RingWorkers::RingWorkers(ServeFn serve, void* context, uint32_t threads)
    : serve_(serve), context_(context), thread_count_(threads) {}

RingWorkers::~RingWorkers() { Stop(); }

Status RingWorkers::Start() {
  try {
    for (uint32_t i = 0; i < thread_count_; ++i) threads_.emplace_back([this, i] { Run(i); });
  } catch (const std::system_error& e) {
    Stop();
    return Status::FromErrno(e.code().value(), std::string("FUSE ring: a worker: ") + e.what());
  }
  return Status::OK();
}

void RingWorkers::Hand(char* request, size_t bytes) {
  {
    MutexLock lock(&mu_);
    queued_.push_back({request, bytes});
  }
  work_.Signal();
}

void RingWorkers::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  work_.SignalAll();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void RingWorkers::Run(uint32_t index) {
  char name[16];
  std::snprintf(name, sizeof name, "tipfs-ringw%u", static_cast<unsigned>(index % 1000));
  pthread_setname_np(pthread_self(), name);
  MutexLock lock(&mu_);
  for (;;) {
    while (queued_.empty() && !stopping_) work_.Wait(&mu_);
    if (queued_.empty()) return;  // stopping, and everything handed over has been taken
    const Request request = queued_.front();
    queued_.pop_front();
    lock.Unlock();
    serve_(context_, request.data, request.bytes);
    lock.Lock();
  }
}

}  // namespace tipfs::fusefs
