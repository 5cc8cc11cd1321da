// Statistics: counters ("tickers") in the style of RocksDB's Statistics: an enum of counters, a
// name table, and a collector holding one atomic per ticker. Components record through
// RecordTick(stats, TICKER, n), a no-op when no collector is attached (stats == nullptr), so a
// hot path never has to test for one. Also the Prometheus text-format helpers that every
// `.tipfs/metrics` writer shares.
//
// Thread-safety: Record is one relaxed atomic add; Get/Snapshot read without a lock (each value is
// exact, the set is not one instant). Adding a ticker: put it before TICKER_ENUM_MAX and add its
// row to kTickerNames in statistics.cc (a static_assert checks the table is complete).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tipfs {

enum Ticker : uint32_t {
  // Requests the file system served (fusefs/).
  FUSE_READ_OPS = 0,
  FUSE_READ_BYTES,
  FUSE_WRITE_OPS,
  FUSE_WRITE_BYTES,
  // Requests that reached a disk (stripe/, counted by the emulation when it wraps the disks).
  DISK_READ_OPS,
  DISK_READ_BYTES,
  DISK_WRITE_OPS,
  DISK_WRITE_BYTES,
  DISK_SYNC_OPS,
  // The disk model (stripe/emulation/).
  DISK_POSITIONED_OPS,    // paid positioning (seek + rotation): a random access
  DISK_SEQUENTIAL_OPS,    // continued where the previous request on that disk ended
  DISK_BUSY_NANOS,        // modelled service time (the disk was occupied)
  DISK_QUEUE_WAIT_NANOS,  // modelled time requests waited in the queue before service
  DISK_LATE_COMPLETIONS,  // the real disk finished after the modelled deadline
  DISK_OVERHEAD_NANOS,    // CPU overhead `o` charged to the submitting thread
  // Attribute requests the file system answered (fusefs/): each one the kernel could not answer
  // from its own cache costs a round trip to the daemon, and st_blocks a Stat of the file's disks
  // (a RADOS round trip when the disk has not learned the object's size yet).
  FUSE_GETATTR_OPS,
  FUSE_LOOKUP_OPS,
  // Open-file and namespace requests of the volume's files (fusefs/; .tipfs not counted): a
  // close sends FLUSH only when its open did not answer FOPEN_NOFLUSH.
  FUSE_CREATE_OPS,
  FUSE_OPEN_OPS,
  FUSE_FLUSH_OPS,
  FUSE_RELEASE_OPS,
  FUSE_UNLINK_OPS,
  // Requests that came over FUSE's io_uring (fusefs/fuse_ring.h) rather than /dev/fuse.
  FUSE_RING_REQUESTS,
  // Of those, the ones served by the ring's workers (fusefs/ring_workers.h): their queue's
  // thread would not hear of their waits, so it did not serve them itself.
  FUSE_RING_HANDED_OFF,
  // Times a ring queue's thread, about to wait for the disks inside a handler, passed the ring to
  // a spare thread (util/wait_notice.h).
  FUSE_RING_SERVER_CHANGES,
  // A ring queue's server spun for a reply before it slept (fusefs/reply_poll.h): the spins, those
  // that ended because a reply or a request came (the rest ran out and slept anyway), and the time
  // spent spinning, which is CPU the programs did not get.
  FUSE_RING_REPLY_SPINS,
  FUSE_RING_REPLY_SPINS_FOUND,
  FUSE_RING_REPLY_SPIN_NANOS,
  TICKER_ENUM_MAX
};

// "disk.read.bytes"-style name of a ticker.
const char* TickerName(Ticker ticker);

class Statistics {
 public:
  Statistics() = default;
  Statistics(const Statistics&) = delete;
  Statistics& operator=(const Statistics&) = delete;

  void Record(Ticker ticker, uint64_t count = 1) {
    counters_[ticker].fetch_add(count, std::memory_order_relaxed);
  }
  uint64_t Get(Ticker ticker) const { return counters_[ticker].load(std::memory_order_relaxed); }
  std::array<uint64_t, TICKER_ENUM_MAX> Snapshot() const;
  void Reset();

  // One "name value" line per ticker, in enum order.
  std::string ToString() const;
  // Prometheus text exposition: each ticker as counter `tipfs_<name with _>_total`, times in
  // seconds ("disk.busy.nanos" is tipfs_disk_busy_seconds_total).
  std::string ToPrometheus() const;

 private:
  std::array<std::atomic<uint64_t>, TICKER_ENUM_MAX> counters_{};
};

// The RocksDB idiom: recording without a collector costs one branch.
inline void RecordTick(Statistics* stats, Ticker ticker, uint64_t count = 1) {
  if (stats != nullptr) stats->Record(ticker, count);
}

// Prometheus text format (https://prometheus.io/docs/instrumenting/exposition_formats/).
using PrometheusLabels = std::vector<std::pair<std::string, std::string>>;

// "tipfs_" + dotted name with '.' and '-' turned into '_' ("disk.busy.nanos" ->
// "tipfs_disk_busy_nanos"); other characters outside [a-zA-Z0-9_:] also become '_'.
std::string PrometheusName(std::string_view dotted_name);
// Appends "# HELP name help" and "# TYPE name type" (type: counter, gauge, untyped).
void AppendPrometheusHeader(std::string* out, std::string_view name, std::string_view type,
                            std::string_view help);
// Appends `name{label="value",...} value`; label values are escaped (\\, \", \n), integers print
// without a fraction, NaN and infinities as Prometheus spells them.
void AppendPrometheusSample(std::string* out, std::string_view name, const PrometheusLabels& labels,
                            double value);

}  // namespace tipfs
