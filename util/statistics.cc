#include "util/statistics.h"

#include <charconv>
#include <cmath>

namespace tipfs {
namespace {

constexpr std::pair<Ticker, const char*> kTickerNames[] = {
    {FUSE_READ_OPS, "fuse.read.ops"},
    {FUSE_READ_BYTES, "fuse.read.bytes"},
    {FUSE_WRITE_OPS, "fuse.write.ops"},
    {FUSE_WRITE_BYTES, "fuse.write.bytes"},
    {DISK_READ_OPS, "disk.read.ops"},
    {DISK_READ_BYTES, "disk.read.bytes"},
    {DISK_WRITE_OPS, "disk.write.ops"},
    {DISK_WRITE_BYTES, "disk.write.bytes"},
    {DISK_SYNC_OPS, "disk.sync.ops"},
    {DISK_POSITIONED_OPS, "disk.positioned.ops"},
    {DISK_SEQUENTIAL_OPS, "disk.sequential.ops"},
    {DISK_BUSY_NANOS, "disk.busy.nanos"},
    {DISK_QUEUE_WAIT_NANOS, "disk.queue.wait.nanos"},
    {DISK_LATE_COMPLETIONS, "disk.late.completions"},
    {DISK_OVERHEAD_NANOS, "disk.overhead.nanos"},
    {FUSE_GETATTR_OPS, "fuse.getattr.ops"},
    {FUSE_LOOKUP_OPS, "fuse.lookup.ops"},
    {FUSE_CREATE_OPS, "fuse.create.ops"},
    {FUSE_OPEN_OPS, "fuse.open.ops"},
    {FUSE_FLUSH_OPS, "fuse.flush.ops"},
    {FUSE_RELEASE_OPS, "fuse.release.ops"},
    {FUSE_UNLINK_OPS, "fuse.unlink.ops"},
    {FUSE_RING_REQUESTS, "fuse.ring.requests"},
    {FUSE_RING_HANDED_OFF, "fuse.ring.handed_off"},
    {FUSE_RING_SERVER_CHANGES, "fuse.ring.server_changes"},
    {FUSE_RING_REPLY_SPINS, "fuse.ring.reply_spins"},
    {FUSE_RING_REPLY_SPINS_FOUND, "fuse.ring.reply_spins_found"},
    {FUSE_RING_REPLY_SPIN_NANOS, "fuse.ring.reply_spin.nanos"},
};
static_assert(std::size(kTickerNames) == TICKER_ENUM_MAX,
              "every Ticker needs a row in kTickerNames");

constexpr bool TableInEnumOrder() {
  for (size_t i = 0; i < std::size(kTickerNames); ++i) {
    if (kTickerNames[i].first != static_cast<Ticker>(i)) return false;
  }
  return true;
}
static_assert(TableInEnumOrder(), "kTickerNames rows must follow the enum order");

void AppendNumber(std::string* out, double value) {
  if (std::isnan(value)) {
    out->append("NaN");
  } else if (std::isinf(value)) {
    out->append(value > 0 ? "+Inf" : "-Inf");
  } else {
    char buf[64];
    // Shortest representation that reads back as the same double: integers print as integers.
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
    out->append(buf, ec == std::errc() ? end : buf);
  }
}

}  // namespace

const char* TickerName(Ticker ticker) {
  return ticker < TICKER_ENUM_MAX ? kTickerNames[ticker].second : "unknown";
}

std::array<uint64_t, TICKER_ENUM_MAX> Statistics::Snapshot() const {
  std::array<uint64_t, TICKER_ENUM_MAX> values{};
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = counters_[i].load(std::memory_order_relaxed);
  }
  return values;
}

void Statistics::Reset() {
  for (auto& counter : counters_) counter.store(0, std::memory_order_relaxed);
}

std::string Statistics::ToString() const {
  std::string out;
  auto values = Snapshot();
  for (size_t i = 0; i < values.size(); ++i) {
    out += TickerName(static_cast<Ticker>(i));
    out += ' ';
    out += std::to_string(values[i]);
    out += '\n';
  }
  return out;
}

std::string Statistics::ToPrometheus() const {
  std::string out;
  auto values = Snapshot();
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string dotted = TickerName(static_cast<Ticker>(i));
    // Prometheus counts time in seconds: "disk.busy.nanos" is tipfs_disk_busy_seconds_total.
    const std::string_view nanos = ".nanos";
    const bool is_nanos = dotted.size() > nanos.size() &&
                          dotted.compare(dotted.size() - nanos.size(), nanos.size(), nanos) == 0;
    std::string name =
        PrometheusName(is_nanos ? dotted.substr(0, dotted.size() - nanos.size()) + ".seconds"
                                : dotted) +
        "_total";
    AppendPrometheusHeader(&out, name, "counter", dotted);
    AppendPrometheusSample(&out, name, {},
                           static_cast<double>(values[i]) * (is_nanos ? 1e-9 : 1.0));
  }
  return out;
}

std::string PrometheusName(std::string_view dotted_name) {
  std::string name = "tipfs_";
  for (char c : dotted_name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == ':';
    name += ok ? c : '_';
  }
  return name;
}

void AppendPrometheusHeader(std::string* out, std::string_view name, std::string_view type,
                            std::string_view help) {
  out->append("# HELP ").append(name).append(" ");
  for (char c : help) {
    // HELP text escapes only backslash and newline.
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
  out->append("\n# TYPE ").append(name).append(" ").append(type).append("\n");
}

void AppendPrometheusSample(std::string* out, std::string_view name, const PrometheusLabels& labels,
                            double value) {
  out->append(name);
  if (!labels.empty()) {
    out->push_back('{');
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out->push_back(',');
      out->append(labels[i].first).append("=\"");
      for (char c : labels[i].second) {
        if (c == '\\') {
          out->append("\\\\");
        } else if (c == '"') {
          out->append("\\\"");
        } else if (c == '\n') {
          out->append("\\n");
        } else {
          out->push_back(c);
        }
      }
      out->push_back('"');
    }
    out->push_back('}');
  }
  out->push_back(' ');
  AppendNumber(out, value);
  out->push_back('\n');
}

}  // namespace tipfs
