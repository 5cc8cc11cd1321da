#include "fusefs/stats_report.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <fstream>

#include "stripe/backing_io.h"
#include "util/timeline.h"
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
// Prometheus names follow its conventions: base units (seconds, bytes), `_total` on counters,
// the unit before it (tipfs_demand_stall_seconds_total); `scale` turns the JSON value into it.
struct Field {
  const char* name;        // JSON key
  const char* prometheus;  // metric name
  double value;
  const char* type;  // "counter" or "gauge"
  const char* help;
  double scale = 1.0;
};

std::vector<Field> CacheFields(const cache::CacheStats& s) {
  return {
      {"cache.capacity.bytes", "tipfs_cache_capacity_bytes",
       double(s.capacity_blocks * s.block_size), "gauge", "Cache capacity"},
      {"cache.block.bytes", "tipfs_cache_block_bytes", double(s.block_size), "gauge",
       "Cache block size"},
      {"cache.buffers.lru", "tipfs_cache_lru_buffers", double(s.lru_buffers), "gauge",
       "Buffers in the LRU part"},
      {"cache.buffers.hinted", "tipfs_cache_hinted_buffers", double(s.hinted_buffers), "gauge",
       "Buffers held for hints"},
      {"cache.buffers.evict_first", "tipfs_cache_evict_first_buffers",
       double(s.evict_first_buffers), "gauge", "Buffers of cancelled hints"},
      {"cache.buffers.fetching", "tipfs_cache_fetching_buffers", double(s.fetching_buffers),
       "gauge", "Buffers being fetched"},
      {"demand.reads", "tipfs_demand_reads_total", double(s.demand_reads), "counter",
       "Demand read requests"},
      {"demand.hits", "tipfs_demand_hit_blocks_total", double(s.demand_hits), "counter",
       "Demand block reads served from memory"},
      {"demand.hits_without_table_lock", "tipfs_demand_hit_blocks_unlocked_total",
       double(s.hits_without_table_lock), "counter",
       "Demand block hits served without the cache's lock (shard mutexes only)"},
      {"demand.misses", "tipfs_demand_miss_blocks_total", double(s.demand_misses), "counter",
       "Demand block reads that waited for a disk"},
      {"demand.private_fetches", "tipfs_demand_private_fetches_total",
       double(s.demand_private_fetches), "counter",
       "Demand misses read into a buffer of their own (the block was being filled)"},
      {"demand.span_fetches", "tipfs_demand_span_fetches_total", double(s.demand_span_fetches),
       "counter", "Demand misses of a partial block read as one span over its valid pages"},
      {"demand.stall.nanos", "tipfs_demand_stall_seconds_total", double(s.stall_nanos), "counter",
       "Time readers waited for disks", 1e-9},
      {"readahead.issued", "tipfs_readahead_issued_blocks_total", double(s.readahead_issued),
       "counter", "Read-ahead blocks fetched"},
      {"readahead.hits", "tipfs_readahead_hit_blocks_total", double(s.readahead_hits), "counter",
       "Read-ahead blocks then read"},
      {"readahead.evicted_unused", "tipfs_readahead_evicted_unused_blocks_total",
       double(s.readahead_evicted_unused), "counter", "Read-ahead blocks never read"},
      {"hints.calls", "tipfs_hint_calls_total", double(s.hint_calls), "counter", "Hint calls"},
      {"hints.refused", "tipfs_hint_refused_calls_total", double(s.hints_refused), "counter",
       "Hint calls refused by a cap"},
      {"hints.prefetched", "tipfs_hint_prefetched_blocks_total", double(s.hinted_prefetched),
       "counter", "Blocks prefetched for hints"},
      {"hints.fills", "tipfs_hint_fills_total", double(s.hinted_fills), "counter",
       "Prefetches of hinted bytes a cached block lacked"},
      {"hints.used", "tipfs_hint_used_blocks_total", double(s.hinted_used), "counter",
       "Prefetched hinted blocks then read"},
      {"hints.evicted_unused", "tipfs_hint_evicted_unused_blocks_total",
       double(s.hinted_evicted_unused), "counter", "Hinted blocks evicted unread"},
      {"hints.cancelled", "tipfs_hint_cancelled_accesses_total", double(s.hinted_cancelled),
       "counter", "Hinted accesses cancelled"},
      {"hints.skipped", "tipfs_hint_skipped_accesses_total", double(s.hinted_skipped), "counter",
       "Hinted accesses passed over by the reader"},
      {"hints.stops.disks_full", "tipfs_hint_prefetch_stops_disks_full_total",
       double(s.prefetch_stops_disks_full), "counter",
       "Hinted prefetching stopped for a round: every disk had its share of prefetches"},
      {"hints.stops.no_candidate", "tipfs_hint_prefetch_stops_no_candidate_total",
       double(s.prefetch_stops_no_candidate), "counter",
       "Hinted prefetching stopped for a round: no access due on a disk with room"},
      {"hints.stops.beyond_horizon", "tipfs_hint_prefetch_stops_beyond_horizon_total",
       double(s.prefetch_stops_beyond_horizon), "counter",
       "Hinted prefetching stopped for a round: the best access was beyond its horizon, no room"},
      {"hints.stops.no_buffer", "tipfs_hint_prefetch_stops_no_buffer_total",
       double(s.prefetch_stops_no_buffer), "counter",
       "Hinted prefetching stopped for a round: no buffer worth taking for the best access"},
      {"cache.ghost_hits", "tipfs_cache_ghost_hits_total", double(s.ghost_hits), "counter",
       "Demand misses one more LRU buffer would have made hits (blocks evicted lately)"},
      {"cache.lru_tail_hits", "tipfs_cache_lru_tail_hits_total", double(s.lru_tail_hits), "counter",
       "Demand hits in the LRU's tail window, which price its coldest buffers"},
      {"hints.ejected", "tipfs_hint_ejected_blocks_total", double(s.hinted_ejected), "counter",
       "Hinted blocks given up for a better use of their buffers (TIP ejection)"},
      {"hints.kept_for_reuse", "tipfs_hint_kept_for_reuse_blocks_total",
       double(s.hinted_kept_for_reuse), "counter",
       "Blocks kept after a read because the reader's hints read them again later"},
      {"hints.shared_consumed", "tipfs_hint_shared_consumed_accesses_total",
       double(s.shared_consumed), "counter",
       "Hinted accesses of shared streams read by the sharer's descendants"},
      {"hints.outstanding.bytes", "tipfs_hint_outstanding_bytes",
       double(s.outstanding_hinted_bytes), "gauge", "Hinted bytes not yet read"},
      {"hints.streams.active", "tipfs_hint_streams", double(s.streams_active), "gauge",
       "Hint streams"},
      {"hints.tainted.outstanding.bytes", "tipfs_hint_tainted_outstanding_bytes",
       double(s.outstanding_tainted_bytes), "gauge",
       "Tainted speculative hinted bytes not yet read"},
      {"hints.tainted.outstanding_max.bytes", "tipfs_hint_tainted_outstanding_max_bytes",
       double(s.tainted_outstanding_max_bytes), "gauge",
       "Most tainted speculative hinted bytes one process had outstanding"},
      {"hints.tainted.trimmed.bytes", "tipfs_hint_tainted_trimmed_bytes_total",
       double(s.tainted_trimmed_bytes), "counter",
       "Tainted speculative hinted bytes dropped by the tainted budget"},
      {"hints.manager.rounds", "tipfs_hint_manager_rounds_total", double(s.manager_rounds),
       "counter", "Rounds of decisions the TIP manager ran"},
      {"hints.manager.wakeups", "tipfs_hint_manager_wakeups_total", double(s.manager_wakeups),
       "counter", "Times the TIP manager's thread was woken from sleep for a round"},
      {"hints.horizon", "tipfs_hint_prefetch_horizon_blocks", s.prefetch_horizon, "gauge",
       "Prefetch horizon in block accesses"},
      // The TIP manager's estimates (per disk T_disk: the JSON and Prometheus renderings).
      {"hints.estimate.t_hit.seconds", "tipfs_hints_estimate_t_hit_seconds", s.t_hit_nanos / 1e9,
       "gauge", "TIP's T_hit: CPU time to serve one cached block access"},
      {"hints.estimate.t_driver.seconds", "tipfs_hints_estimate_t_driver_seconds",
       s.t_driver_nanos / 1e9, "gauge",
       "TIP's T_driver: CPU time to issue and complete one disk fetch"},
      {"speculation.reads", "tipfs_speculation_reads_total", double(s.spec_reads), "counter",
       "Reads by speculating processes"},
      {"speculation.hits", "tipfs_speculation_hits_total", double(s.spec_hits), "counter",
       "Speculative reads served from memory"},
      {"speculation.eagain", "tipfs_speculation_hinted_reads_total", double(s.spec_eagain),
       "counter", "Speculative reads turned into hints"},
      {"speculation.redundant.bytes", "tipfs_speculation_redundant_bytes_total",
       double(s.spec_redundant_bytes), "counter",
       "Bytes of speculative reads not hinted: cached, in flight or just hinted"},
      {"cache.evictions", "tipfs_cache_evicted_blocks_total", double(s.evictions), "counter",
       "Blocks evicted"},
      {"cache.fetch_errors", "tipfs_cache_fetch_errors_total", double(s.fetch_errors), "counter",
       "Disk reads that failed"},
      {"cache.writes.patched", "tipfs_cache_write_patched_blocks_total",
       double(s.write_blocks_updated), "counter", "Cached blocks patched by writes"},
      {"cache.writes.patched_in_place", "tipfs_cache_write_patched_in_place_blocks_total",
       double(s.write_blocks_patched_in_place), "counter",
       "Cached blocks patched in place by writes (no reader held the buffer)"},
      {"cache.writes.copied.bytes", "tipfs_cache_write_copied_bytes_total",
       double(s.write_copied_bytes), "counter",
       "Bytes writes copied into new buffers to patch cached blocks readers held"},
      {"cache.writes.dropped", "tipfs_cache_write_dropped_blocks_total",
       double(s.write_blocks_dropped), "counter",
       "Cached blocks dropped by writes that overlapped other writes to the file"},
  };
}

