// Everything a connection needs from the daemon, and the knobs that bound it.
#pragma once

#include "auth/credentials.hpp"
#include "harnessd/protocol/decisions.hpp"
#include "server/outbox.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace harnessd::harness {
class SessionRegistry;
}
namespace harnessd::llm {
class ProviderRegistry;
}

namespace harnessd::server {

class Metrics;

struct ServerConfig {
  std::size_t max_frame_bytes = 8 * 1024 * 1024;
  std::size_t outbox_max_bytes = 4 * 1024 * 1024;
  std::size_t max_inflight_requests = 1024;
  /// Bytes of built answers not yet written (session/events pages, replayed
  /// events), per connection and in all. A request that would pass them
  /// waits up to response_budget_wait for bytes to drain, then gets -32005.
  std::size_t max_response_bytes_per_connection = 64 * 1024 * 1024;
  std::size_t max_response_bytes = 256 * 1024 * 1024;
  std::chrono::milliseconds response_budget_wait{10'000};
  /// A connection with more bytes of subscribed events queued is cut off:
  /// subscriptions never wait for their peer (blocks are shared, so this
  /// costs little memory per subscriber).
  std::size_t subscriber_max_bytes = 64 * 1024 * 1024;
  std::size_t max_subscriptions = 1024;  ///< per connection
  /// Subscribed events wait this long to share one write per connection
  /// (events of the connection's own prompts never wait).
  std::chrono::milliseconds subscriber_linger{25};
  std::chrono::milliseconds write_timeout{30'000};
  /// A network connection that has not initialized (and authenticated) by
  /// then is closed.
  std::chrono::milliseconds handshake_timeout{10'000};
  /// A network connection with no request and no running prompt for this
  /// long is closed; 0 keeps idle connections open.
  std::chrono::milliseconds idle_timeout{0};
  std::string default_provider = "scripted";
  std::optional<std::string> default_cwd;  ///< DSH_CWD, for sessions of clients that send none
  /// Network clients' workspaces live under it (with principals, under
  /// ROOT/PRINCIPAL); their initialize.cwd must resolve inside it.
  std::string workspace_root;
  /// initialize.approvalPolicy of clients that send none; unset: `never` on
  /// stdio, `ask` on network listeners.
  std::optional<protocol::ApprovalPolicy> approval_policy;
  /// initialize.contextWindow of clients that send none, for models their
  /// provider profile gives no window (tokens); unset: the model catalog's,
  /// else 128,000.
  std::optional<std::int64_t> context_window;
  /// Network clients may ask for sandbox "danger-full-access".
  bool allow_full_access = false;
  /// Who network clients may be; none configured: anyone, as the anonymous
  /// administrator.
  auth::Credentials credentials;
  std::vector<std::string> allowed_origins;
  /// Host header values the HTTP/WebSocket port accepts besides loopback
  /// names and the address a client connected to (DNS rebinding guard).
  std::vector<std::string> allowed_hosts;
  /// Open network connections at once, in all and per client address (0: no
  /// limit); past them a new connection is closed at once. Loopback clients
  /// count only toward the total.
  std::size_t max_connections = 0;
  std::size_t max_connections_per_ip = 256;
  std::chrono::milliseconds ws_idle_timeout{60'000};
  bool ws_deflate = false;
  std::size_t ws_deflate_threshold = 1024;
  /// An HTTP request (or WebSocket upgrade) must arrive whole within this.
  std::chrono::milliseconds http_read_timeout{30'000};
  std::size_t max_http_body_bytes = 64 * 1024;
  /// The WebSocket opening and closing handshakes.
  std::chrono::milliseconds ws_handshake_timeout{10'000};
  std::chrono::milliseconds ws_close_timeout{500};
  /// After a failed accept (out of descriptors): the pause before the next.
  std::chrono::milliseconds accept_retry_delay{100};
};

struct ServerContext {
  ServerConfig config;
  harness::SessionRegistry& sessions;
  llm::ProviderRegistry& providers;
  Metrics& metrics;
  /// Set once at SIGTERM (Server::drain): no new connections or prompts.
  std::atomic<bool> draining{false};
  /// The response bytes of every connection (ServerConfig::max_response_bytes).
  std::shared_ptr<ByteBudget> response_budget = std::make_shared<ByteBudget>(config.max_response_bytes);
};

}  // namespace harnessd::server
