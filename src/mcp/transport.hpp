// How an MCP client exchanges JSON-RPC messages with its server: a child's
// stdin/stdout (stdio_transport) or HTTP POSTs (http_transport). The client
// sees whole messages and one "closed" event; the framing stays here.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace harnessd::mcp {

/// Every member is called on the owning client's strand, and the handlers
/// run there too. A transport serves one connection: after on_closed the
/// client makes a new one.
class Transport {
 public:
  struct Handlers {
    /// One message as received (not yet validated: may be any bytes).
    std::function<void(std::string message)> on_message;
    /// The connection is over (the child exited, the endpoint is
    /// unreachable, the session expired); called at most once.
    std::function<void(std::string reason)> on_closed;
  };

  virtual ~Transport() = default;

  virtual void start(Handlers handlers) = 0;
  /// Sends one message; `request_id` when it is a request of ours, so an
  /// answer the transport cannot deliver can become an error for it.
  virtual void send(std::string message, std::optional<std::int64_t> request_id) = 0;
  /// Stops waiting for the answer to `request_id` (timed out, cancelled).
  virtual void abandon(std::int64_t request_id) { (void)request_id; }
  /// The revision initialize agreed on (HTTP sends it on every request).
  virtual void set_protocol_version(std::string version) { (void)version; }
  /// After initialization: open the channel for messages the server sends
  /// on its own (HTTP's GET stream); stdio has it already.
  virtual void listen() {}
  /// Ends the connection (kills the child); on_closed is not called.
  virtual void stop() = 0;
};

}  // namespace harnessd::mcp
