// DiskModel: the timing of one emulated disk, as a discrete-event model with explicit time. Pure:
// no threads, no clock, no I/O; EmulatedDisk drives it with clock readings, tests with numbers.
//
// One request is in service at a time; the others wait in a queue in front (FIFO or C-LOOK,
// demand requests first when `demand_first`). When the disk is free it starts the next request at
//   start    = max(time the disk became free, previous start + g, arrival)
//   service  = slowdown x (positioning + bytes x G)
//              positioning = 0 when the request continues exactly where the previous request on
//              this disk ended (same object, offset == previous end: the track buffer has it),
//              else the profile's average access time (seek + half a revolution)
//   finish   = start + service          (the disk is occupied until then: busy time)
//   deadline = finish + L               (L delays the completion but does not occupy the disk)
// and a sync completes, without occupying the disk, once every request that arrived before it has
// finished (+ L). The CPU overhead `o` is not the model's: EmulatedDisk charges it before arrival.
//
// Positioning does not depend on seek distance: tipfs addresses (object, offset), which has no
// physical geometry, so every random access costs the profile's average. C-LOOK therefore helps
// only by turning interleaved runs into sequential ones (as a disk's track buffer would see them).
//
// Events are processed strictly in time order, so the result is exact however late the caller
// advances the model: requests are chosen among those that had arrived by the start time.
// Configuration changes apply to requests that start service after the change.
//
// Thread-safety: none; EmulatedDisk serializes access under its mutex.
#pragma once

#include <cstdint>
#include <vector>

#include "stripe/disk.h"
#include "stripe/emulation/disk_model_config.h"

namespace tipfs::stripe {

struct ModelRequest {
  uint64_t id = 0;  // the caller's handle, returned in ModelStart
  DiskRequest::Kind kind = DiskRequest::Kind::kRead;
  DiskRequest::Priority priority = DiskRequest::Priority::kDemand;
  ObjectId object = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// A request that has started service (or a sync whose barrier cleared), with its timing.
struct ModelStart {
  uint64_t id = 0;
  int64_t arrival = 0;
  int64_t start = 0;
  int64_t finish = 0;          // the disk is free again (start for a sync)
  int64_t deadline = 0;        // finish + L: when the completion is due
  int64_t positioning_ns = 0;  // after slowdown
  int64_t transfer_ns = 0;     // after slowdown
  bool sequential = false;
  bool sync = false;  // a sync whose earlier requests have all finished
};

// Counters of one disk since the model was made or its statistics reset. The fields under
// "EmulatedDisk" are filled by EmulatedDisk (zero from the model alone).
struct DiskStats {
  uint64_t reads = 0, writes = 0, syncs = 0;
  uint64_t bytes_read = 0, bytes_written = 0;
  uint64_t positioned = 0;    // random accesses: paid positioning
  uint64_t sequential = 0;    // continued the previous request: no positioning
  uint64_t started = 0;       // reads + writes that have started service
  int64_t busy_ns = 0;        // modelled service time of started requests (the disk occupied)
  int64_t queue_wait_ns = 0;  // sum over started requests of start - arrival
  uint32_t queue_depth = 0;   // now: waiting + in service
  uint32_t max_queue_depth = 0;
  double avg_queue_depth = 0;  // time-weighted over elapsed_ns
  int64_t elapsed_ns = 0;      // time the statistics cover

  // EmulatedDisk.
  uint64_t completed = 0;   // completions delivered to callers
  int64_t response_ns = 0;  // sum of submit -> completion delivered
  uint64_t late = 0;        // completions the real disk held past the model deadline
  int64_t late_ns = 0;      // total time those were late by
  int64_t overhead_ns = 0;  // CPU overhead o charged to submitting threads
  uint64_t errors = 0;      // completions that carried an error from the real disk
  uint32_t in_flight = 0;   // now: submitted and not yet completed (held ones included)

  uint64_t requests() const { return reads + writes + syncs; }
  // Share of elapsed time the disk was busy (0 when nothing elapsed).
  double utilization() const {
    return elapsed_ns > 0 ? static_cast<double>(busy_ns) / static_cast<double>(elapsed_ns) : 0;
  }
};

class DiskModel {
 public:
  DiskModel(const DiskModelConfig& config, int64_t now);

  const DiskModelConfig& config() const { return config_; }
  // Takes effect for requests that start service after this call.
  void SetConfig(const DiskModelConfig& config) { config_ = config; }

  // A request arrives at `arrival` (raised to the model's time if earlier). The model first runs up
  // to `arrival`, then queues the request; every request that starts by `arrival` (possibly this
  // one) is appended to *started.
  void Submit(const ModelRequest& request, int64_t arrival, std::vector<ModelStart>* started);
  // Runs the model up to `now`, appending every request that starts by then to *started.
  void AdvanceTo(int64_t now, std::vector<ModelStart>* started);
  // When the model next needs AdvanceTo to start a request, or -1 when nothing is waiting.
  int64_t NextEventTime() const;
  // Whether a request or a sync waits for the disk (the event above then starts or releases it);
  // false when at most one request is in service and nothing is behind it.
  bool HasWaiting() const { return !queue_.empty() || !syncs_.empty(); }

  int64_t now() const { return now_; }
  // Statistics with the queue-depth average taken up to `now` (>= the model's time).
  DiskStats Stats(int64_t now) const;
  // Starts the statistics afresh at the model's time; advance the model to the present first.
  void ResetStats();

 private:
  struct Queued {
    ModelRequest request;
    int64_t arrival;
    uint64_t seq;  // arrival order
  };
  struct InService {
    uint64_t seq;
    int64_t finish;
  };
  struct PendingSync {
    ModelRequest request;
    int64_t arrival;
    uint64_t seq;
  };

  // Moves the time-weighted depth integral and now_ forward to `t`.
  void AccrueTo(int64_t t);
  // Index in queue_ of the request to serve next.
  size_t PickNext() const;
  void StartNext(int64_t start, std::vector<ModelStart>* started);
  // Completes the syncs whose earlier requests have all finished, at now_.
  void ReleaseSyncs(std::vector<ModelStart>* started);
  uint32_t depth() const { return static_cast<uint32_t>(queue_.size() + (busy_ ? 1 : 0)); }

  DiskModelConfig config_;
  int64_t now_;
  uint64_t next_seq_ = 0;
  std::vector<Queued> queue_;
  bool busy_ = false;
  InService in_service_{};
  std::vector<PendingSync> syncs_;

  // Where the previous request on this disk ended (sequential detection, C-LOOK head).
  bool has_head_ = false;
  ObjectId head_object_ = 0;
  uint64_t head_offset_ = 0;
  bool has_started_ = false;
  int64_t last_start_ = 0;  // for g

  DiskStats stats_;
  int64_t stats_since_;
  double depth_area_ = 0;  // integral of depth dt since stats_since_ (ns x requests)
};

}  // namespace tipfs::stripe
