#include "config_file.hpp"

#include "mcp/http_transport.hpp"

#include <toml++/toml.h>

#include <cctype>
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

std::string line_of(const std::string& file, const toml::node& node) {
  return file + " line " + std::to_string(node.source().begin.line);
}

/// A table of strings (`env`, `headers`) without line breaks in names or values.
std::map<std::string, std::string> string_table(const std::string& file, const std::string& key,
                                                const toml::node& node) {
  const toml::table* table = node.as_table();
  if (table == nullptr) fail(line_of(file, node), "\"" + key + "\" must be a table of strings");
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : *table) {
    const toml::value<std::string>* text = value.as_string();
    if (text == nullptr) fail(line_of(file, value), "\"" + key + "." + std::string(name.str()) + "\" must be a string");
    const std::string entry(name.str());
    if (entry.empty() || entry.find_first_of("\r\n\0") != std::string::npos ||
        text->get().find_first_of("\r\n\0") != std::string::npos) {
      fail(line_of(file, value), "\"" + key + "." + entry + "\" must not be empty or hold line breaks");
    }
    out[entry] = text->get();
  }
  return out;
}

/// One `[mcp.NAME]` table.
mcp::ServerConfig mcp_server(const std::string& file, const std::string& name, const toml::node& node) {
  const std::string table_name = "mcp." + name;
  const toml::table* table = node.as_table();
  if (table == nullptr || name.empty()) fail(line_of(file, node), "\"" + table_name + "\" must be a table [mcp.NAME]");
  mcp::ServerConfig config;
  config.name = name;
  for (const auto& [key_name, value] : *table) {
    const std::string key(key_name.str());
    const std::string where = line_of(file, value);
    if (key == "command" || key == "url") {
      const toml::value<std::string>* text = value.as_string();
      if (text == nullptr || text->get().empty()) fail(where, "\"" + key + "\" must be a non-empty string");
      (key == "command" ? config.command : config.url) = text->get();
    } else if (key == "args") {
      const toml::array* array = value.as_array();
      if (array == nullptr) fail(where, "\"args\" must be a list of strings");
      for (const toml::node& element : *array) {
        const toml::value<std::string>* text = element.as_string();
        if (text == nullptr) fail(where, "\"args\" must be a list of strings");
        config.args.push_back(text->get());
      }
    } else if (key == "env") {
      config.env = string_table(file, key, value);
    } else if (key == "headers") {
      config.headers = string_table(file, key, value);
    } else if (key == "timeoutMs") {
      const toml::value<std::int64_t>* number = value.as_integer();
      if (number == nullptr || number->get() <= 0 || number->get() > 86'400'000) {
        fail(where, "\"timeoutMs\" must be a number of milliseconds from 1 to 86400000");
      }
      config.call_timeout = std::chrono::milliseconds(number->get());
    } else {
      fail(where, "unknown key \"" + key + "\" in [" + table_name +
                      "] (command, args, env, url, headers, timeoutMs)");
    }
  }
  const std::string where = line_of(file, node);
  if (config.command.empty() == config.url.empty()) {
    fail(where, "[" + table_name + "] needs either \"command\" (stdio) or \"url\" (streamable HTTP)");
  }
  if (!config.url.empty()) {
    if (!config.args.empty() || !config.env.empty()) fail(where, "[" + table_name + "]: args and env go with command");
    if (const std::string problem = mcp::check_http_url(config.url); !problem.empty()) {
      fail(where, "[" + table_name + "] url \"" + config.url + "\": " + problem);
    }
  } else if (!config.headers.empty()) {
    fail(where, "[" + table_name + "]: headers go with url");
  }
  return config;
}

bool valid_provider_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  }
  return true;
}

bool valid_env_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

const std::string& non_empty_string(const std::string& where, const std::string& key, const toml::node& value) {
  const toml::value<std::string>* text = value.as_string();
  if (text == nullptr || text->get().empty()) fail(where, "\"" + key + "\" must be a non-empty string");
  return text->get();
}