// Accuracy is a measure of hints given: "-" for a source that gave none (not 1.00).
std::string AccuracyText(const cache::CacheStats& s, size_t source) {
  if (s.bytes_hinted[source] == 0) return "-";
  char text[16];
  std::snprintf(text, sizeof(text), "%.2f", s.accuracy[source]);
  return text;
}

// The measured per-disk figures (DiskActivity), one line per disk and a total.
std::string FormatActivity(const std::vector<stripe::DiskActivityStats>& disks) {
  std::string out =
      "disk    reads  demand  r-ahead  hinted  spec   writes   MB read  MB written   busy  "
      "avg out  mean resp ms\n";
  stripe::DiskActivityStats total;
  auto row = [&out](const std::string& label, const stripe::DiskActivityStats& s, double disks) {
    const double elapsed = static_cast<double>(s.elapsed_ns);
    Appendf(&out,
            "%-5s %8" PRIu64 " %7" PRIu64 " %8" PRIu64 " %7" PRIu64 " %5" PRIu64 " %8" PRIu64
            " %9.1f %11.1f %5.1f%% %8.2f %13.3f\n",
            label.c_str(), s.reads, s.reads_by_purpose[0], s.reads_by_purpose[1],
            s.reads_by_purpose[2], s.reads_by_purpose[3], s.writes, double(s.bytes_read) / 1e6,
            double(s.bytes_written) / 1e6,
            elapsed > 0 ? 100.0 * double(s.busy_ns) / elapsed / disks : 0.0,
            elapsed > 0 ? double(s.outstanding_ns) / elapsed : 0.0,
            s.completed > 0 ? double(s.response_ns) / double(s.completed) / 1e6 : 0.0);
  };
  for (size_t i = 0; i < disks.size(); ++i) {
    row(std::to_string(i), disks[i], 1);
    const stripe::DiskActivityStats& d = disks[i];
    total.reads += d.reads;
    total.writes += d.writes;
    total.bytes_read += d.bytes_read;
    total.bytes_written += d.bytes_written;
    for (size_t p = 0; p < stripe::kPurposeCount; ++p) {
      total.reads_by_purpose[p] += d.reads_by_purpose[p];
    }
    total.busy_ns += d.busy_ns;
    total.outstanding_ns += d.outstanding_ns;
    total.response_ns += d.response_ns;
    total.completed += d.completed;
    total.elapsed_ns = d.elapsed_ns;
  }
  if (disks.size() > 1) row("all", total, double(disks.size()));
  return out;
}

