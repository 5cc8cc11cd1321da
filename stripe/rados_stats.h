// Statistics of one RADOS disk: what its requests cost on the real cluster (always measured,
// with or without a disk model on top), for `tipfs stats` in text, JSON and Prometheus form.
//
// Latencies are kept in a histogram of power-of-two buckets of microseconds (bucket b holds
// responses in [2^b, 2^(b+1)) us), from which the renderings take p50 and p99 to within a factor
// of two. Thread-safety: the recorder is lock-free; a snapshot is not atomic across fields.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace tipfs::stripe {

constexpr size_t kLatencyBuckets = 26;  // up to 2^26 us, about 67 s

struct RadosDiskStats {
  uint64_t reads = 0, writes = 0, syncs = 0;  // requests completed
  uint64_t bytes_read = 0, bytes_written = 0;
  uint64_t operations = 0;  // RADOS operations sent (parts, records)
  uint64_t errors = 0;      // requests that failed
  uint64_t timeouts = 0;    // of them, for want of an answer within the timeout
  uint64_t in_flight = 0;   // requests now
  uint64_t max_in_flight = 0;
  int64_t read_ns = 0, write_ns = 0;  // sums of response times (submit -> done)
  std::array<uint64_t, kLatencyBuckets> latency_buckets{};

  // Upper bound of the bucket holding quantile q (0 < q <= 1) of all responses, in seconds.
  double LatencyQuantileSeconds(double q) const;
};

class RadosStatsRecorder {
 public:
  enum class Kind : uint8_t { kRead, kWrite, kSync };

  void Started();  // a request entered
  void Operation(uint64_t n = 1) { operations_.fetch_add(n, std::memory_order_relaxed); }
  // A request left after `ns`; `bytes` moved; `error` 0 or its errno; `timeout` if it was one.
  void Finished(Kind kind, int64_t ns, uint64_t bytes, bool failed, bool timeout);
  RadosDiskStats Snapshot() const;

 private:
  std::atomic<uint64_t> reads_{0}, writes_{0}, syncs_{0};
  std::atomic<uint64_t> bytes_read_{0}, bytes_written_{0};
  std::atomic<uint64_t> operations_{0}, errors_{0}, timeouts_{0};
  std::atomic<uint64_t> in_flight_{0}, max_in_flight_{0};
  std::atomic<int64_t> read_ns_{0}, write_ns_{0};
  std::array<std::atomic<uint64_t>, kLatencyBuckets> buckets_{};
};

// One disk's statistics under its name and index.
struct NamedRadosStats {
  uint32_t disk = 0;
  std::string name;
  RadosDiskStats stats;
};

// "rados disk 1 (rados:tipfs/ns1): 120 reads 7.5 MiB, 3 writes ..., p50 1.0 ms, p99 4.1 ms, ..."
std::string FormatRadosStats(const std::vector<NamedRadosStats>& disks);
// JSON member: "rados_disks":[{"disk":1,"name":"...","reads":120,...},...]
std::string RadosStatsJsonMember(const std::vector<NamedRadosStats>& disks);
// tipfs_rados_requests_total{disk,kind}, tipfs_rados_bytes_total{disk,direction},
// tipfs_rados_errors_total, tipfs_rados_timeouts_total, tipfs_rados_in_flight_requests,
// tipfs_rados_response_seconds_total{disk,kind}, tipfs_rados_operations_total.
void AppendRadosStatsPrometheus(std::string* out, const std::vector<NamedRadosStats>& disks);

}  // namespace tipfs::stripe
