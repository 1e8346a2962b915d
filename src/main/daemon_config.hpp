// Everything harnessd can be told, in one tree: the daemon's own settings
// and each layer's options struct. A layer's defaults are declared once, in
// its struct; add_flags() binds every flag straight to its field, so
// --help shows the defaults in force.
#pragma once

#include "harness/session_registry.hpp"
#include "llm/deepseek_provider.hpp"
#include "llm/provider_profile.hpp"
#include "mcp/config.hpp"
#include "server/server_context.hpp"
#include "store/jsonl_store.hpp"
#include "store/postgres_store.hpp"

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace harnessd {

struct DaemonConfig {
  bool stdio = false;
  std::vector<std::string> listen;  ///< empty without --stdio: default_listen
  std::string ready_file;
  unsigned threads = 0;  ///< 0: one per core
  std::string session_root;  ///< empty: $DSH_SESSION_ROOT, else ./.sessions
  std::string store = "jsonl";
  std::string log_level = "info";
  std::chrono::milliseconds shutdown_grace{10'000};
  /// At SIGTERM, running turns get this long to finish before they are
  /// cancelled; 0 cancels them at once.
  std::chrono::milliseconds drain_timeout{30'000};
  std::string auth_token_file;
  std::string auth_file;  ///< principals and their token hashes (TOML)
  /// Serve non-loopback listeners without authentication.
  bool insecure_no_auth = false;
  /// Print what the bash sandbox can do on this host, then exit.
  bool check_sandbox = false;
  std::string tls_cert;  ///< PEM chain of wss:// and tls:// listeners
  std::string tls_key;
  /// 0: derived from the descriptor limit at start (see add_flags).
  std::size_t max_open_logs = 0;
  std::size_t max_running_turns = 0;

  store::JsonlOptions jsonl;
  store::PostgresOptions postgres;  ///< node_id empty: hostname-pid
  harness::HarnessOptions harness;
  server::ServerConfig server;
  llm::DeepSeekConfig deepseek;  ///< api_key and base_url come from the environment
  std::vector<mcp::ServerConfig> mcp;  ///< the config file's [mcp.NAME] tables
  std::vector<llm::ProviderProfile> provider_profiles;  ///< the config file's [providers.NAME] tables
};

inline const std::vector<std::string> default_listen = {"ws://127.0.0.1:7878", "tcp://127.0.0.1:7879"};

/// Declares every flag on `app`, bound to `config`.
void add_flags(CLI::App& app, DaemonConfig& config);

}  // namespace harnessd
