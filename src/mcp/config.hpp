// What the daemon knows about one MCP server (a `[mcp.NAME]` table of the
// config file) and the bounds every MCP client keeps. Plain data: the TOML
// reader fills it, the clients read it.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace harnessd::mcp {

struct ServerConfig {
  std::string name;  ///< NAME of `[mcp.NAME]`
  /// stdio: the program (looked up in PATH without a '/'), its arguments,
  /// and variables added to (or replacing those of) the daemon's environment.
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  /// Streamable HTTP: the endpoint and headers sent with every request.
  std::string url;
  std::map<std::string, std::string> headers;
  /// How long a tools/call may take before it fails with MCP_TIMEOUT.
  std::chrono::milliseconds call_timeout{60'000};
};

/// Bounds against a slow, broken or hostile server; one struct so tests
/// and the daemon see the same numbers.
struct Options {
  /// One JSON-RPC message from the server; a longer one is dropped.
  std::size_t max_message_bytes = std::size_t{16} << 20;  // 16 MiB
  /// A tool result's text, cut beyond this (the model reads it all).
  std::size_t max_result_text_bytes = 256 * 1024;
  /// initialize and each tools/list page.
  std::chrono::milliseconds request_timeout{30'000};
  /// Opening an HTTP connection (resolve, connect, TLS handshake).
  std::chrono::milliseconds connect_timeout{10'000};
  /// Restart delay after the server died: doubled per failed start.
  std::chrono::milliseconds restart_min{500};
  std::chrono::milliseconds restart_max{30'000};
  /// tools/list pages and tools per server: a cursor that never ends stops here.
  int max_list_pages = 100;
  std::size_t max_tools = 1000;
  /// Lines of a child's stderr logged at info; later ones at debug.
  int stderr_info_lines = 200;
  /// Bytes queued for a child's stdin before it counts as stuck.
  std::size_t max_queued_bytes = std::size_t{64} << 20;
};

}  // namespace harnessd::mcp
