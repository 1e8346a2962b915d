// --config FILE: the daemon's flags from a TOML file. Its keys are the long
// flag names without the dashes (`listen = ["ws://0.0.0.0:7878"]`,
// `drain-timeout-ms = 30000`); flags given on the command line win. An
// unknown key or a value of the wrong type is an error naming the key and
// its line. `[mcp.NAME]` tables are not flags: they configure MCP servers;
// `[providers.NAME]` tables add OpenAI-compatible model endpoints.
#pragma once

#include "llm/provider_profile.hpp"
#include "mcp/config.hpp"

#include <CLI/CLI.hpp>

#include <map>
#include <string>

namespace harnessd {

class TomlConfig final : public CLI::Config {
 public:
  /// `app` is the application whose options the keys must name.
  explicit TomlConfig(const CLI::App& app) : app_(app) {}

  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;
  std::string to_config(const CLI::App*, bool, bool, std::string) const override { return {}; }

  /// "FILE line N" of the key behind `--KEY` in `message`, or "" (to add to
  /// a value error CLI11 reports without the file's position).
  std::string where(const std::string& message) const;

  /// The `[mcp.NAME]` tables of the last file read, in file order.
  const std::vector<mcp::ServerConfig>& mcp_servers() const noexcept { return mcp_servers_; }
  /// The `[providers.NAME]` tables of the last file read, in file order.
  const std::vector<llm::ProviderProfile>& provider_profiles() const noexcept { return provider_profiles_; }

 private:
  std::string file_name() const;

  const CLI::App& app_;
  mutable std::map<std::string, int> lines_;  ///< key -> line, of the last file read
  mutable std::vector<mcp::ServerConfig> mcp_servers_;
  mutable std::vector<llm::ProviderProfile> provider_profiles_;
};

/// Declares --config on `app` with TomlConfig as its reader.
void add_config_option(CLI::App& app, std::shared_ptr<TomlConfig> config);

}  // namespace harnessd
