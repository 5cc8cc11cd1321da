// The `tipfs` subcommands. Each Add*Command registers its options on the CLI11 app and returns
// the function that runs it once parsing succeeded; that function returns the exit status and
// prints its own one-line errors ("tipfs mount: ..."). Nothing here calls exit().
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "util/status.h"

namespace tipfs::cli {

using Runner = std::function<int()>;

Runner AddMkfsCommand(CLI::App* app);
Runner AddMountCommand(CLI::App* app);
Runner AddUmountCommand(CLI::App* app);
Runner AddStatsCommand(CLI::App* app);
Runner AddHintCommand(CLI::App* app);
Runner AddRunCommand(CLI::App* app);
Runner AddFsckCommand(CLI::App* app);

// Exit statuses: 0 success, 1 the command failed at run time, 2 it was used wrongly (a bad option
// or value, a missing argument), as tipfs(8) says.
constexpr int kUsageError = 2;

// Prints "tipfs <command>: <message>" to stderr and returns exit status 1.
int Fail(const std::string& command, const Status& status);
// Prints "tipfs <command>: <message> (see tipfs <command> --help)" and returns kUsageError.
int Usage(const std::string& command, const std::string& message);

// CLI11 validators whose messages name the value and what was expected.
CLI::Validator SizeValidator();             // 64K, 12M, 1G...
CLI::Validator PositiveSecondsValidator();  // 0 < seconds <= 86400
CLI::Validator OneOf(std::vector<std::string> choices);

// Timelines (cli/timeline_file.cc): recording on a mount, then the SVG picture of a window of
// CLOCK_MONOTONIC time. FinishTimeline stops the recording, writes the file and returns the
// one-line description (disks busy, at once, stalls).
int64_t MonotonicNanos();
Status CheckTimelinePath(const std::string& svg_path);
Status StartTimeline(const std::string& mountpoint);
Result<std::string> FinishTimeline(const std::string& mountpoint, int64_t start_ns, int64_t end_ns,
                                   const std::string& svg_path, const std::string& title);

// Help in tipfs's own notation ("--cache-size SIZE", "DISK..."), not CLI11's ("TEXT:SIZE",
// "DISK(1x)"); applied to the app and every subcommand.
void UseTipfsHelp(CLI::App* app);

}  // namespace tipfs::cli
