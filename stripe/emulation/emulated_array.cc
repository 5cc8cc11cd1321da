#include "stripe/emulation/emulated_array.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "util/mutex.h"

namespace tipfs::stripe {
namespace {

// One exported field of DiskStats: the same table feeds Prometheus and JSON.
struct StatField {
  const char* name;  // JSON key; Prometheus name is tipfs_disk_<name>
  const char* type;  // Prometheus type
  const char* help;
  double (*get)(const DiskStats&);
};

constexpr StatField kStatFields[] = {
    {"reads_total", "counter", "read requests", [](const DiskStats& s) { return double(s.reads); }},
    {"writes_total", "counter", "write requests",
     [](const DiskStats& s) { return double(s.writes); }},
    {"syncs_total", "counter", "sync requests", [](const DiskStats& s) { return double(s.syncs); }},
    {"read_bytes_total", "counter", "bytes read",
     [](const DiskStats& s) { return double(s.bytes_read); }},
    {"written_bytes_total", "counter", "bytes written",
     [](const DiskStats& s) { return double(s.bytes_written); }},
    {"positioned_total", "counter", "requests that paid positioning (random)",
     [](const DiskStats& s) { return double(s.positioned); }},
    {"sequential_total", "counter", "requests that continued the previous one",
     [](const DiskStats& s) { return double(s.sequential); }},
    {"busy_seconds_total", "counter", "modelled service time",
     [](const DiskStats& s) { return double(s.busy_ns) / 1e9; }},
    {"queue_wait_seconds_total", "counter", "modelled time waiting in the queue",
     [](const DiskStats& s) { return double(s.queue_wait_ns) / 1e9; }},
    {"response_seconds_total", "counter", "submit to completion, summed",
     [](const DiskStats& s) { return double(s.response_ns) / 1e9; }},
    {"completed_total", "counter", "completions delivered",
     [](const DiskStats& s) { return double(s.completed); }},
    {"late_total", "counter", "completions the real disk held past the model deadline",
     [](const DiskStats& s) { return double(s.late); }},
    {"overhead_seconds_total", "counter", "CPU overhead o charged",
     [](const DiskStats& s) { return double(s.overhead_ns) / 1e9; }},
    {"errors_total", "counter", "completions with an error",
     [](const DiskStats& s) { return double(s.errors); }},
    {"queue_depth", "gauge", "requests waiting or in service now",
     [](const DiskStats& s) { return double(s.queue_depth); }},
    {"in_flight", "gauge", "requests submitted and not yet completed now",
     [](const DiskStats& s) { return double(s.in_flight); }},
    {"queue_depth_max", "gauge", "largest queue depth seen",
     [](const DiskStats& s) { return double(s.max_queue_depth); }},
    {"queue_depth_avg", "gauge", "time-weighted mean queue depth",
     [](const DiskStats& s) { return s.avg_queue_depth; }},
    {"utilization", "gauge", "share of time the disk was busy",
     [](const DiskStats& s) { return s.utilization(); }},
    // The two counters a tool needs for the mean queue depth over its own window (difference of
    // queue_depth_seconds over difference of elapsed), as node_exporter's weighted I/O time.
    {"elapsed_seconds_total", "counter", "time these statistics cover",
     [](const DiskStats& s) { return double(s.elapsed_ns) / 1e9; }},
    {"queue_depth_seconds_total", "counter",
     "queue depth integrated over time (requests x seconds); its rate is the mean depth",
     [](const DiskStats& s) { return s.avg_queue_depth * double(s.elapsed_ns) / 1e9; }},
};

std::string Ms(double nanos) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", nanos / 1e6);
  return buf;
}

}  // namespace

Result<std::shared_ptr<EmulatedArray>> EmulatedArray::Create(std::string_view spec, Clock* clock,
                                                             Statistics* statistics,
                                                             bool burn_overhead) {
  Result<DiskModelConfig> config = ParseDiskModelSpec(spec);
  if (!config.ok()) return config.status();
  return std::make_shared<EmulatedArray>(*config, clock, statistics, burn_overhead);
}

EmulatedArray::EmulatedArray(const DiskModelConfig& config, Clock* clock, Statistics* statistics,
                             bool burn_overhead)
    : clock_(clock), statistics_(statistics), burn_overhead_(burn_overhead), config_(config) {}

std::unique_ptr<Disk> EmulatedArray::Wrap(std::unique_ptr<Disk> disk, uint32_t index) {
  MutexLock lock(&mu_);
  EmulatedDiskOptions options;
  options.model = config_;
  options.burn_overhead = burn_overhead_;
  options.statistics = statistics_;
  auto emulated = std::make_unique<EmulatedDisk>(std::move(disk), clock_, options);
  if (disks_.size() <= index) disks_.resize(index + 1);
  disks_[index] = emulated->shared_emulator();
  return emulated;
}

std::function<std::unique_ptr<Disk>(std::unique_ptr<Disk>, uint32_t)>
EmulatedArray::WrapFunction() {
  std::shared_ptr<EmulatedArray> self = shared_from_this();
  return [self](std::unique_ptr<Disk> disk, uint32_t index) {
    return self->Wrap(std::move(disk), index);
  };
}

