#include "stripe/emulation/disk_model_config.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

#include "util/clock.h"

namespace tipfs::stripe {
namespace {

// Profiles. Random-access positioning = average seek + half a revolution (the mean rotational
// latency), unless an access time is given directly. man/disk-models.md has the same table with
// the reasoning behind each number.
//
//   profile   seek    rpm   positioning  media rate  queue
//   hp-c2247  10 ms   5400  15.56 ms     3.5 MB/s    clook
//   hdd       8.5 ms  7200  12.67 ms     180 MB/s    clook
//   ssd       -       0     90 us        560 MB/s    fifo
//   nvme      -       0     20 us        3 GB/s      fifo
//   none      0       0     0            no cost     fifo   (real timing only)
//
// Sources:
//   hp-c2247  The disks of the paper (Chang & Gibson, OSDI '99; Patterson et al., SOSP '95): HP
//             C2247, "15 ms average access". 5400 rpm (half a turn: 5.56 ms) and a zoned layout
//             of roughly 56-96 sectors per track are recalled from DiskSim's validated HP_C2247A
//             parameters; they give a media rate of about 2.6-4.4 MB/s, of which 3.5 MB/s is the
//             middle, and a 10 ms average seek makes the paper's 15 ms. Neither the seek nor the
//             rate was checked against an HP datasheet (none was reachable): override them when
//             you have better numbers.
//   hdd       A current 3.5" 7200 rpm disk: 8.5 ms typical average read seek (HGST Deskstar
//             7K1000.C specification), 4.17 ms average latency at 7200 rpm (WD Ultrastar DC HC310
//             specification, "Latency time" table), 180 MB/s: a mid-disk sustained rate of the
//             1-4 TB class (outer zones reach above 200 MB/s, inner ones about half).
//   ssd       A SATA SSD: 90 us for a QD1 4 KiB random read (about 11k IOPS); 560 MB/s sequential
//             read (Kingston DC600M specification), the SATA 6 Gb/s ceiling.
//   nvme      A PCIe 3.0 x4 NVMe SSD: about 3-3.5 GB/s sequential read. 20 us is the fast end of
//             flash read latency (low-latency NAND or 3D XPoint); common TLC drives measure
//             60-90 us at QD1, so use nvme,access=80us to model one of those.
DiskModelConfig MakeProfile(const char* name, int64_t seek_ns, double rpm, int64_t access_ns,
                            double bandwidth, QueuePolicy queue) {
  DiskModelConfig c;
  c.profile = name;
  c.seek_ns = seek_ns;
  c.rpm = rpm;
  c.access_ns = access_ns;
  c.bandwidth = bandwidth;
  c.queue = queue;
  return c;
}

const std::vector<DiskModelConfig>& Profiles() {
  static const auto* profiles = new std::vector<DiskModelConfig>{
      MakeProfile("hp-c2247", 10 * kNanosPerMilli, 5400, -1, 3.5e6, QueuePolicy::kClook),
      MakeProfile("hdd", 8'500'000, 7200, -1, 180e6, QueuePolicy::kClook),
      MakeProfile("ssd", 0, 0, 90 * kNanosPerMicro, 560e6, QueuePolicy::kFifo),
      MakeProfile("nvme", 0, 0, 20 * kNanosPerMicro, 3e9, QueuePolicy::kFifo),
      MakeProfile("none", 0, 0, -1, 0, QueuePolicy::kFifo),
  };
  return *profiles;
}

constexpr const char* kProfileList = "hp-c2247, hdd, ssd, nvme, none";
constexpr const char* kKeyList =
    "access, seek, rpm, bw, G, L, o, g, slowdown, queue, demand_first, hold";
constexpr const char* kTimeUnits = "ns, us, ms, s";
constexpr const char* kRateUnits = "B/s, kB/s, KB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s";

constexpr int64_t kMaxRequestNanos = 10 * kNanosPerSecond;  // "absurd" beyond this per request
constexpr double kMaxPerByteNanos = 100'000;                // G <= 100 us/B: bw >= 10 kB/s
constexpr double kMinBandwidth = 10e3;
constexpr double kMaxBandwidth = 1e12;
constexpr double kMaxSlowdown = 1000;

struct Unit {
  std::string_view name;
  double scale;
};
constexpr Unit kTimeUnitTable[] = {
    {"ns", 1}, {"us", 1e3}, {"\xC2\xB5s", 1e3}, {"ms", 1e6}, {"s", 1e9},
};
constexpr Unit kRateUnitTable[] = {
    {"B/s", 1},    {"kB/s", 1e3},     {"KB/s", 1e3},        {"MB/s", 1e6},
    {"GB/s", 1e9}, {"KiB/s", 1024.0}, {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0},
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Status Bad(std::string_view item, const std::string& why) {
  return Status::InvalidArgument(std::string(item) + ": " + why);
}

// The switches (demand_first, hold): on or off, nothing else.
Result<bool> ParseOnOff(std::string_view item, std::string_view value) {
  if (value == "on") return true;
  if (value == "off") return false;
  return Bad(item, "expected on or off");
}

// A finite decimal number at the start of `text`; the rest (the unit) in *rest.
bool ParseLeadingNumber(std::string_view text, double* value, std::string_view* rest) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  if (ec != std::errc() || !std::isfinite(*value)) return false;
  *rest = text.substr(end - text.data());
  return true;
}

// A non-negative time in nanoseconds (fractional: G is well below 1 ns for fast disks).
Result<double> ParseTime(std::string_view item, std::string_view value, double max_ns,
                         bool per_byte = false) {
  const std::string expected = std::string("a time such as 2ms (units: ") + kTimeUnits + ")";
  double number;
  std::string_view unit;
  if (!ParseLeadingNumber(value, &number, &unit))
    return Bad(item, "not a number; expected " + expected);
  if (number < 0) return Bad(item, "negative; expected " + expected);
  if (per_byte && unit.ends_with("/B")) unit.remove_suffix(2);
  if (unit.empty()) {
    if (number == 0) return 0.0;
    return Bad(item, std::string("missing unit (accepted: ") + kTimeUnits + ")");
  }
  for (const Unit& u : kTimeUnitTable) {
    if (unit == u.name) {
      double ns = number * u.scale;
      if (ns > max_ns) {
        return Bad(item, "too large (at most " + FormatDuration(static_cast<int64_t>(max_ns)) +
                             (per_byte ? " per byte)" : " per request)"));
      }
      return ns;
    }
  }
  return Bad(item, "unknown unit '" + std::string(unit) + "' (accepted: " + kTimeUnits + ")");
}

Result<int64_t> ParseRequestTime(std::string_view item, std::string_view value) {
  Result<double> ns = ParseTime(item, value, static_cast<double>(kMaxRequestNanos));
  if (!ns.ok()) return ns.status();
  return static_cast<int64_t>(std::llround(*ns));
}

Result<double> ParseRate(std::string_view item, std::string_view value) {
  const std::string accepted = std::string(" (accepted: ") + kRateUnits + ")";
  double number;
  std::string_view unit;
  if (!ParseLeadingNumber(value, &number, &unit)) {
    return Bad(item, "not a number; expected a rate such as 40MB/s" + accepted);
  }
  if (number < 0) return Bad(item, "negative; expected a rate such as 40MB/s" + accepted);
  if (unit.empty()) return Bad(item, "missing unit" + accepted);
  for (const Unit& u : kRateUnitTable) {
    if (unit == u.name) {
      double rate = number * u.scale;
      if (rate < kMinBandwidth) return Bad(item, "too small (at least 10kB/s; G=0 for no cost)");
      if (rate > kMaxBandwidth) return Bad(item, "too large (at most 1000GB/s)");
      return rate;
    }
  }
  return Bad(item, "unknown unit '" + std::string(unit) + "'" + accepted);
}

Result<double> ParseRpm(std::string_view item, std::string_view value) {
  double number;
  std::string_view rest;
  if (!ParseLeadingNumber(value, &number, &rest) || !(rest.empty() || rest == "rpm")) {
    return Bad(item, "not a number; expected 0 (solid state) or 1000 to 30000");
  }
  if (number != 0 && (number < 1000 || number > 30000)) {
    return Bad(item, "out of range; expected 0 (solid state) or 1000 to 30000");
  }
  return number;
}

Result<double> ParseSlowdown(std::string_view item, std::string_view value) {
  double number;
  std::string_view rest;
  if (!ParseLeadingNumber(value, &number, &rest) || !(rest.empty() || rest == "x")) {
    return Bad(item, "not a number; expected a factor K with 0 < K <= 1000");
  }
  if (number <= 0) return Bad(item, "must be positive; expected 0 < K <= 1000");
  if (number > kMaxSlowdown) return Bad(item, "too large; expected 0 < K <= 1000");
  return number;
}

// Applies the key=value items of `items` (already split) to `config`.
Status ApplyItems(const std::vector<std::string_view>& items, DiskModelConfig* config) {
  const DiskModelConfig profile = *DiskProfile(config->profile);
  std::set<std::string_view> seen;
  for (std::string_view item : items) {
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Bad(item, std::string("expected key=value (keys: ") + kKeyList + ")");
    }
    std::string_view key = Trim(item.substr(0, eq));
    std::string_view value = Trim(item.substr(eq + 1));
    if (!seen.insert(key).second) return Bad(item, std::string(key) + " given twice");
    if (value.empty()) return Bad(item, "missing value");
    if (key == "access") {
      if (seen.count("seek") || seen.count("rpm")) {
        return Bad(item, "give either access or seek/rpm, not both");
      }
      Result<int64_t> ns = ParseRequestTime(item, value);
      if (!ns.ok()) return ns.status();
      config->access_ns = *ns;
      // seek and rpm are unused while access is set; keep the profile's for a canonical form.
      config->seek_ns = profile.seek_ns;
      config->rpm = profile.rpm;
    } else if (key == "seek" || key == "rpm") {
      if (seen.count("access")) return Bad(item, "give either access or seek/rpm, not both");
      if (key == "seek") {
        Result<int64_t> ns = ParseRequestTime(item, value);
        if (!ns.ok()) return ns.status();
        config->seek_ns = *ns;
      } else {
        Result<double> rpm = ParseRpm(item, value);
        if (!rpm.ok()) return rpm.status();
        config->rpm = *rpm;
      }
      config->access_ns = -1;
    } else if (key == "bw" || key == "G") {
      if (seen.count(key == "bw" ? "G" : "bw")) {
        return Bad(item, "bw and G are the same knob (G = 1/bw); give one");
      }
      if (key == "bw") {
        Result<double> rate = ParseRate(item, value);
        if (!rate.ok()) return rate.status();
        config->bandwidth = *rate;
      } else {
        Result<double> per_byte = ParseTime(item, value, kMaxPerByteNanos, /*per_byte=*/true);
        if (!per_byte.ok()) return per_byte.status();
        if (*per_byte > 0 && 1e9 / *per_byte > kMaxBandwidth) {
          return Bad(item, "too small (at least 0.001ns per byte; G=0 for no cost)");
        }
        config->bandwidth = *per_byte == 0 ? 0 : 1e9 / *per_byte;
      }
    } else if (key == "L" || key == "o" || key == "g") {
      Result<int64_t> ns = ParseRequestTime(item, value);
      if (!ns.ok()) return ns.status();
      (key == "L" ? config->latency_ns : key == "o" ? config->overhead_ns : config->gap_ns) = *ns;
    } else if (key == "slowdown") {
      Result<double> k = ParseSlowdown(item, value);
      if (!k.ok()) return k.status();
      config->slowdown = *k;
    } else if (key == "queue") {
      if (value == "fifo") {
        config->queue = QueuePolicy::kFifo;
      } else if (value == "clook") {
        config->queue = QueuePolicy::kClook;
      } else {
        return Bad(item, "unknown queue policy (accepted: fifo, clook)");
      }
    } else if (key == "demand_first" || key == "hold") {
      Result<bool> on = ParseOnOff(item, value);
      if (!on.ok()) return on.status();
      (key == "hold" ? config->hold : config->demand_first) = *on;
    } else {
      return Bad(item, "unknown key '" + std::string(key) + "' (accepted: " + kKeyList + ")");
    }
  }
  return Status::OK();
}

// Splits on ',' and trims; an empty item is an error (a stray comma hides a mistake).
Result<std::vector<std::string_view>> SplitItems(std::string_view spec) {
  std::vector<std::string_view> items;
  std::string_view rest = spec;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = Trim(rest.substr(0, comma));
    if (item.empty()) {
      return Status::InvalidArgument("disk model '" + std::string(spec) +
                                     "': empty item; expected PROFILE[,key=value...] with PROFILE "
                                     "one of " +
                                     kProfileList);
    }
    items.push_back(item);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return items;
}

// Shortest decimal text that parses back to exactly `value`.
std::string ShortestDouble(double value) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, ec == std::errc() ? end : buf);
}

