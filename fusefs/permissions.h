// Permission checks the daemon itself must make. The kernel checks every ordinary operation
// (the mount uses default_permissions), but a hint by path names files the caller never opened,
// so the daemon checks search permission on each directory and read permission on the file, with
// the caller's uid, gid and supplementary groups, as the kernel would.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "meta/meta_store.h"

namespace tipfs::fusefs {

struct Credentials {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<gid_t> groups;  // supplementary
  bool fsetid = false;        // CAP_FSETID in the effective set: keeps set-id bits on writes
};

// The credentials of thread `tid` (supplementary groups and capabilities from
// /proc/<tid>/status; none when it cannot be read).
Credentials CredentialsOf(uint32_t uid, uint32_t gid, uint32_t tid);

// True when `who` is `gid` or has it as a supplementary group.
bool InGroup(const Credentials& who, uint32_t gid);

// True when `who` may access `inode` for `mask` (R_OK, W_OK, X_OK bits), by owner, group and
// other permission bits; root may do anything except execute without any x bit.
bool MayAccess(const meta::Inode& inode, const Credentials& who, int mask);

}  // namespace tipfs::fusefs