std::string ActivityJson(const std::vector<stripe::DiskActivityStats>& disks) {
  std::string out = "\"disk_activity\":[";
  for (size_t i = 0; i < disks.size(); ++i) {
    const stripe::DiskActivityStats& s = disks[i];
    Appendf(&out,
            "%s{\"index\":%zu,\"reads\":%" PRIu64 ",\"writes\":%" PRIu64 ",\"syncs\":%" PRIu64
            ",\"read_bytes\":%" PRIu64 ",\"written_bytes\":%" PRIu64,
            i == 0 ? "" : ",", i, s.reads, s.writes, s.syncs, s.bytes_read, s.bytes_written);
    for (size_t p = 0; p < stripe::kPurposeCount; ++p) {
      const char* name = stripe::PurposeName(static_cast<stripe::DiskRequest::Purpose>(p));
      Appendf(&out, ",\"reads_%s\":%" PRIu64 ",\"read_bytes_%s\":%" PRIu64, name,
              s.reads_by_purpose[p], name, s.bytes_by_purpose[p]);
    }
    const double elapsed = static_cast<double>(s.elapsed_ns);
    Appendf(&out,
            ",\"busy_seconds\":%.6f,\"utilization\":%.6f,\"avg_outstanding\":%.6f,"
            "\"queue_depth\":%u,\"max_queue_depth\":%u,\"response_seconds\":%.6f,"
            "\"completed\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"elapsed_seconds\":%.6f}",
            double(s.busy_ns) / 1e9, elapsed > 0 ? double(s.busy_ns) / elapsed : 0.0,
            elapsed > 0 ? double(s.outstanding_ns) / elapsed : 0.0, s.outstanding,
            s.max_outstanding, double(s.response_ns) / 1e9, s.completed, s.errors, elapsed / 1e9);
  }
  return out + "]";
}