/// `models = { NAME = { context_window = N } }` of a provider profile.
void profile_models(const std::string& file, const std::string& table_name, const toml::node& node,
                    llm::ProviderProfile& profile) {
  const toml::table* models = node.as_table();
  if (models == nullptr) fail(line_of(file, node), "\"models\" must be a table { MODEL = { context_window = N } }");
  for (const auto& [model_name, entry] : *models) {
    const std::string model(model_name.str());
    const std::string where = line_of(file, entry);
    const toml::table* settings = entry.as_table();
    if (settings == nullptr || model.empty()) {
      fail(where, "[" + table_name + "] models.\"" + model + "\" must be a table { context_window = N }");
    }
    for (const auto& [key_name, value] : *settings) {
      const std::string key(key_name.str());
      if (key != "context_window") {
        fail(line_of(file, value), "unknown key \"" + key + "\" in [" + table_name + "] models.\"" + model +
                                       "\" (context_window)");
      }
      const toml::value<std::int64_t>* number = value.as_integer();
      if (number == nullptr || number->get() < 256 || number->get() > 100'000'000) {
        fail(line_of(file, value), "[" + table_name + "] models.\"" + model +
                                       "\".context_window must be a number of tokens from 256 to 100000000");
      }
      profile.context_windows[model] = number->get();
    }
  }
}

/// One `[providers.NAME]` table.
llm::ProviderProfile provider_profile(const std::string& file, const std::string& name, const toml::node& node) {
  const std::string table_name = "providers." + name;
  const toml::table* table = node.as_table();
  if (table == nullptr) fail(line_of(file, node), "\"" + table_name + "\" must be a table [providers.NAME]");
  if (!valid_provider_name(name)) {
    fail(line_of(file, node), "[" + table_name + "]: a provider name is 1 to 64 letters, digits, '-', '_' or '.'");
  }
  if (name == "scripted") fail(line_of(file, node), "[providers.scripted]: \"scripted\" is the built-in test provider");
  llm::ProviderProfile profile;
  profile.name = name;
  profile.where = line_of(file, node);
  bool has_kind = false;
  for (const auto& [key_name, value] : *table) {
    const std::string key(key_name.str());
    const std::string where = line_of(file, value);
    if (key == "kind") {
      profile.kind = non_empty_string(where, key, value);
      if (profile.kind != "openai") fail(where, "[" + table_name + "] kind \"" + profile.kind + "\": the only kind is \"openai\"");
      has_kind = true;
    } else if (key == "base_url") {
      profile.base_url = non_empty_string(where, key, value);
    } else if (key == "api_key_env") {
      profile.api_key_env = non_empty_string(where, key, value);
      if (!valid_env_name(profile.api_key_env)) {
        fail(where, "[" + table_name + "] api_key_env must name an environment variable (letters, digits, '_')");
      }
    } else if (key == "default_model") {
      profile.default_model = non_empty_string(where, key, value);
    } else if (key == "models") {
      profile_models(file, table_name, value, profile);
    } else {
      fail(where, "unknown key \"" + key + "\" in [" + table_name +
                      "] (kind, base_url, api_key_env, default_model, models)");
    }
  }
  if (!has_kind) fail(profile.where, "[" + table_name + "] needs kind = \"openai\"");
  if (profile.base_url.empty()) fail(profile.where, "[" + table_name + "] needs base_url (e.g. \"http://127.0.0.1:8000/v1\")");
  if (profile.default_model.empty()) {
    if (profile.context_windows.size() != 1) {
      fail(profile.where, "[" + table_name + "] needs default_model (or exactly one entry in models)");
    }
    profile.default_model = profile.context_windows.begin()->first;
  }
  return profile;
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
  mcp_servers_.clear();
  provider_profiles_.clear();
  std::vector<CLI::ConfigItem> items;
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    const std::string where = file + " line " + std::to_string(node.source().begin.line);
    if (name == "mcp") {
      const toml::table* servers = node.as_table();
      if (servers == nullptr) fail(where, "\"mcp\" must be tables [mcp.NAME]");
      for (const auto& [server, server_node] : *servers) {
        mcp_servers_.push_back(mcp_server(file, std::string(server.str()), server_node));
      }
      continue;
    }
    if (name == "providers") {
      const toml::table* profiles = node.as_table();
      if (profiles == nullptr) fail(where, "\"providers\" must be tables [providers.NAME]");
      for (const auto& [profile, profile_node] : *profiles) {
        provider_profiles_.push_back(provider_profile(file, std::string(profile.str()), profile_node));
      }
      continue;
    }
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
                 "line win. [mcp.NAME] tables add MCP servers' tools (command/args/env or url/headers, "
                 "timeoutMs; docs/protocol.md 12.5). [providers.NAME] tables add OpenAI-compatible endpoints (kind = "
                 "\"openai\", base_url, api_key_env, default_model, models = { M = { context_window = N } }; "
                 "docs/protocol.md 13.3)");
  app.config_formatter(std::move(config));
}

}  // namespace harnessd
