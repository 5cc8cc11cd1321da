// RADOS disk statistics and their renderings; see rados_stats.h.
#include "stripe/rados_stats.h"

#include <charconv>
#include <cstdio>

#include "util/statistics.h"

namespace tipfs::stripe {

namespace {

size_t BucketOf(int64_t ns) {
  uint64_t us = ns > 0 ? static_cast<uint64_t>(ns) / 1000 : 0;
  size_t b = 0;
  while (us > 1 && b + 1 < kLatencyBuckets) {
    us >>= 1;
    ++b;
  }
  return b;
}

void RaiseTo(std::atomic<uint64_t>* max, uint64_t value) {
  uint64_t seen = max->load(std::memory_order_relaxed);
  while (seen < value && !max->compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

// One exported field: the same table feeds Prometheus and JSON.
struct Field {
  const char* json;        // JSON key
  const char* prometheus;  // metric name without the tipfs_rados_ prefix
  const char* type;
  const char* help;
  double (*get)(const RadosDiskStats&);
};

const Field kFields[] = {
    {"reads", "reads_total", "counter", "read requests completed",
     [](const RadosDiskStats& s) { return double(s.reads); }},
    {"writes", "writes_total", "counter", "write requests completed",
     [](const RadosDiskStats& s) { return double(s.writes); }},
    {"syncs", "syncs_total", "counter", "sync requests completed",
     [](const RadosDiskStats& s) { return double(s.syncs); }},
    {"bytes_read", "read_bytes_total", "counter", "bytes read",
     [](const RadosDiskStats& s) { return double(s.bytes_read); }},
    {"bytes_written", "written_bytes_total", "counter", "bytes written",
     [](const RadosDiskStats& s) { return double(s.bytes_written); }},
    {"operations", "operations_total", "counter", "RADOS operations sent",
     [](const RadosDiskStats& s) { return double(s.operations); }},
    {"errors", "errors_total", "counter", "requests that failed",
     [](const RadosDiskStats& s) { return double(s.errors); }},
    {"timeouts", "timeouts_total", "counter", "requests that failed for want of an answer",
     [](const RadosDiskStats& s) { return double(s.timeouts); }},
    {"in_flight", "in_flight_requests", "gauge", "requests in flight now",
     [](const RadosDiskStats& s) { return double(s.in_flight); }},
    {"max_in_flight", "max_in_flight_requests", "gauge", "most requests in flight at once",
     [](const RadosDiskStats& s) { return double(s.max_in_flight); }},
    {"read_seconds", "read_response_seconds_total", "counter", "sum of read response times",
     [](const RadosDiskStats& s) { return double(s.read_ns) / 1e9; }},
    {"write_seconds", "write_response_seconds_total", "counter", "sum of write response times",
     [](const RadosDiskStats& s) { return double(s.write_ns) / 1e9; }},
    {"p50_seconds", "response_p50_seconds", "gauge", "median response time (within 2x)",
     [](const RadosDiskStats& s) { return s.LatencyQuantileSeconds(0.5); }},
    {"p99_seconds", "response_p99_seconds", "gauge", "99th percentile response time (within 2x)",
     [](const RadosDiskStats& s) { return s.LatencyQuantileSeconds(0.99); }},
};

std::string Millis(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", seconds * 1e3);
  return buf;
}

}  // namespace

double RadosDiskStats::LatencyQuantileSeconds(double q) const {
  uint64_t total = 0;
  for (uint64_t n : latency_buckets) total += n;
  if (total == 0) return 0;
  const double want = q * static_cast<double>(total);
  uint64_t seen = 0;
  for (size_t b = 0; b < kLatencyBuckets; ++b) {
    seen += latency_buckets[b];
    if (static_cast<double>(seen) >= want) return static_cast<double>(uint64_t{2} << b) / 1e6;
  }
  return static_cast<double>(uint64_t{1} << kLatencyBuckets) / 1e6;
}

void RadosStatsRecorder::Started() {
  const uint64_t now = in_flight_.fetch_add(1, std::memory_order_relaxed) + 1;
  RaiseTo(&max_in_flight_, now);
}

void RadosStatsRecorder::Finished(Kind kind, int64_t ns, uint64_t bytes, bool failed,
                                  bool timeout) {
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  buckets_[BucketOf(ns)].fetch_add(1, std::memory_order_relaxed);
  if (failed) errors_.fetch_add(1, std::memory_order_relaxed);
  if (timeout) timeouts_.fetch_add(1, std::memory_order_relaxed);
  switch (kind) {
    case Kind::kRead:
      reads_.fetch_add(1, std::memory_order_relaxed);
      bytes_read_.fetch_add(bytes, std::memory_order_relaxed);
      read_ns_.fetch_add(ns, std::memory_order_relaxed);
      break;
    case Kind::kWrite:
      writes_.fetch_add(1, std::memory_order_relaxed);
      bytes_written_.fetch_add(bytes, std::memory_order_relaxed);
      write_ns_.fetch_add(ns, std::memory_order_relaxed);
      break;
    case Kind::kSync:
      syncs_.fetch_add(1, std::memory_order_relaxed);
      break;
  }
}

RadosDiskStats RadosStatsRecorder::Snapshot() const {
  RadosDiskStats s;
  s.reads = reads_.load(std::memory_order_relaxed);
  s.writes = writes_.load(std::memory_order_relaxed);
  s.syncs = syncs_.load(std::memory_order_relaxed);
  s.bytes_read = bytes_read_.load(std::memory_order_relaxed);
  s.bytes_written = bytes_written_.load(std::memory_order_relaxed);
  s.operations = operations_.load(std::memory_order_relaxed);
  s.errors = errors_.load(std::memory_order_relaxed);
  s.timeouts = timeouts_.load(std::memory_order_relaxed);
  s.in_flight = in_flight_.load(std::memory_order_relaxed);
  s.max_in_flight = max_in_flight_.load(std::memory_order_relaxed);
  s.read_ns = read_ns_.load(std::memory_order_relaxed);
  s.write_ns = write_ns_.load(std::memory_order_relaxed);
  for (size_t b = 0; b < kLatencyBuckets; ++b) {
    s.latency_buckets[b] = buckets_[b].load(std::memory_order_relaxed);
  }
  return s;
}

std::string FormatRadosStats(const std::vector<NamedRadosStats>& disks) {
  std::string out;
  char line[512];
  for (const NamedRadosStats& d : disks) {
    const RadosDiskStats& s = d.stats;
    const double mean_read = s.reads > 0 ? double(s.read_ns) / 1e9 / double(s.reads) : 0;
    const double mean_write = s.writes > 0 ? double(s.write_ns) / 1e9 / double(s.writes) : 0;
    std::snprintf(
        line, sizeof(line),
        "rados disk %u (%s): %llu reads %.1f MB (mean %s ms), %llu writes %.1f MB "
        "(mean %s ms), p50 %s ms, p99 %s ms, %llu in flight (max %llu), %llu errors "
        "(%llu timeouts), %llu operations\n",
        d.disk, d.name.c_str(), static_cast<unsigned long long>(s.reads),
        double(s.bytes_read) / 1e6, Millis(mean_read).c_str(),
        static_cast<unsigned long long>(s.writes), double(s.bytes_written) / 1e6,
        Millis(mean_write).c_str(), Millis(s.LatencyQuantileSeconds(0.5)).c_str(),
        Millis(s.LatencyQuantileSeconds(0.99)).c_str(),
        static_cast<unsigned long long>(s.in_flight),
        static_cast<unsigned long long>(s.max_in_flight), static_cast<unsigned long long>(s.errors),
        static_cast<unsigned long long>(s.timeouts), static_cast<unsigned long long>(s.operations));
    out += line;
  }
  return out;
}

std::string RadosStatsJsonMember(const std::vector<NamedRadosStats>& disks) {
  std::string out = "\"rados_disks\":[";
  char value[64];
  for (size_t i = 0; i < disks.size(); ++i) {
    if (i > 0) out += ",";
    out += "{\"disk\":" + std::to_string(disks[i].disk) + ",\"name\":\"";
    for (char c : disks[i].name) {  // names hold no control characters; quote what JSON needs
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += "\"";
    for (const Field& f : kFields) {
      auto [end, ec] = std::to_chars(value, value + sizeof(value), f.get(disks[i].stats));
      out += std::string(",\"") + f.json + "\":" + std::string(value, end);
    }
    out += "}";
  }
  return out + "]";
}

void AppendRadosStatsPrometheus(std::string* out, const std::vector<NamedRadosStats>& disks) {
  if (disks.empty()) return;
  for (const Field& f : kFields) {
    const std::string name = std::string("tipfs_rados_") + f.prometheus;
    AppendPrometheusHeader(out, name, f.type, f.help);
    for (const NamedRadosStats& d : disks) {
      AppendPrometheusSample(out, name, {{"disk", std::to_string(d.disk)}}, f.get(d.stats));
    }
  }
}

}  // namespace tipfs::stripe
