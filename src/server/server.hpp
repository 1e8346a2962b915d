// The daemon's front door: listeners, the stdio connection, and the set of
// live connections that a graceful stop walks.
#pragma once

#include "server/server_context.hpp"
#include "harnessd/transport/frame_transport.hpp"
#include "util/listen_url.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace boost::asio::ssl {
class context;
}

namespace harnessd::server {

class Connection;
class ConnectionLimiter;
class TlsContext;

/// Thread-safe.
class Server {
 public:
  Server(boost::asio::io_context& io, ServerContext& context);
  ~Server();

  /// Binds and starts accepting; returns the bound URL (port 0 resolved).
  /// Throws boost::system::system_error when the address cannot be bound.
  std::string listen(const util::ListenUrl& url);

  /// The identity of wss:// and tls:// listeners; set before listening.
  void set_tls(std::shared_ptr<TlsContext> tls);

  /// Accepts on a listening socket passed by systemd (socket activation),
  /// served as `scheme` ("ws", "tcp", ...). Returns its URL.
  std::string adopt(int fd, const std::string& scheme);

  /// Stops taking new work: NDJSON listeners close, WebSocket upgrades and
  /// new prompts are refused (-32003), /healthz answers 503 "draining".
  /// Running turns go on; stop() ends them.
  void drain();

  /// Serves stdin/stdout; `on_end` runs when that connection has closed.
  void serve_stdio(std::function<void()> on_end);

  /// Stops accepting and stops every connection gracefully (idempotent);
  /// `on_stopped` runs once the last connection has closed.
  void stop(std::function<void()> on_stopped = {});

  std::size_t connection_count() const;

  /// Runs a connection to its end on its strand, tracked for stop().
  void launch(std::shared_ptr<Connection> connection, std::function<void()> on_end = {});

  ServerContext& context() noexcept { return context_; }

  /// An HTTP connection that is not (yet) a client connection: stop()
  /// calls `close` (from any thread) so that an idle keep-alive socket does
  /// not hold the daemon up. Returns a key for untrack_http().
  std::uint64_t track_http(std::function<void()> close);
  void untrack_http(std::uint64_t key);

 private:
  struct Listener;
  boost::asio::awaitable<void> accept_loop(std::shared_ptr<Listener> listener);
  void start(const std::shared_ptr<Listener>& listener);
  void require_tls(const std::string& scheme) const;
  /// tls://: the handshake, then NDJSON as on tcp://.
  boost::asio::awaitable<void> serve_tls(boost::asio::ip::tcp::socket socket,
                                         std::shared_ptr<boost::asio::ssl::context> tls,
                                         std::shared_ptr<void> slot);

  boost::asio::io_context& io_;
  ServerContext& context_;
  mutable std::mutex mutex_;
  bool stopped_ = false;
  std::function<void()> on_stopped_;
  std::vector<std::shared_ptr<Listener>> listeners_;
  std::map<Connection*, std::weak_ptr<Connection>> connections_;
  std::map<std::uint64_t, std::function<void()>> http_;
  std::shared_ptr<TlsContext> tls_;
  std::uint64_t next_http_ = 0;
  std::shared_ptr<ConnectionLimiter> limiter_;
};

}  // namespace harnessd::server
