// tipfs's --help: the notation of its man page ("--cache-size SIZE", "tipfs mkfs [OPTIONS]
// DISK..."), not CLI11's internal one ("TEXT:SIZE", "DISK(1x)", "REQUIRED").
#include <sstream>

#include "cli/commands.h"

namespace tipfs::cli {
namespace {

class TipfsFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (opt->get_positional()) return "";
    if (!opt->get_option_text().empty()) return " " + opt->get_option_text();
    // Flags have no type name; a checked option's is "TEXT:CHECK".
    const std::string type = opt->get_type_name();
    if (type.empty()) return "";
    const size_t colon = type.rfind(':');
    return " " + (colon == std::string::npos ? type : type.substr(colon + 1));
  }
  std::string make_option_usage(const CLI::Option* opt) const override {
    std::string name = opt->get_name(true, false);
    if (opt->get_expected_max() > 1) name += "...";
    return opt->get_required() ? name : "[" + name + "]";
  }
  std::string make_footer(const CLI::App* app) const override {
    std::string footer = CLI::Formatter::make_footer(app);
    return footer + (footer.empty() ? "" : "\n") + "See tipfs(8).\n";
  }
};

}  // namespace

void UseTipfsHelp(CLI::App* app) {
  auto formatter = std::make_shared<TipfsFormatter>();
  formatter->column_width(34);
  app->formatter(formatter);
  for (CLI::App* sub : app->get_subcommands({})) sub->formatter(formatter);
}

}  // namespace tipfs::cli