void AppendActivityPrometheus(std::string* out,
                              const std::vector<stripe::DiskActivityStats>& disks) {
  auto each = [&](const char* name, const char* type, const char* help, auto value) {
    AppendPrometheusHeader(out, name, type, help);
    for (size_t i = 0; i < disks.size(); ++i) value(std::to_string(i), disks[i]);
  };
  each("tipfs_disk_io_requests_total", "counter", "Requests each disk completed, by kind",
       [&](const std::string& d, const stripe::DiskActivityStats& s) {
         AppendPrometheusSample(out, "tipfs_disk_io_requests_total",
                                {{"disk", d}, {"kind", "read"}}, double(s.reads));
         AppendPrometheusSample(out, "tipfs_disk_io_requests_total",
                                {{"disk", d}, {"kind", "write"}}, double(s.writes));
         AppendPrometheusSample(out, "tipfs_disk_io_requests_total",
                                {{"disk", d}, {"kind", "sync"}}, double(s.syncs));
       });
  each("tipfs_disk_io_read_bytes_total", "counter", "Bytes read from each disk, by purpose",
       [&](const std::string& d, const stripe::DiskActivityStats& s) {
         for (size_t p = 0; p < stripe::kPurposeCount; ++p) {
           AppendPrometheusSample(
               out, "tipfs_disk_io_read_bytes_total",
               {{"disk", d},
                {"purpose", stripe::PurposeName(static_cast<stripe::DiskRequest::Purpose>(p))}},
               double(s.bytes_by_purpose[p]));
         }
       });
  auto simple = [&](const char* name, const char* type, const char* help, auto get) {
    each(name, type, help, [&](const std::string& d, const stripe::DiskActivityStats& s) {
      AppendPrometheusSample(out, name, {{"disk", d}}, get(s));
    });
  };
  simple("tipfs_disk_io_written_bytes_total", "counter", "Bytes written to each disk",
         [](const stripe::DiskActivityStats& s) { return double(s.bytes_written); });
  simple("tipfs_disk_io_busy_seconds_total", "counter",
         "Time each disk had at least one request outstanding",
         [](const stripe::DiskActivityStats& s) { return double(s.busy_ns) / 1e9; });
  simple("tipfs_disk_io_outstanding_seconds_total", "counter",
         "Requests outstanding integrated over time (its rate is the mean number outstanding)",
         [](const stripe::DiskActivityStats& s) { return double(s.outstanding_ns) / 1e9; });
  simple("tipfs_disk_io_response_seconds_total", "counter", "Submit to completion, summed",
         [](const stripe::DiskActivityStats& s) { return double(s.response_ns) / 1e9; });
  simple("tipfs_disk_io_outstanding", "gauge", "Requests outstanding now",
         [](const stripe::DiskActivityStats& s) { return double(s.outstanding); });
}

}  // namespace

StatsReport::StatsReport(FileSystem* fs, cache::FileCache* cache, DiskArray* disks,
                         HintIoctls* hints, Statistics* statistics, Clock* clock,
                         std::string mountpoint, DataCacheMode data_cache)
    : fs_(fs),
      cache_(cache),
      disks_(disks),
      hints_(hints),
      statistics_(statistics),
      clock_(clock),
      mountpoint_(std::move(mountpoint)),
      data_cache_(data_cache),
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
  control->Add("streams", [this] { return StreamsText(); });
  // The events recorded so far; writing "start" begins a recording, "stop" ends it.
  control->Add(
      "timeline", [this] { return TimelineRecorder::Global()->Text(fs_->volume()->disk_count()); },
      [](std::string_view command) {
        while (!command.empty() && (command.back() == '\n' || command.back() == ' ')) {
          command.remove_suffix(1);
        }
        if (command == "start") {
          TimelineRecorder::Global()->Start();
        } else if (command == "stop") {
          TimelineRecorder::Global()->Stop();
        } else {
          return Status::InvalidArgument("timeline: write start or stop");
        }
        return Status::OK();
      });
}