std::string FormatRate(double bandwidth) {
  // The largest unit whose text reads back to the same double.
  constexpr Unit kUnits[] = {{"GB/s", 1e9}, {"MB/s", 1e6}, {"kB/s", 1e3}};
  for (const Unit& u : kUnits) {
    if (bandwidth < u.scale) continue;
    std::string text = ShortestDouble(bandwidth / u.scale);
    double back;
    std::from_chars(text.data(), text.data() + text.size(), back);
    if (back * u.scale == bandwidth) return text + std::string(u.name);
  }
  return ShortestDouble(bandwidth) + "B/s";
}

std::string Human(double nanos) {
  char buf[32];
  if (nanos == 0) return "0";
  if (nanos >= 1e9) {
    std::snprintf(buf, sizeof(buf), "%.3g s", nanos / 1e9);
  } else if (nanos >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%.3g ms", nanos / 1e6);
  } else if (nanos >= 1e3) {
    std::snprintf(buf, sizeof(buf), "%.3g us", nanos / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.3g ns", nanos);
  }
  return buf;
}

}  // namespace

int64_t DiskModelConfig::PositioningNanos() const {
  if (access_ns >= 0) return access_ns;
  // Mean rotational latency is half a revolution: 60 s / rpm / 2.
  int64_t half_turn = rpm > 0 ? std::llround(30e9 / rpm) : 0;
  return seek_ns + half_turn;
}

