// The renderings of each disk's BackingIoInfo (stripe/disk.h) for `tipfs stats`: whether its
// reads bypass the backing store's page cache, and how many did.
#pragma once

#include <string>
#include <vector>

#include "stripe/disk.h"

namespace tipfs::stripe {

// "backing I/O: disk 0 direct (O_DIRECT, 4096-byte alignment), 812 direct reads, 3 buffered\n"
// per disk; empty when no disk is backed by files.
std::string FormatBackingIo(const std::vector<Disk*>& disks);
// "backing_io":[{"disk":0,"mode":"...","direct_reads":812,"buffered_reads":3},...]
std::string BackingIoJsonMember(const std::vector<Disk*>& disks);
// tipfs_backing_reads_total{disk="0",path="direct"|"buffered"}
void AppendBackingIoPrometheus(std::string* out, const std::vector<Disk*>& disks);

}  // namespace tipfs::stripe