std::string StatsReport::Text() const {
  const stripe::Label& label = fs_->volume()->label();
  cache::CacheStats s = cache_->Stats();
  std::string out;
  double uptime = static_cast<double>(clock_->NowNanos() - mounted_at_) / 1e9;
  Appendf(&out,
          "tipfs %s: volume %s, %zu disks, stripe unit %s, data cache %s, up %.1f s (tipfs %s)\n",
          mountpoint_.c_str(), label.volume_uuid.c_str(), label.disk_names.size(),
          FormatSize(label.stripe_unit).c_str(), DataCacheName(), uptime, TIPFS_VERSION);
  Appendf(&out,
          "requests: %" PRIu64 " reads (%s), %" PRIu64 " writes (%s), %" PRIu64
          " getattrs, %" PRIu64 " lookups\n",
          statistics_->Get(FUSE_READ_OPS), FormatSize(statistics_->Get(FUSE_READ_BYTES)).c_str(),
          statistics_->Get(FUSE_WRITE_OPS), FormatSize(statistics_->Get(FUSE_WRITE_BYTES)).c_str(),
          statistics_->Get(FUSE_GETATTR_OPS), statistics_->Get(FUSE_LOOKUP_OPS));
  if (const uint64_t ring = statistics_->Get(FUSE_RING_REQUESTS); ring > 0) {
    Appendf(&out,
            "  of all requests, %" PRIu64 " came over io_uring (--fuse-io-uring), %" PRIu64
            " of them served by its workers; %" PRIu64
            " times a queue's thread passed the ring on while it waited for the disks\n",
            ring, statistics_->Get(FUSE_RING_HANDED_OFF),
            statistics_->Get(FUSE_RING_SERVER_CHANGES));
    Appendf(&out,
            "  reply spins: %" PRIu64 " (%" PRIu64
            " found their reply or a request), %.1f ms spinning\n",
            statistics_->Get(FUSE_RING_REPLY_SPINS), statistics_->Get(FUSE_RING_REPLY_SPINS_FOUND),
            static_cast<double>(statistics_->Get(FUSE_RING_REPLY_SPIN_NANOS)) / 1e6);
  }
  Appendf(&out,
          "files: %" PRIu64 " creates, %" PRIu64 " opens, %" PRIu64 " flushes, %" PRIu64
          " releases, %" PRIu64 " unlinks\n",
          statistics_->Get(FUSE_CREATE_OPS), statistics_->Get(FUSE_OPEN_OPS),
          statistics_->Get(FUSE_FLUSH_OPS), statistics_->Get(FUSE_RELEASE_OPS),
          statistics_->Get(FUSE_UNLINK_OPS));
  const meta::Activity store = fs_->meta()->GetActivity();
  Appendf(&out,
          "metadata store: %" PRIu64 " point reads, %" PRIu64 " write batches, %" PRIu64 " scans\n",
          store.point_reads, store.batches, store.scans);
  Appendf(&out,
          "cache: %s in %s blocks; buffers lru %" PRIu64 ", hinted %" PRIu64
          ", evict-first %" PRIu64 ", fetching %" PRIu64 "\n",
          FormatSize(s.capacity_blocks * s.block_size).c_str(), FormatSize(s.block_size).c_str(),
          s.lru_buffers, s.hinted_buffers, s.evict_first_buffers, s.fetching_buffers);
  Appendf(&out,
          "demand: %" PRIu64 " reads; blocks: %" PRIu64 " hits (%.1f%%; %" PRIu64
          " without the cache's lock), %" PRIu64 " misses; stall %.3f s\n",
          s.demand_reads, s.demand_hits, Percent(s.demand_hits, s.demand_hits + s.demand_misses),
          s.hits_without_table_lock, s.demand_misses, static_cast<double>(s.stall_nanos) / 1e9);
  Appendf(&out, "read-ahead: %" PRIu64 " issued, %" PRIu64 " hits, %" PRIu64 " evicted unused\n",
          s.readahead_issued, s.readahead_hits, s.readahead_evicted_unused);
  Appendf(&out,
          "writes into cached blocks: %" PRIu64 " patched (%" PRIu64
          " in place, %s copied for readers), %" PRIu64 " dropped\n",
          s.write_blocks_updated, s.write_blocks_patched_in_place,
          FormatSize(s.write_copied_bytes).c_str(), s.write_blocks_dropped);
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
    Appendf(&out, "  %-19s %s hinted, %" PRIu64 " blocks consumed, accuracy %s\n", SourceName(i),
            FormatSize(s.bytes_hinted[i]).c_str(), s.blocks_consumed[i],
            AccuracyText(s, i).c_str());
  }
  Appendf(&out, "  manager: %" PRIu64 " rounds, %" PRIu64 " wake-ups of its thread\n",
          s.manager_rounds, s.manager_wakeups);
  Appendf(&out,
          "  estimates: T_hit %.1f us, T_driver %.1f us, T_disk ms per disk:", s.t_hit_nanos / 1e3,
          s.t_driver_nanos / 1e3);
  for (double t : s.t_disk_nanos) Appendf(&out, " %.2f", t / 1e6);
  out += "\n";
  // What each disk's T_disk rests on (docs/DESIGN.md "Estimators"), and the horizon it gives.
  for (size_t d = 0; d < s.disk_estimates.size(); ++d) {
    const cache::CacheStats::DiskEstimate& e = s.disk_estimates[d];
    Appendf(&out,
            "    disk %zu: T_disk %.2f ms; idle reads %" PRIu64 " (%.2f ms), queued %" PRIu64
            " (%.2f ms); %u in flight; horizon %.1f\n",
            d, e.t_disk_nanos / 1e6, e.idle_samples, e.idle_nanos / 1e6, e.queued_samples,
            e.queued_nanos / 1e6, e.in_flight, e.horizon);
  }
  Appendf(&out,
          "speculation: %zu attached, %" PRIu64 " reads, %" PRIu64 " hits, %" PRIu64
          " hinted instead (EAGAIN)\n",
          hints_->attached(), s.spec_reads, s.spec_hits, s.spec_eagain);
  Appendf(&out, "  tainted: %s outstanding (at most %s), %s trimmed by the budget\n",
          FormatSize(s.outstanding_tainted_bytes).c_str(),
          FormatSize(s.tainted_outstanding_max_bytes).c_str(),
          FormatSize(s.tainted_trimmed_bytes).c_str());
  out += "disks, as tipfs saw them (reads by purpose: demand, read-ahead, hinted, speculative):\n";
  out += FormatActivity(ActivityStats());
  if (disks_->emulation) {
    Appendf(&out, "disk model: %s\n", disks_->emulation->spec().c_str());
    out += stripe::FormatDiskStats(disks_->emulation->Stats());
  } else {
    out += "disk model: none (real timing)\n";
  }
  if (disks_->health) out += stripe::FormatDiskHealth(*disks_->health, label.disk_names);
  out += stripe::FormatRadosStats(fs_->volume()->rados_stats());
  out += stripe::FormatBackingIo(fs_->volume()->disks());
  return out;
}

