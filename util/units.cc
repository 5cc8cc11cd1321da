#include "util/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tipfs {
namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits "12.5ms" into 12.5 and "ms"; false when there is no leading number.
bool SplitNumber(std::string_view text, double* number, std::string* unit) {
  std::string s(text);
  const char* begin = s.c_str();
  char* end = nullptr;
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) return false;
  *number = std::strtod(begin, &end);
  if (end == begin) return false;
  *unit = Lower(std::string_view(end));
  return true;
}

}  // namespace

Result<uint64_t> ParseSize(std::string_view text) {
  double number;
  std::string unit;
  if (!SplitNumber(text, &number, &unit)) {
    return Status::InvalidArgument("invalid size '" + std::string(text) +
                                   "': expected a number with an optional K, M, G or T suffix");
  }
  if (!unit.empty() && unit.back() == 'b') unit.pop_back();
  if (unit.size() == 2 && unit[1] == 'i') unit.pop_back();
  double multiplier;
  if (unit.empty()) {
    multiplier = 1;
  } else if (unit == "k") {
    multiplier = 1024.0;
  } else if (unit == "m") {
    multiplier = 1024.0 * 1024;
  } else if (unit == "g") {
    multiplier = 1024.0 * 1024 * 1024;
  } else if (unit == "t") {
    multiplier = 1024.0 * 1024 * 1024 * 1024;
  } else {
    return Status::InvalidArgument("invalid size '" + std::string(text) +
                                   "': unknown suffix (use K, M, G or T)");
  }
  double bytes = number * multiplier;
  if (bytes >= 1.8e19 || bytes != std::floor(bytes)) {
    return Status::InvalidArgument("invalid size '" + std::string(text) +
                                   "': not a whole number of bytes that fits in 64 bits");
  }
  return static_cast<uint64_t>(bytes);
}

Result<int64_t> ParseDurationNanos(std::string_view text) {
  double number;
  std::string unit;
  if (!SplitNumber(text, &number, &unit)) {
    return Status::InvalidArgument("invalid duration '" + std::string(text) +
                                   "': expected a number with a unit (ns, us, ms, s)");
  }
  double scale;
  if (unit == "ns") {
    scale = 1;
  } else if (unit == "us") {
    scale = 1e3;
  } else if (unit == "ms") {
    scale = 1e6;
  } else if (unit == "s") {
    scale = 1e9;
  } else if (unit.empty()) {
    return Status::InvalidArgument("invalid duration '" + std::string(text) +
                                   "': the unit is missing (ns, us, ms, s)");
  } else {
    return Status::InvalidArgument("invalid duration '" + std::string(text) + "': unknown unit '" +
                                   unit + "' (use ns, us, ms, s)");
  }
  double nanos = number * scale;
  if (nanos > 9.2e18)
    return Status::InvalidArgument("duration '" + std::string(text) + "' is too long");
  return static_cast<int64_t>(std::llround(nanos));
}

bool ParseLowerHex(std::string_view text, uint64_t* out) {
  if (text.empty() || text.size() > 16) return false;
  uint64_t v = 0;
  for (char c : text) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

std::string FormatSize(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  double value = static_cast<double>(bytes);
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char out[32];
  if (value == std::floor(value)) {
    std::snprintf(out, sizeof(out), "%.0f %s", value, kUnits[unit]);
  } else {
    std::snprintf(out, sizeof(out), "%.1f %s", value, kUnits[unit]);
  }
  return out;
}

}  // namespace tipfs
