// The daemon's front door: listeners, the stdio connection, and the set of
// live connections that a graceful stop walks.
#pragma once

#include "server/server_context.hpp"
#include "harnessd/transport/frame_transport.hpp"
#include "util/listen_url.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace harnessd::server {

class Connection;

/// Thread-safe.
class Server {
 public:
  Server(boost::asio::io_context& io, ServerContext& context);
  ~Server();

  /// Binds and starts accepting; returns the bound URL (port 0 resolved).
  /// Throws boost::system::system_error when the address cannot be bound.
  std::string listen(const util::ListenUrl& url);

  /// Serves stdin/stdout; `on_end` runs when that connection has closed.
  void serve_stdio(std::function<void()> on_end);

  /// Stops accepting and stops every connection gracefully (idempotent);
  /// `on_stopped` runs once the last connection has closed.
  void stop(std::function<void()> on_stopped = {});

  std::size_t connection_count() const;

  /// Runs a connection to its end on its strand, tracked for stop().
  void launch(std::shared_ptr<Connection> connection, std::function<void()> on_end = {});

  ServerContext& context() noexcept { return context_; }

 private:
  struct Listener;
  boost::asio::awaitable<void> accept_loop(std::shared_ptr<Listener> listener);

  boost::asio::io_context& io_;
  ServerContext& context_;
  mutable std::mutex mutex_;
  bool stopped_ = false;
  std::function<void()> on_stopped_;
  std::vector<std::shared_ptr<Listener>> listeners_;
  std::map<Connection*, std::weak_ptr<Connection>> connections_;
};

}  // namespace harnessd::server