Status EmulatedArray::Update(std::string_view spec) {
  std::vector<std::shared_ptr<DiskEmulator>> disks;
  DiskModelConfig config;
  {
    MutexLock lock(&mu_);
    Result<DiskModelConfig> updated = UpdateDiskModelSpec(config_, spec);
    if (!updated.ok()) return updated.status();
    config_ = *updated;
    config = config_;
    disks = disks_;
  }
  for (const auto& disk : disks) {
    if (disk) disk->SetModel(config);
  }
  return Status::OK();
}

DiskModelConfig EmulatedArray::config() const {
  MutexLock lock(&mu_);
  return config_;
}

std::vector<DiskStats> EmulatedArray::Stats() const {
  std::vector<std::shared_ptr<DiskEmulator>> disks;
  {
    MutexLock lock(&mu_);
    disks = disks_;
  }
  std::vector<DiskStats> stats(disks.size());
  for (size_t i = 0; i < disks.size(); ++i) {
    if (disks[i]) stats[i] = disks[i]->Stats();
  }
  return stats;
}

void EmulatedArray::ResetStats() {
  std::vector<std::shared_ptr<DiskEmulator>> disks;
  {
    MutexLock lock(&mu_);
    disks = disks_;
  }
  for (const auto& disk : disks) {
    if (disk) disk->ResetStats();
  }
}

uint32_t EmulatedArray::disk_count() const {
  MutexLock lock(&mu_);
  return static_cast<uint32_t>(disks_.size());
}

DiskStats SumDiskStats(const std::vector<DiskStats>& disks) {
  DiskStats t;
  for (const DiskStats& s : disks) {
    t.reads += s.reads;
    t.writes += s.writes;
    t.syncs += s.syncs;
    t.bytes_read += s.bytes_read;
    t.bytes_written += s.bytes_written;
    t.positioned += s.positioned;
    t.sequential += s.sequential;
    t.started += s.started;
    t.busy_ns += s.busy_ns;
    t.queue_wait_ns += s.queue_wait_ns;
    t.queue_depth += s.queue_depth;
    t.max_queue_depth = std::max(t.max_queue_depth, s.max_queue_depth);
    t.avg_queue_depth += s.avg_queue_depth;
    t.elapsed_ns += s.elapsed_ns;
    t.completed += s.completed;
    t.response_ns += s.response_ns;
    t.late += s.late;
    t.late_ns += s.late_ns;
    t.overhead_ns += s.overhead_ns;
    t.errors += s.errors;
    t.in_flight += s.in_flight;
  }
  return t;
}

std::string FormatDiskStats(const std::vector<DiskStats>& disks) {
  std::string out =
      "disk  requests   MB read  MB written   util  avg qd  max qd    random  sequential  "
      "mean resp ms  late\n";
  char line[192];
  auto row = [&](const std::string& label, const DiskStats& s) {
    const double mean_response =
        s.completed > 0 ? static_cast<double>(s.response_ns) / static_cast<double>(s.completed) : 0;
    std::snprintf(
        line, sizeof(line), "%-5s %8llu %9.1f %11.1f %5.1f%% %7.2f %7u %9llu %11llu %13s %5llu\n",
        label.c_str(), static_cast<unsigned long long>(s.requests()),
        static_cast<double>(s.bytes_read) / 1e6, static_cast<double>(s.bytes_written) / 1e6,
        s.utilization() * 100.0, s.avg_queue_depth, s.max_queue_depth,
        static_cast<unsigned long long>(s.positioned),
        static_cast<unsigned long long>(s.sequential), Ms(mean_response).c_str(),
        static_cast<unsigned long long>(s.late));
    out += line;
  };
  for (size_t i = 0; i < disks.size(); ++i) row(std::to_string(i), disks[i]);
  if (disks.size() > 1) row("all", SumDiskStats(disks));
  return out;
}

void AppendDiskStatsPrometheus(std::string* out, const std::vector<DiskStats>& disks) {
  for (const StatField& field : kStatFields) {
    // "model": the emulated disks' own view (tipfs_disk_io_* is what tipfs measured of them).
    std::string name = std::string("tipfs_disk_model_") + field.name;
    AppendPrometheusHeader(out, name, field.type, field.help);
    for (size_t i = 0; i < disks.size(); ++i) {
      AppendPrometheusSample(out, name, {{"disk", std::to_string(i)}}, field.get(disks[i]));
    }
  }
}

std::string DiskStatsJson(const std::vector<DiskStats>& disks) {
  std::string out = "{\"disks\":[";
  char value[64];
  for (size_t i = 0; i < disks.size(); ++i) {
    if (i > 0) out += ",";
    out += "{\"index\":" + std::to_string(i);
    for (const StatField& field : kStatFields) {
      // Shortest text that reads back exactly; integers print without a fraction.
      auto [end, ec] = std::to_chars(value, value + sizeof(value), field.get(disks[i]));
      out += std::string(",\"") + field.name + "\":" + std::string(value, end);
    }
    out += "}";
  }
  out += "]}";
  return out;
}

}  // namespace tipfs::stripe
