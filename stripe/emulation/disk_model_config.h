// DiskModelConfig: what one emulated disk is like. The mechanism comes from a profile (the paper's
// HP C2247, a current 7200 rpm disk, a SATA SSD, an NVMe SSD, or `none` for real timing) and any
// field may be overridden; on top sit the LogGP-style sensitivity knobs of seed 002 (L, o, g, G)
// and the processor/disk slowdown of seed 000 (Figure 6).
//
// Written as a spec string, `PROFILE[,key=value...]`, e.g. `hdd,L=2ms,bw=40MB/s,slowdown=2`, used
// by `tipfs mount --disk-model=` and by the run-time control file. Keys (case-sensitive: g and G
// are different knobs, as in LogGP):
//
//   access=TIME    average positioning of a random request; replaces seek + half a revolution
//   seek=TIME      average seek            rpm=N     spindle speed; 0 for solid state
//   bw=RATE        media transfer rate: B/s, kB/s, KB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s
//   G=TIME[/B]     per-byte Gap = 1/bw (G=25ns is bw=40MB/s); G=0: no transfer cost
//   L=TIME         latency added to every request; a pure delay that does not occupy the disk
//   o=TIME         CPU overhead per request, burned (busy) in the thread that submits it
//   g=TIME         minimum gap between the starts of two requests on one disk
//   slowdown=K     multiplies every modelled service time (positioning + transfer), K in (0, 1000]
//   queue=fifo|clook        order of service of queued requests
//   demand_first=on|off     serve queued demand requests before queued prefetches
//   hold=on|off    deliver no completion while on: requests are served by the model and by the
//                  real disk, then wait until hold=off (a stalled disk; how a test sees requests
//                  in flight at one moment without timing them)
//
// TIME is a number with a unit: ns, us (or µs), ms, s; a bare 0 is allowed. Per-request times are
// at most 10 s. Errors name the offending item and list what is accepted. Profile numbers and their
// sources: the table in disk_model_config.cc and man/disk-models.md.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace tipfs::stripe {

enum class QueuePolicy : uint8_t {
  kFifo,   // arrival order
  kClook,  // circular LOOK by position (object, offset): ascending from the head, then wrap
};

struct DiskModelConfig {
  std::string profile = "none";  // the profile these values started from

  // Mechanism (profile values unless overridden).
  int64_t seek_ns = 0;     // average seek
  double rpm = 0;          // 0: no rotation (solid state)
  int64_t access_ns = -1;  // >= 0: average positioning, replacing seek + half a revolution
  double bandwidth = 0;    // media rate in bytes per second; 0: no transfer cost (G = 0)

  // LogGP knobs (seed 002) and the speed-gap factor (seed 000).
  int64_t latency_ns = 0;   // L
  int64_t overhead_ns = 0;  // o
  int64_t gap_ns = 0;       // g
  double slowdown = 1.0;

  QueuePolicy queue = QueuePolicy::kFifo;
  bool demand_first = true;
  bool hold = false;  // completions wait for hold=off (EmulatedDisk)

  // Average positioning of a request that does not continue the previous one.
  int64_t PositioningNanos() const;
  // G: nanoseconds per byte (0 when bandwidth is 0).
  double PerByteNanos() const;
  // Unscaled transfer time of `bytes` (before slowdown).
  int64_t TransferNanos(uint64_t bytes) const;
  // False when positioning and transfer both cost nothing (the `none` profile): the completion time
  // is then the real disk's, and `slowdown` stretches the real service time instead, as the seed
  // 000 apparatus delayed the notification of real completions.
  bool ModelsService() const { return PositioningNanos() > 0 || bandwidth > 0; }

  bool operator==(const DiskModelConfig&) const = default;
};

// The profile names, in documentation order: hp-c2247, hdd, ssd, nvme, none.
const std::vector<std::string_view>& DiskProfileNames();
// NotFound-style EINVAL error listing the profiles when `name` is not one.
Result<DiskModelConfig> DiskProfile(std::string_view name);

// Parses a whole spec, `PROFILE[,key=value...]`.
Result<DiskModelConfig> ParseDiskModelSpec(std::string_view spec);
// A run-time change: `key=value[,...]` applies to `base`; a spec that starts with a profile name
// replaces it entirely (as ParseDiskModelSpec).
Result<DiskModelConfig> UpdateDiskModelSpec(const DiskModelConfig& base, std::string_view spec);

// The canonical spec: the profile and the keys that differ from it. Parsing it gives back an equal
// config. ("hdd,L=2ms,bw=40MB/s,slowdown=2")
std::string DiskModelSpec(const DiskModelConfig& config);
// One line for people: "hdd: random access 12.7 ms (seek 8.5 ms + half turn 4.17 ms at 7200 rpm),
// 180 MB/s (G 5.56 ns/B), L 0, o 0, g 0, slowdown 1, queue clook, demand first".
std::string DescribeDiskModel(const DiskModelConfig& config);

// "2.5ms", "90us", "0": the shortest unit-suffixed form that parses back to the same value.
std::string FormatDuration(int64_t nanos);

}  // namespace tipfs::stripe