double DiskModelConfig::PerByteNanos() const { return bandwidth > 0 ? 1e9 / bandwidth : 0; }

int64_t DiskModelConfig::TransferNanos(uint64_t bytes) const {
  return bandwidth > 0 ? std::llround(static_cast<double>(bytes) * 1e9 / bandwidth) : 0;
}

const std::vector<std::string_view>& DiskProfileNames() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string_view>;
    for (const DiskModelConfig& p : Profiles()) v->push_back(p.profile);
    return v;
  }();
  return *names;
}

Result<DiskModelConfig> DiskProfile(std::string_view name) {
  for (const DiskModelConfig& p : Profiles()) {
    if (p.profile == name) return p;
  }
  return Status::InvalidArgument("unknown disk profile '" + std::string(name) +
                                 "' (accepted: " + kProfileList + ")");
}

Result<DiskModelConfig> ParseDiskModelSpec(std::string_view spec) {
  Result<std::vector<std::string_view>> items = SplitItems(spec);
  if (!items.ok()) return items.status();
  std::string_view name = items->front();
  if (name.find('=') != std::string_view::npos) {
    return Status::InvalidArgument("disk model '" + std::string(spec) +
                                   "': must start with a profile (" + kProfileList + ")");
  }
  Result<DiskModelConfig> config = DiskProfile(name);
  if (!config.ok()) return config.status();
  items->erase(items->begin());
  TIPFS_RETURN_IF_ERROR(ApplyItems(*items, &*config));
  return config;
}

