#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "util/units.h"

namespace tipfs::cli {

int Fail(const std::string& command, const Status& status) {
  std::string message = status.ToString();
  // Lower layers name their operation ("mkfs: disk /x ..."): do not say it twice.
  const std::string repeated = command + ": ";
  if (message.compare(0, repeated.size(), repeated) == 0) message.erase(0, repeated.size());
  std::fprintf(stderr, "tipfs %s: %s\n", command.c_str(), message.c_str());
  return 1;
}

int Usage(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "tipfs %s: %s (see tipfs %s --help)\n", command.c_str(), message.c_str(),
               command.c_str());
  return kUsageError;
}

CLI::Validator SizeValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        Result<uint64_t> size = ParseSize(text);
        return size.ok() ? std::string() : size.status().message();
      },
      "SIZE");
}

CLI::Validator PositiveSecondsValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double seconds = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !std::isfinite(seconds) || seconds <= 0 ||
            seconds > 86400) {
          return "'" + text + "' is not a number of seconds between 0 and 86400 (e.g. 1 or 0.5)";
        }
        return std::string();
      },
      "SECONDS");
}

CLI::Validator OneOf(std::vector<std::string> choices) {
  std::string list;
  for (const std::string& c : choices) list += (list.empty() ? "" : ", ") + c;
  return CLI::Validator(
      [choices, list](std::string& text) -> std::string {
        for (const std::string& c : choices) {
          if (text == c) return std::string();
        }
        return "'" + text + "' is not one of " + list;
      },
      list);
}

}  // namespace tipfs::cli
