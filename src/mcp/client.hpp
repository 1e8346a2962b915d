// One MCP server as the daemon uses it: a client that connects (a child
// process or HTTP), initializes, lists the server's tools into the
// ToolRegistry as mcp__SERVER__TOOL, answers their calls, and restarts the
// server with backoff when it dies. Everything of a client runs on its own
// strand; turns reach it only through call().
#pragma once

#include "mcp/config.hpp"
#include "mcp/stdio_transport.hpp"
#include "mcp/transport.hpp"
#include "tools/tool.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/object.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace harnessd::llm {
class CancelScope;
}
namespace harnessd::tools {
class ToolRegistry;
}

namespace harnessd::mcp {

/// The revision asked for in initialize, and every revision accepted in its answer.
inline constexpr std::string_view protocol_version = "2025-06-18";
bool supported_protocol_version(std::string_view version);

/// Error codes of a call that did not reach a result.
inline constexpr std::string_view unavailable_code = "MCP_UNAVAILABLE";
inline constexpr std::string_view timeout_code = "MCP_TIMEOUT";
inline constexpr std::string_view protocol_error_code = "MCP_ERROR";

class Client : public std::enable_shared_from_this<Client> {
 public:
  enum class State { starting, ready, down, stopped };

  /// `registry` must outlive the client's work (until stop() has settled).
  static std::shared_ptr<Client> create(boost::asio::any_io_executor executor, ServerConfig config, Options options,
                                        tools::ToolRegistry& registry);

  /// Starts connecting in the background; returns at once. Thread-safe.
  void start();
  /// Ends the connection (kills the child) and every restart; pending
  /// calls fail with MCP_UNAVAILABLE. Thread-safe.
  void stop();

  /// Calls `tool` (the server's own name) from any strand; the result comes
  /// back on the caller's executor. Fails with MCP_UNAVAILABLE while the
  /// server is down, MCP_TIMEOUT after the server's timeout, CANCELLED soon
  /// after `cancel` fires (the server is told with notifications/cancelled).
  boost::asio::awaitable<tools::ToolResult> call(std::string tool, boost::json::object arguments,
                                                 llm::CancelScope& cancel);

  const std::string& name() const noexcept { return config_.name; }
  /// "mcp:NAME", the source() of its tools.
  const std::string& source() const noexcept { return source_; }

 private:
  Client(boost::asio::any_io_executor executor, ServerConfig config, Options options, tools::ToolRegistry& registry);

  /// One request of ours waiting for its answer, on the strand.
  struct Pending {
    explicit Pending(const Strand& strand) : timer(strand) {}
    boost::asio::steady_timer timer;
    std::optional<boost::json::object> answer;
    bool cancelled = false;
    bool gone = false;  ///< the connection ended first
    void wake() { timer.cancel(); }
  };
  enum class Outcome { answered, cancelled, gone, timed_out };

  static boost::asio::awaitable<void> supervise(std::shared_ptr<Client> self);
  static boost::asio::awaitable<bool> connect_once(std::shared_ptr<Client> self);
  static boost::asio::awaitable<void> list_tools(std::shared_ptr<Client> self);
  static boost::asio::awaitable<tools::ToolResult> call_on_strand(std::shared_ptr<Client> self, std::string tool,
                                                                  boost::json::object arguments,
                                                                  std::shared_ptr<Pending> pending);
  /// Sends a request and waits for its answer, its timeout, a cancel or the
  /// end of the connection.
  static boost::asio::awaitable<Outcome> request(std::shared_ptr<Client> self, std::string method,
                                                 boost::json::object params, std::chrono::milliseconds timeout,
                                                 std::shared_ptr<Pending> pending);

  void on_message(const std::string& text);
  void on_value(const boost::json::value& message);
  void on_closed(std::string reason);
  void notify(std::string_view method, boost::json::object params);
  void fail_pending();
  void set_state(State state, const std::string& why);

  Strand strand_;
  ServerConfig config_;
  Options options_;
  tools::ToolRegistry& registry_;
  std::string source_;
  std::shared_ptr<Transport> transport_;
  std::uint64_t connection_ = 0;  ///< counts connections; stale transports' handlers are ignored
  State state_ = State::starting;
  std::string down_reason_ = "starting";
  bool closed_ = false;
  bool stopping_ = false;
  bool listing_ = false;
  bool relist_ = false;
  std::int64_t next_id_ = 0;
  std::map<std::int64_t, std::shared_ptr<Pending>> pending_;
  boost::asio::steady_timer wait_timer_;  ///< end of connection, restart delay
};

}  // namespace harnessd::mcp
