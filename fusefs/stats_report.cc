#include "fusefs/stats_report.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdarg>
#include <cstdio>

#include "util/units.h"

namespace tipfs::fusefs {
namespace {

void Appendf(std::string* out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void Appendf(std::string* out, const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  int n = std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  if (n > 0) out->append(buffer, std::min<size_t>(static_cast<size_t>(n), sizeof(buffer) - 1));
}

double Percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

const char* SourceName(size_t i) {
  return cache::HintSourceName(static_cast<cache::HintSource>(i));
}

// Name/value pairs shared by the JSON and Prometheus renderings, so both always say the same.
struct Field {
  const char* name;
  double value;
  const char* type;  // "counter" or "gauge"
  const char* help;
};

std::vector<Field> CacheFields(const cache::CacheStats& s) {
  return {
      {"cache.capacity.bytes", double(s.capacity_blocks * s.block_size), "gauge", "Cache capacity"},
      {"cache.block.bytes", double(s.block_size), "gauge", "Cache block size"},
      {"cache.buffers.lru", double(s.lru_buffers), "gauge", "Buffers in the LRU part"},
      {"cache.buffers.hinted", double(s.hinted_buffers), "gauge", "Buffers held for hints"},
      {"cache.buffers.evict_first", double(s.evict_first_buffers), "gauge",
       "Buffers of cancelled hints"},
      {"cache.buffers.fetching", double(s.fetching_buffers), "gauge", "Buffers being fetched"},
      {"demand.reads", double(s.demand_reads), "counter", "Demand read requests"},
      {"demand.hits", double(s.demand_hits), "counter", "Demand block reads served from memory"},
      {"demand.misses", double(s.demand_misses), "counter",
       "Demand block reads that waited for a disk"},
      {"demand.stall.nanos", double(s.stall_nanos), "counter", "Time readers waited for disks"},
      {"readahead.issued", double(s.readahead_issued), "counter", "Read-ahead blocks fetched"},
      {"readahead.hits", double(s.readahead_hits), "counter", "Read-ahead blocks then read"},
      {"readahead.evicted_unused", double(s.readahead_evicted_unused), "counter",
       "Read-ahead blocks never read"},
      {"hints.calls", double(s.hint_calls), "counter", "Hint calls"},
      {"hints.refused", double(s.hints_refused), "counter", "Hint calls refused by a cap"},
      {"hints.prefetched", double(s.hinted_prefetched), "counter", "Blocks prefetched for hints"},
      {"hints.used", double(s.hinted_used), "counter", "Prefetched hinted blocks then read"},
      {"hints.evicted_unused", double(s.hinted_evicted_unused), "counter",
       "Hinted blocks evicted unread"},
      {"hints.cancelled", double(s.hinted_cancelled), "counter", "Hinted accesses cancelled"},
      {"hints.skipped", double(s.hinted_skipped), "counter",
       "Hinted accesses passed over by the reader"},
      {"hints.shared_consumed", double(s.shared_consumed), "counter",
       "Hinted accesses of shared streams read by the sharer's descendants"},
      {"hints.outstanding.bytes", double(s.outstanding_hinted_bytes), "gauge",
       "Hinted bytes not yet read"},
      {"hints.streams.active", double(s.streams_active), "gauge", "Hint streams"},
      {"hints.tainted.outstanding.bytes", double(s.outstanding_tainted_bytes), "gauge",
       "Tainted speculative hinted bytes not yet read"},
      {"hints.tainted.outstanding_max.bytes", double(s.tainted_outstanding_max_bytes), "gauge",
       "Most tainted speculative hinted bytes one process had outstanding"},
      {"hints.tainted.trimmed.bytes", double(s.tainted_trimmed_bytes), "counter",
       "Tainted speculative hinted bytes dropped by the tainted budget"},
      {"hints.horizon", s.prefetch_horizon, "gauge", "Prefetch horizon in block accesses"},
      // The TIP manager's estimates (per disk T_disk: the JSON and Prometheus renderings).
      {"hints.estimate.t_hit.seconds", s.t_hit_nanos / 1e9, "gauge",
       "TIP's T_hit: CPU time to serve one cached block access"},
      {"hints.estimate.t_driver.seconds", s.t_driver_nanos / 1e9, "gauge",
       "TIP's T_driver: CPU time to issue and complete one disk fetch"},
      {"speculation.reads", double(s.spec_reads), "counter", "Reads by speculating processes"},
      {"speculation.hits", double(s.spec_hits), "counter", "Speculative reads served from memory"},
      {"speculation.eagain", double(s.spec_eagain), "counter",
       "Speculative reads turned into hints"},
      {"cache.evictions", double(s.evictions), "counter", "Blocks evicted"},
      {"cache.fetch_errors", double(s.fetch_errors), "counter", "Disk reads that failed"},
  };
}

}  // namespace

StatsReport::StatsReport(FileSystem* fs, cache::FileCache* cache, DiskArray* disks,
                         HintIoctls* hints, Statistics* statistics, Clock* clock,
                         std::string mountpoint)
    : fs_(fs),
      cache_(cache),
      disks_(disks),
      hints_(hints),
      statistics_(statistics),
      clock_(clock),
      mountpoint_(std::move(mountpoint)),
      mounted_at_(clock->NowNanos()),
      perf_at_mount_(PerfCounters::Global()->Snapshot()) {}

void StatsReport::Register(ControlFiles* control) {
  control->Add("stats", [this] { return Text(); });
  control->Add("stats.json", [this] { return Json(); });
  control->Add("metrics", [this] { return Prometheus(); });
  control->Add("breakdown", [this] { return BreakdownText(); });
  control->Add("breakdown.json", [this] { return BreakdownJsonText(); });
  control->Add(
      "disk-model", [this] { return DiskModelText(); },
      [this](std::string_view spec) { return SetDiskModel(spec); });
}

std::string StatsReport::Text() const {
  const stripe::Label& label = fs_->volume()->label();
  cache::CacheStats s = cache_->Stats();
  std::string out;
  double uptime = static_cast<double>(clock_->NowNanos() - mounted_at_) / 1e9;
  Appendf(&out, "tipfs %s: volume %s, %zu disks, stripe unit %s, up %.1f s\n", mountpoint_.c_str(),
          label.volume_uuid.c_str(), label.disk_names.size(), FormatSize(label.stripe_unit).c_str(),
          uptime);
  Appendf(&out, "requests: %" PRIu64 " reads (%s), %" PRIu64 " writes (%s)\n",
          statistics_->Get(FUSE_READ_OPS), FormatSize(statistics_->Get(FUSE_READ_BYTES)).c_str(),
          statistics_->Get(FUSE_WRITE_OPS), FormatSize(statistics_->Get(FUSE_WRITE_BYTES)).c_str());
  Appendf(&out,
          "cache: %s in %s blocks; buffers lru %" PRIu64 ", hinted %" PRIu64
          ", evict-first %" PRIu64 ", fetching %" PRIu64 "\n",
          FormatSize(s.capacity_blocks * s.block_size).c_str(), FormatSize(s.block_size).c_str(),
          s.lru_buffers, s.hinted_buffers, s.evict_first_buffers, s.fetching_buffers);
  Appendf(&out,
          "demand: %" PRIu64 " reads; blocks: %" PRIu64 " hits (%.1f%%), %" PRIu64
          " misses; stall %.3f s\n",
          s.demand_reads, s.demand_hits, Percent(s.demand_hits, s.demand_hits + s.demand_misses),
          s.demand_misses, static_cast<double>(s.stall_nanos) / 1e9);
  Appendf(&out, "read-ahead: %" PRIu64 " issued, %" PRIu64 " hits, %" PRIu64 " evicted unused\n",
          s.readahead_issued, s.readahead_hits, s.readahead_evicted_unused);
  Appendf(&out,
          "hints: %" PRIu64 " calls (%" PRIu64 " refused); %" PRIu64 " prefetched, %" PRIu64
          " used, %" PRIu64 " evicted unused, %" PRIu64 " cancelled, %" PRIu64
          " skipped; horizon %.1f\n",
          s.hint_calls, s.hints_refused, s.hinted_prefetched, s.hinted_used,
          s.hinted_evicted_unused, s.hinted_cancelled, s.hinted_skipped, s.prefetch_horizon);
  if (s.shared_consumed > 0) {
    Appendf(&out, "  shared      %" PRIu64 " blocks consumed by the sharers' descendants\n",
            s.shared_consumed);
  }
  for (size_t i = 0; i < cache::kHintSourceCount; ++i) {
    Appendf(&out, "  %-19s %s hinted, %" PRIu64 " blocks consumed, accuracy %.2f\n", SourceName(i),
            FormatSize(s.bytes_hinted[i]).c_str(), s.blocks_consumed[i], s.accuracy[i]);
  }
  Appendf(&out,
          "  estimates: T_hit %.1f us, T_driver %.1f us, T_disk ms per disk:", s.t_hit_nanos / 1e3,
          s.t_driver_nanos / 1e3);
  for (double t : s.t_disk_nanos) Appendf(&out, " %.2f", t / 1e6);
  out += "\n";
  Appendf(&out,
          "speculation: %zu attached, %" PRIu64 " reads, %" PRIu64 " hits, %" PRIu64
          " hinted instead (EAGAIN)\n",
          hints_->attached(), s.spec_reads, s.spec_hits, s.spec_eagain);
  Appendf(&out, "  tainted: %s outstanding (at most %s), %s trimmed by the budget\n",
          FormatSize(s.outstanding_tainted_bytes).c_str(),
          FormatSize(s.tainted_outstanding_max_bytes).c_str(),
          FormatSize(s.tainted_trimmed_bytes).c_str());
  if (disks_->emulation) {
    Appendf(&out, "disk model: %s\n", disks_->emulation->spec().c_str());
    out += stripe::FormatDiskStats(disks_->emulation->Stats());
  } else {
    out += "disk model: none (real timing; mount with --disk-model for per-disk statistics)\n";
  }
  if (disks_->health) out += stripe::FormatDiskHealth(*disks_->health, label.disk_names);
  out += stripe::FormatRadosStats(fs_->volume()->rados_stats());
  return out;
}

std::string StatsReport::Json() const {
  cache::CacheStats s = cache_->Stats();
  std::string out = "{";
  Appendf(&out, "\"mountpoint\":\"%s\",\"uptime_seconds\":%.3f,", mountpoint_.c_str(),
          static_cast<double>(clock_->NowNanos() - mounted_at_) / 1e9);
  for (const Field& f : CacheFields(s)) Appendf(&out, "\"%s\":%.17g,", f.name, f.value);
  for (size_t i = 0; i < cache::kHintSourceCount; ++i) {
    Appendf(&out,
            "\"hints.%s.bytes\":%" PRIu64 ",\"hints.%s.consumed\":%" PRIu64
            ",\"hints.%s.accuracy\":%.6g,",
            SourceName(i), s.bytes_hinted[i], SourceName(i), s.blocks_consumed[i], SourceName(i),
            s.accuracy[i]);
  }
  for (size_t d = 0; d < s.t_disk_nanos.size(); ++d) {
    Appendf(&out, "\"hints.estimate.t_disk.disk%zu.seconds\":%.6g,", d, s.t_disk_nanos[d] / 1e9);
  }
  std::array<uint64_t, TICKER_ENUM_MAX> tickers = statistics_->Snapshot();
  for (uint32_t t = 0; t < TICKER_ENUM_MAX; ++t) {
    Appendf(&out, "\"%s\":%" PRIu64 ",", TickerName(static_cast<Ticker>(t)), tickers[t]);
  }
  Appendf(&out, "\"disk_model\":\"%s\",",
          disks_->emulation ? disks_->emulation->spec().c_str() : "none");
  std::string disks = disks_->emulation ? stripe::DiskStatsJson(disks_->emulation->Stats())
                                        : std::string("{\"disks\":[]}");
  // DiskStatsJson is an object {"disks":[...]}: splice its member in.
  out += disks.substr(1, disks.size() - 2);
  if (disks_->health) {
    out += "," + stripe::DiskHealthJsonMember(*disks_->health, fs_->volume()->disk_count());
  }
  out += "," + stripe::RadosStatsJsonMember(fs_->volume()->rados_stats());
  out += "}\n";
  return out;
}

std::string StatsReport::Prometheus() const {
  cache::CacheStats s = cache_->Stats();
  std::string out;
  for (const Field& f : CacheFields(s)) {
    std::string name = PrometheusName(f.name);
    if (std::string_view(f.type) == "counter") name += "_total";
    AppendPrometheusHeader(&out, name, f.type, f.help);
    AppendPrometheusSample(&out, name, {}, f.value);
  }
  const std::string hinted = "tipfs_hints_bytes_total";
  AppendPrometheusHeader(&out, hinted, "counter", "Bytes hinted, by source");
  for (size_t i = 0; i < cache::kHintSourceCount; ++i) {
    AppendPrometheusSample(&out, hinted, {{"source", SourceName(i)}},
                           static_cast<double>(s.bytes_hinted[i]));
  }
  const std::string t_disk = "tipfs_hints_estimate_t_disk_seconds";
  AppendPrometheusHeader(&out, t_disk, "gauge", "TIP's T_disk: one fetch's service time, per disk");
  for (size_t d = 0; d < s.t_disk_nanos.size(); ++d) {
    AppendPrometheusSample(&out, t_disk, {{"disk", std::to_string(d)}}, s.t_disk_nanos[d] / 1e9);
  }
  out += statistics_->ToPrometheus();
  PerfBreakdown breakdown = Breakdown();
  const std::string perf = "tipfs_time_nanos_total";
  AppendPrometheusHeader(&out, perf, "counter", "Time spent per subsystem since mount");
  for (size_t i = 0; i < kSubsystemCount; ++i) {
    AppendPrometheusSample(&out, perf, {{"subsystem", SubsystemName(static_cast<Subsystem>(i))}},
                           static_cast<double>(breakdown.nanos[i]));
  }
  if (disks_->emulation) stripe::AppendDiskStatsPrometheus(&out, disks_->emulation->Stats());
  if (disks_->health) {
    stripe::AppendDiskHealthPrometheus(&out, *disks_->health, fs_->volume()->disk_count());
  }
  stripe::AppendRadosStatsPrometheus(&out, fs_->volume()->rados_stats());
  return out;
}

PerfBreakdown StatsReport::Breakdown() const {
  PerfSnapshot interval = PerfCounters::Global()->Snapshot().Since(perf_at_mount_);
  // The capacity is the CPU time the machine had: idle is what neither the daemon's work nor
  // its waiting used.
  int64_t wall = clock_->NowNanos() - mounted_at_;
  int64_t cpus = std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN));
  return ComputeBreakdown(interval, wall * cpus,
                          statistics_->Get(FUSE_READ_OPS) + statistics_->Get(FUSE_WRITE_OPS));
}

std::string StatsReport::BreakdownText() const {
  return "time by subsystem since mount (capacity = wall time x CPUs):\n" +
         FormatBreakdown(Breakdown());
}

std::string StatsReport::BreakdownJsonText() const { return BreakdownJson(Breakdown()) + "\n"; }

std::string StatsReport::DiskModelText() const {
  if (!disks_->emulation) return "none\n";
  return disks_->emulation->spec() + "\n" + stripe::DescribeDiskModel(disks_->emulation->config()) +
         "\n";
}

Status StatsReport::SetDiskModel(std::string_view spec) {
  while (!spec.empty() && (spec.back() == '\n' || spec.back() == ' ')) spec.remove_suffix(1);
  if (!disks_->emulation) {
    return Status::InvalidArgument(
        "this volume was mounted with real timing (--disk-model none); remount with a model to "
        "change it live");
  }
  return disks_->emulation->Update(spec);
}

}  // namespace tipfs::fusefs