std::string StatsReport::Json() const {
  cache::CacheStats s = cache_->Stats();
  std::string out = "{";
  Appendf(&out,
          "\"mountpoint\":\"%s\",\"version\":\"%s\",\"data_cache\":\"%s\",\"uptime_seconds\":%.3f,",
          mountpoint_.c_str(), TIPFS_VERSION, DataCacheName(),
          static_cast<double>(clock_->NowNanos() - mounted_at_) / 1e9);
  for (const Field& f : CacheFields(s)) Appendf(&out, "\"%s\":%.17g,", f.name, f.value);
  for (size_t i = 0; i < cache::kHintSourceCount; ++i) {
    Appendf(&out,
            "\"hints.%s.bytes\":%" PRIu64 ",\"hints.%s.consumed\":%" PRIu64
            ",\"hints.%s.accuracy\":%s,",
            SourceName(i), s.bytes_hinted[i], SourceName(i), s.blocks_consumed[i], SourceName(i),
            s.bytes_hinted[i] == 0 ? "null" : AccuracyText(s, i).c_str());
  }
  for (size_t d = 0; d < s.t_disk_nanos.size(); ++d) {
    Appendf(&out, "\"hints.estimate.t_disk.disk%zu.seconds\":%.6g,", d, s.t_disk_nanos[d] / 1e9);
  }
  for (size_t d = 0; d < s.disk_estimates.size(); ++d) {
    const cache::CacheStats::DiskEstimate& e = s.disk_estimates[d];
    Appendf(&out,
            "\"hints.estimate.disk%zu.idle.seconds\":%.6g,\"hints.estimate.disk%zu.idle.samples\":"
            "%" PRIu64
            ",\"hints.estimate.disk%zu.queued.seconds\":%.6g,"
            "\"hints.estimate.disk%zu.queued.samples\":%" PRIu64
            ",\"hints.estimate.disk%zu.in_flight\":%u,\"hints.estimate.disk%zu.horizon\":%.6g,",
            d, e.idle_nanos / 1e9, d, e.idle_samples, d, e.queued_nanos / 1e9, d, e.queued_samples,
            d, e.in_flight, d, e.horizon);
  }
  std::array<uint64_t, TICKER_ENUM_MAX> tickers = statistics_->Snapshot();
  for (uint32_t t = 0; t < TICKER_ENUM_MAX; ++t) {
    Appendf(&out, "\"%s\":%" PRIu64 ",", TickerName(static_cast<Ticker>(t)), tickers[t]);
  }
  Appendf(&out, "\"disk_model\":\"%s\",",
          disks_->emulation ? disks_->emulation->spec().c_str() : "none");
  // "disks": the model's view when there is one (and what tipfs measured as "disk_activity"),
  // else what tipfs measured.
  const std::string activity = ActivityJson(ActivityStats());
  if (disks_->emulation) {
    const std::string disks = stripe::DiskStatsJson(disks_->emulation->Stats());
    // DiskStatsJson is an object {"disks":[...]}: splice its member in.
    out += disks.substr(1, disks.size() - 2) + "," + activity;
  } else {
    out += "\"disks\":" + activity.substr(activity.find('['));
  }
  if (disks_->health) {
    out += "," + stripe::DiskHealthJsonMember(*disks_->health, fs_->volume()->disk_count());
  }
  out += "," + stripe::RadosStatsJsonMember(fs_->volume()->rados_stats());
  out += "," + stripe::BackingIoJsonMember(fs_->volume()->disks());
  out += "}\n";
  return out;
}

