#include "config_file.hpp"

#include <toml++/toml.h>

#include <sstream>

namespace harnessd {

namespace {

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw CLI::ConfigError(where + ": " + what);
}

/// A scalar as CLI11 reads it from the command line.
std::optional<std::string> scalar_text(const toml::node& node) {
  if (const auto* s = node.as_string()) return s->get();
  if (const auto* i = node.as_integer()) return std::to_string(i->get());
  if (const auto* f = node.as_floating_point()) {
    std::ostringstream out;
    out << f->get();
    return out.str();
  }
  if (const auto* b = node.as_boolean()) return b->get() ? "true" : "false";
  return std::nullopt;
}

}  // namespace

std::string TomlConfig::file_name() const {
  const CLI::Option* option = app_.get_option_no_throw("--config");
  return option != nullptr && option->count() > 0 ? option->as<std::string>() : std::string("config");
}

std::vector<CLI::ConfigItem> TomlConfig::from_config(std::istream& input) const {
  const std::string file = file_name();
  const std::string text{std::istreambuf_iterator<char>(input), std::istreambuf_iterator<char>()};
  toml::table table;
  try {
    table = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    fail(file + " line " + std::to_string(e.source().begin.line), std::string(e.description()));
  }
  lines_.clear();
  std::vector<CLI::ConfigItem> items;
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    const std::string where = file + " line " + std::to_string(node.source().begin.line);
    const CLI::Option* option = app_.get_option_no_throw("--" + name);
    if (option == nullptr || name == "config") fail(where, "unknown key \"" + name + "\" (see harnessd --help)");
    CLI::ConfigItem item;
    item.name = name;
    if (const toml::array* array = node.as_array()) {
      for (const toml::node& element : *array) {
        std::optional<std::string> value = scalar_text(element);
        if (!value) fail(where, "\"" + name + "\" must be a list of strings or numbers");
        item.inputs.push_back(std::move(*value));
      }
    } else if (std::optional<std::string> value = scalar_text(node)) {
      item.inputs.push_back(std::move(*value));
    } else {
      fail(where, "\"" + name + "\" must be a string, a number, a boolean or a list");
    }
    lines_[name] = node.source().begin.line;
    items.push_back(std::move(item));
  }
  return items;
}

std::string TomlConfig::where(const std::string& message) const {
  for (const auto& [key, line] : lines_) {
    const std::string flag = "--" + key;
    const std::size_t at = message.find(flag);
    const bool whole = at != std::string::npos &&
                       (at + flag.size() == message.size() ||
                        !(std::isalnum(static_cast<unsigned char>(message[at + flag.size()])) ||
                          message[at + flag.size()] == '-'));
    if (whole) return file_name() + " line " + std::to_string(line) + ", key \"" + key + "\"";
  }
  return {};
}

void add_config_option(CLI::App& app, std::shared_ptr<TomlConfig> config) {
  app.set_config("--config", "",
                 "Read options from this TOML file: keys are the long flag names without \"--\" "
                 "(listen = [\"ws://0.0.0.0:7878\"], drain-timeout-ms = 30000); flags on the command "
                 "line win");
  app.config_formatter(std::move(config));
}

}  // namespace harnessd
