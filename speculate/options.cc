#include "speculate/options.h"

#include <cstdlib>

namespace tipfs::spec {

Result<uint64_t> ParseSize(const std::string& text) {
  if (text.empty()) return Status::InvalidArgument("empty size");
  char* end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str()) return Status::InvalidArgument("bad size: " + text);
  std::string suffix(end);
  uint64_t scale = 1;
  if (suffix == "K" || suffix == "k") {
    scale = 1ull << 10;
  } else if (suffix == "M" || suffix == "m") {
    scale = 1ull << 20;
  } else if (suffix == "G" || suffix == "g") {
    scale = 1ull << 30;
  } else if (!suffix.empty()) {
    return Status::InvalidArgument("bad size suffix: " + text);
  }
  if (value > UINT64_MAX / scale) return Status::InvalidArgument("size too large: " + text);
  return static_cast<uint64_t>(value * scale);
}

namespace {

Result<bool> ParseFlag(const char* name, const std::string& text) {
  if (text == "1" || text == "yes" || text == "on" || text == "true") return true;
  if (text == "0" || text == "no" || text == "off" || text == "false") return false;
  return Status::InvalidArgument(std::string(name) + " must be 0 or 1, not '" + text + "'");
}

Result<uint32_t> ParseCount(const char* name, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  unsigned long value = std::strtoul(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || value > UINT32_MAX) {
    return Status::InvalidArgument(std::string(name) + " must be a count, not '" + text + "'");
  }
  return static_cast<uint32_t>(value);
}

}  // namespace

Result<SpecOptions> OptionsFromEnvironment(
    const std::function<const char*(const char*)>& getenv_fn) {
  SpecOptions options;
  auto get = [&](const char* name) -> const char* {
    const char* value = getenv_fn(name);
    return (value != nullptr && value[0] != '\0') ? value : nullptr;
  };
  if (const char* v = get("TIPSPEC_MOUNT")) options.mount = v;
  if (const char* v = get("TIPSPEC_WAIT")) {
    std::string text = v;
    if (text == "learned" || text == "auto") {
      options.wait = WaitPolicy::kLearned;
    } else {
      Result<bool> flag = ParseFlag("TIPSPEC_WAIT", v);
      if (!flag.ok()) {
        return Status::InvalidArgument("TIPSPEC_WAIT must be learned, 0 or 1, not '" + text + "'");
      }
      options.wait = *flag ? WaitPolicy::kAlways : WaitPolicy::kNever;
    }
  }
  if (const char* v = get("TIPSPEC_PREDICT")) {
    Result<bool> flag = ParseFlag("TIPSPEC_PREDICT", v);
    if (!flag.ok()) return flag.status();
    options.predict = *flag;
  }
  if (const char* v = get("TIPSPEC_LEARN")) {
    Result<bool> flag = ParseFlag("TIPSPEC_LEARN", v);
    if (!flag.ok()) return flag.status();
    options.learn = *flag;
  }
  if (const char* v = get("TIPSPEC_HISTORY")) {
    Result<bool> flag = ParseFlag("TIPSPEC_HISTORY", v);
    if (!flag.ok()) return flag.status();
    options.history = *flag;
  }
  if (const char* v = get("TIPSPEC_MAX_TAINTED_BYTES")) {
    Result<uint64_t> size = ParseSize(v);
    if (!size.ok()) return size.status().WithContext("TIPSPEC_MAX_TAINTED_BYTES");
    options.max_tainted_bytes = *size;
  }
  if (const char* v = get("TIPSPEC_MAX_AHEAD_HINTS")) {
    Result<uint32_t> count = ParseCount("TIPSPEC_MAX_AHEAD_HINTS", v);
    if (!count.ok()) return count.status();
    if (*count == 0) return Status::InvalidArgument("TIPSPEC_MAX_AHEAD_HINTS must be at least 1");
    options.max_ahead_hints = *count;
  }
  if (const char* v = get("TIPSPEC_MAX_AHEAD_BYTES")) {
    Result<uint64_t> size = ParseSize(v);
    if (!size.ok()) return size.status().WithContext("TIPSPEC_MAX_AHEAD_BYTES");
    options.max_ahead_bytes = *size;
  }
  if (const char* v = get("TIPSPEC_STALL_USEC")) {
    Result<uint32_t> count = ParseCount("TIPSPEC_STALL_USEC", v);
    if (!count.ok()) return count.status();
    options.stall_usec = *count;
  }
  if (const char* v = get("TIPSPEC_MAX_BEHIND")) {
    Result<uint32_t> count = ParseCount("TIPSPEC_MAX_BEHIND", v);
    if (!count.ok()) return count.status();
    if (*count == 0) return Status::InvalidArgument("TIPSPEC_MAX_BEHIND must be at least 1");
    options.max_behind_reads = *count;
  }
  if (const char* v = get("TIPSPEC_MAX_OVERHEAD")) {
    char* end = nullptr;
    errno = 0;
    double percent = std::strtod(v, &end);
    if (errno != 0 || end == v || *end != '\0' || !(percent >= 0) || percent > 100) {
      return Status::InvalidArgument(
          std::string("TIPSPEC_MAX_OVERHEAD must be a percentage, not '") + v + "'");
    }
    options.max_overhead_percent = percent;
  }
  if (const char* v = get("TIPSPEC_LOCKSTEP")) {
    Result<bool> flag = ParseFlag("TIPSPEC_LOCKSTEP", v);
    if (!flag.ok()) return flag.status();
    options.lockstep = *flag;
  }
  if (const char* v = get("TIPSPEC_HINT_LOG")) options.hint_log = v;
  if (const char* v = get("TIPSPEC_STATS")) {
    Result<bool> flag = ParseFlag("TIPSPEC_STATS", v);
    if (!flag.ok()) return flag.status();
    options.print_stats = *flag;
  }
  if (const char* v = get("TIPSPEC_STATS_FILE")) {
    options.stats_file = v;
    options.print_stats = true;
  }
  return options;
}

}  // namespace tipfs::spec