std::string StatsReport::Prometheus() const {
  cache::CacheStats s = cache_->Stats();
  std::string out;
  for (const Field& f : CacheFields(s)) {
    AppendPrometheusHeader(&out, f.prometheus, f.type, f.help);
    AppendPrometheusSample(&out, f.prometheus, {}, f.value * f.scale);
  }
  const std::string hinted = "tipfs_hint_bytes_total";
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
  // What each T_disk rests on: reads measured on an idle disk and behind another, and the
  // horizon it gives the busiest stream.
  // (Each family's samples follow its header, as the exposition format requires.)
  const std::string measured = "tipfs_hints_estimate_disk_read_seconds";
  AppendPrometheusHeader(&out, measured, "gauge",
                         "Average latency of reads that found the disk idle (how=idle) and "
                         "completion gap of reads that queued (how=queued), per disk");
  for (size_t d = 0; d < s.disk_estimates.size(); ++d) {
    const cache::CacheStats::DiskEstimate& e = s.disk_estimates[d];
    AppendPrometheusSample(&out, measured, {{"disk", std::to_string(d)}, {"how", "idle"}},
                           e.idle_nanos / 1e9);
    AppendPrometheusSample(&out, measured, {{"disk", std::to_string(d)}, {"how", "queued"}},
                           e.queued_nanos / 1e9);
  }
  const std::string samples = "tipfs_hints_estimate_disk_reads_total";
  AppendPrometheusHeader(&out, samples, "counter", "Reads behind each disk's T_disk, by how");
  for (size_t d = 0; d < s.disk_estimates.size(); ++d) {
    const cache::CacheStats::DiskEstimate& e = s.disk_estimates[d];
    AppendPrometheusSample(&out, samples, {{"disk", std::to_string(d)}, {"how", "idle"}},
                           static_cast<double>(e.idle_samples));
    AppendPrometheusSample(&out, samples, {{"disk", std::to_string(d)}, {"how", "queued"}},
                           static_cast<double>(e.queued_samples));
  }
  const std::string horizon = "tipfs_hints_estimate_disk_horizon_blocks";
  AppendPrometheusHeader(&out, horizon, "gauge",
                         "Prefetch horizon of the busiest stream on each disk, in accesses");
  for (size_t d = 0; d < s.disk_estimates.size(); ++d) {
    AppendPrometheusSample(&out, horizon, {{"disk", std::to_string(d)}},
                           s.disk_estimates[d].horizon);
  }
  const std::string consumed = "tipfs_hint_consumed_blocks_total";
  AppendPrometheusHeader(&out, consumed, "counter", "Hinted block accesses read, by source");
  for (size_t i = 0; i < cache::kHintSourceCount; ++i) {
    AppendPrometheusSample(&out, consumed, {{"source", SourceName(i)}},
                           static_cast<double>(s.blocks_consumed[i]));
  }
  const std::string accuracy = "tipfs_hint_accuracy_ratio";
  AppendPrometheusHeader(&out, accuracy, "gauge",
                         "Measured accuracy of the hints of each source that gave any");
  for (size_t i = 0; i < cache::kHintSourceCount; ++i) {
    if (s.bytes_hinted[i] == 0) continue;  // no hints, no accuracy (not 1)
    AppendPrometheusSample(&out, accuracy, {{"source", SourceName(i)}}, s.accuracy[i]);
  }
  out += statistics_->ToPrometheus();
  PerfBreakdown breakdown = Breakdown();
  const std::string perf = "tipfs_subsystem_seconds_total";
  AppendPrometheusHeader(&out, perf, "counter", "Time spent per subsystem since mount");
  for (size_t i = 0; i < kSubsystemCount; ++i) {
    AppendPrometheusSample(&out, perf, {{"subsystem", SubsystemName(static_cast<Subsystem>(i))}},
                           static_cast<double>(breakdown.nanos[i]) / 1e9);
  }
  AppendActivityPrometheus(&out, ActivityStats());
  if (disks_->emulation) stripe::AppendDiskStatsPrometheus(&out, disks_->emulation->Stats());
  if (disks_->health) {
    stripe::AppendDiskHealthPrometheus(&out, *disks_->health, fs_->volume()->disk_count());
  }
  stripe::AppendRadosStatsPrometheus(&out, fs_->volume()->rados_stats());
  stripe::AppendBackingIoPrometheus(&out, fs_->volume()->disks());
  return out;
}

