// Which process a FUSE request comes from. The kernel tells a FUSE daemon the calling thread's
// id; hint streams belong to processes (thread groups), so reads map tid -> tgid here.
#pragma once

#include <cstdint>

namespace tipfs::fusefs {

// The thread group id of thread `tid`, read from /proc/<tid>/status and remembered in a small
// lock-free table. A remembered answer older than 100 ms is confirmed with tgkill(tgid, tid, 0)
// before it is given, so a thread id the kernel has handed to another process (ids wrap at
// pid_max) is never taken for its old one: that decides whose hints a read consumes and whether
// a read is a speculating child's. Returns tid itself when /proc has no entry (the thread is
// gone).
uint32_t ProcessOf(uint32_t tid);

}  // namespace tipfs::fusefs

namespace tipfs::fusefs {

// The parent process of process `tgid` (PPid in /proc/<tgid>/status), or 0 when unknown.
uint32_t ParentOf(uint32_t tgid);

}  // namespace tipfs::fusefs