Result<DiskModelConfig> UpdateDiskModelSpec(const DiskModelConfig& base, std::string_view spec) {
  Result<std::vector<std::string_view>> items = SplitItems(spec);
  if (!items.ok()) return items.status();
  if (items->front().find('=') == std::string_view::npos) return ParseDiskModelSpec(spec);
  DiskModelConfig config = base;
  TIPFS_RETURN_IF_ERROR(ApplyItems(*items, &config));
  return config;
}

std::string FormatDuration(int64_t nanos) {
  if (nanos == 0) return "0";
  constexpr Unit kUnits[] = {{"s", 1e9}, {"ms", 1e6}, {"us", 1e3}};
  for (const Unit& u : kUnits) {
    if (static_cast<double>(nanos) < u.scale) continue;
    std::string text = ShortestDouble(static_cast<double>(nanos) / u.scale);
    double back;
    std::from_chars(text.data(), text.data() + text.size(), back);
    if (std::llround(back * u.scale) == nanos) return text + std::string(u.name);
  }
  return std::to_string(nanos) + "ns";
}

std::string DiskModelSpec(const DiskModelConfig& c) {
  const DiskModelConfig p = *DiskProfile(c.profile);
  std::string spec = c.profile;
  auto add = [&spec](const char* key, const std::string& value) {
    spec.append(",").append(key).append("=").append(value);
  };
  if (c.access_ns >= 0) {
    if (c.access_ns != p.access_ns) add("access", FormatDuration(c.access_ns));
  } else {
    // Derived positioning: name seek and rpm when they differ, or when the profile had an access
    // time that they replace.
    if (c.seek_ns != p.seek_ns || p.access_ns >= 0) add("seek", FormatDuration(c.seek_ns));
    if (c.rpm != p.rpm || p.access_ns >= 0) add("rpm", ShortestDouble(c.rpm));
  }
  if (c.bandwidth != p.bandwidth) {
    add(c.bandwidth > 0 ? "bw" : "G", c.bandwidth > 0 ? FormatRate(c.bandwidth) : "0");
  }
  if (c.latency_ns != p.latency_ns) add("L", FormatDuration(c.latency_ns));
  if (c.overhead_ns != p.overhead_ns) add("o", FormatDuration(c.overhead_ns));
  if (c.gap_ns != p.gap_ns) add("g", FormatDuration(c.gap_ns));
  if (c.slowdown != p.slowdown) add("slowdown", ShortestDouble(c.slowdown));
  if (c.queue != p.queue) add("queue", c.queue == QueuePolicy::kFifo ? "fifo" : "clook");
  if (c.demand_first != p.demand_first) add("demand_first", c.demand_first ? "on" : "off");
  if (c.hold) add("hold", "on");
  return spec;
}

