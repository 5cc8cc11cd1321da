// The `tipfs` subcommands. Each Add*Command registers its options on the CLI11 app and returns
// the function that runs it once parsing succeeded; that function returns the exit status and
// prints its own one-line errors ("tipfs mount: ..."). Nothing here calls exit().
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

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

// Prints "tipfs <command>: <message>" to stderr and returns exit status 1.
int Fail(const std::string& command, const Status& status);

// A CLI11 validator for sizes with K/M/G suffixes.
CLI::Validator SizeValidator();

}  // namespace tipfs::cli