std::string StatsReport::StreamsText() const {
  const cache::CacheStats s = cache_->Stats();
  const std::vector<cache::StreamSummary> streams = cache_->ListStreams();
  std::string out;
  Appendf(&out, "%zu hint stream%s\n", streams.size(), streams.size() == 1 ? "" : "s");
  for (const cache::StreamSummary& st : streams) {
    std::string comm;
    std::ifstream("/proc/" + std::to_string(st.owner) + "/comm") >> comm;
    if (st.id < (uint64_t{1} << 32)) {
      Appendf(&out, "stream %" PRIu64, st.id);
    } else {
      Appendf(&out, "stream %#" PRIx64, st.id);
    }
    Appendf(&out,
            " of pid %u (%s), %s: %" PRIu64 " blocks consumed, %" PRIu64 " prefetched, %" PRIu64
            " segments pending, horizon %.1f\n",
            st.owner, comm.empty() ? "gone" : comm.c_str(),
            st.warmup ? "warm-up" : (st.shared ? "shared with its descendants" : "reader"),
            st.blocks_consumed, st.blocks_prefetched, st.segments_pending, st.horizon);
    for (size_t i = 0; i < cache::kHintSourceCount; ++i) {
      if (st.outstanding_bytes[i] == 0) continue;
      Appendf(&out, "  %-19s %s outstanding; source accuracy %s\n", SourceName(i),
              FormatSize(st.outstanding_bytes[i]).c_str(), AccuracyText(s, i).c_str());
    }
  }
  return out;
}

std::vector<stripe::DiskActivityStats> StatsReport::ActivityStats() const {
  return disks_->activity ? disks_->activity->Stats() : std::vector<stripe::DiskActivityStats>{};
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
  Status st;
  if (!disks_->emulation) {
    // The writer sees only the errno (ENODEV, "No such device": there is no emulated device to
    // change); the log says why.
    st = Status::FromErrno(ENODEV,
                           "this volume was mounted with real timing (--disk-model none), so "
                           "its disks have no model to change; remount with --disk-model " +
                               std::string(spec));
  } else {
    st = disks_->emulation->Update(spec);
  }
  if (!st.ok()) {
    std::fprintf(stderr, "tipfs %s: .tipfs/disk-model: refused '%.*s': %s\n", mountpoint_.c_str(),
                 static_cast<int>(spec.size()), spec.data(), st.ToString().c_str());
  }
  return st;
}

}  // namespace tipfs::fusefs
