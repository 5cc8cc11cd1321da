#include <cstdio>

#include "cli/commands.h"
#include "util/units.h"

namespace tipfs::cli {

int Fail(const std::string& command, const Status& status) {
  std::fprintf(stderr, "tipfs %s: %s\n", command.c_str(), status.ToString().c_str());
  return 1;
}

CLI::Validator SizeValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        Result<uint64_t> size = ParseSize(text);
        return size.ok() ? std::string() : size.status().message();
      },
      "SIZE");
}

}  // namespace tipfs::cli