std::string DescribeDiskModel(const DiskModelConfig& c) {
  std::string out = c.profile + ": ";
  if (!c.ModelsService()) {
    out += "real timing";
  } else {
    out += "random access " + Human(static_cast<double>(c.PositioningNanos()));
    if (c.access_ns < 0 && c.rpm > 0) {
      out += " (seek " + Human(static_cast<double>(c.seek_ns)) + " + half turn " +
             Human(30e9 / c.rpm) + " at " + ShortestDouble(c.rpm) + " rpm)";
    }
    if (c.bandwidth > 0) {
      char rate[48];
      std::snprintf(rate, sizeof(rate), ", %.4g MB/s (G %.3g ns/B)", c.bandwidth / 1e6,
                    c.PerByteNanos());
      out += rate;
    } else {
      out += ", no transfer cost";
    }
  }
  out += ", L " + Human(static_cast<double>(c.latency_ns)) + ", o " +
         Human(static_cast<double>(c.overhead_ns)) + ", g " + Human(static_cast<double>(c.gap_ns)) +
         ", slowdown " + ShortestDouble(c.slowdown) +
         (c.ModelsService() ? "" : " (of real service time)") + ", queue " +
         (c.queue == QueuePolicy::kFifo ? "fifo" : "clook") +
         (c.demand_first ? ", demand first" : ", no priority") +
         (c.hold ? ", completions held" : "");
  return out;
}

}  // namespace tipfs::stripe
