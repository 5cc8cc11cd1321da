// Parsing of human-written quantities on the command line: sizes with K/M/G/T suffixes (binary,
// as `--cache-size 12M` means 12 MiB) and durations with ns/us/ms/s units. Errors name the text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace tipfs {

// "4096", "64K", "64KiB", "12M", "1G", "2T" (binary multiples; case-insensitive; optional "B").
Result<uint64_t> ParseSize(std::string_view text);

// "1.5ms" -> 1500000. Units required: ns, us, ms, s.
Result<int64_t> ParseDurationNanos(std::string_view text);

// Exactly `text`, 1 to 16 lowercase hex digits, as a number (object names: "00000000000012ab").
bool ParseLowerHex(std::string_view text, uint64_t* out);

// 65536 -> "64 KiB" (exact units when they fit, else one decimal).
std::string FormatSize(uint64_t bytes);

}  // namespace tipfs
