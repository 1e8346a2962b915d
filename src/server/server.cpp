#include "server/server.hpp"

#include "server/connection.hpp"
#include "server/connection_limiter.hpp"
#include "server/http_endpoint.hpp"
#include "server/tls_context.hpp"
#include "transport/ndjson_transport.hpp"
#include "transport/tls_stream.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include <sys/socket.h>

#include <stdexcept>

namespace harnessd::server {
namespace asio = boost::asio;
using asio::ip::tcp;

struct Server::Listener {
  tcp::acceptor acceptor;
  std::string scheme;
  std::string url;
};

Server::Server(asio::io_context& io, ServerContext& context)
    : io_(io),
      context_(context),
      limiter_(std::make_shared<ConnectionLimiter>(context.config.max_connections,
                                                   context.config.max_connections_per_ip)) {}

Server::~Server() = default;

void Server::set_tls(std::shared_ptr<TlsContext> tls) { tls_ = std::move(tls); }

void Server::require_tls(const std::string& scheme) const {
  if ((scheme == "wss" || scheme == "tls") && !tls_) {
    throw std::runtime_error(scheme + ":// listeners need --tls-cert and --tls-key");
  }
}

std::string Server::listen(const util::ListenUrl& url) {
  require_tls(url.scheme);
  tcp::endpoint endpoint(asio::ip::make_address(url.host), url.port);
  auto listener = std::make_shared<Listener>(Listener{tcp::acceptor(asio::make_strand(io_)), url.scheme, {}});
  tcp::acceptor& acceptor = listener->acceptor;
  acceptor.open(endpoint.protocol());
  acceptor.set_option(tcp::acceptor::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen(asio::socket_base::max_listen_connections);
  listener->url = util::format_listen_url(url.scheme, url.host, acceptor.local_endpoint().port());
  start(listener);
  return listener->url;
}

std::string Server::adopt(int fd, const std::string& scheme) {
  require_tls(scheme);
  auto listener = std::make_shared<Listener>(Listener{tcp::acceptor(asio::make_strand(io_)), scheme, {}});
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      (address.ss_family != AF_INET && address.ss_family != AF_INET6)) {
    throw std::runtime_error("socket " + std::to_string(fd) + " from systemd is not a TCP socket");
  }
  listener->acceptor.assign(address.ss_family == AF_INET ? tcp::v4() : tcp::v6(), fd);
  const tcp::endpoint local = listener->acceptor.local_endpoint();
  listener->url = util::format_listen_url(scheme, local.address().to_string(), local.port());
  start(listener);
  return listener->url;
}

void Server::start(const std::shared_ptr<Listener>& listener) {
  {
    std::lock_guard lock(mutex_);
    listeners_.push_back(listener);
  }

  asio::co_spawn(listener->acceptor.get_executor(), accept_loop(listener), [url = listener->url](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      spdlog::error("{}: listener stopped: {}", url, ex.what());
    }
  });
  spdlog::info("listening on {}", listener->url);
}

asio::awaitable<void> Server::accept_loop(std::shared_ptr<Listener> listener) {
  for (;;) {
    boost::system::error_code ec;
    // Each connection gets its own strand: its reader, writer and request
    // coroutines never run concurrently.
    tcp::socket socket = co_await listener->acceptor.async_accept(
        asio::make_strand(io_), asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !listener->acceptor.is_open()) co_return;
    if (ec) {
      // Out of descriptors and the like: back off instead of spinning.
      spdlog::warn("{}: accept failed: {}", listener->url, ec.message());
      asio::steady_timer pause(co_await asio::this_coro::executor, context_.config.accept_retry_delay);
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    // Counted from accept to close, before a byte is read: an unauthenticated
    // flood is refused here, not after it holds buffers.
    const tcp::endpoint remote = socket.remote_endpoint(ec);
    std::shared_ptr<void> slot = ec ? nullptr : limiter_->try_acquire(remote.address());
    if (!slot) {
      spdlog::warn("{}: connection from {} refused: --max-connections ({}) or --max-connections-per-ip ({}) reached",
                   listener->url, ec ? std::string("?") : remote.address().to_string(),
                   context_.config.max_connections, context_.config.max_connections_per_ip);
      socket.close(ec);
      continue;
    }
    if (listener->scheme == "ws" || listener->scheme == "wss") {
      serve_http_or_websocket(std::move(socket), *this, listener->scheme == "wss" ? tls_->current() : nullptr,
                              std::move(slot));
      continue;
    }
    if (listener->scheme == "tls") {
      auto executor = socket.get_executor();
      asio::co_spawn(executor, serve_tls(std::move(socket), tls_->current(), std::move(slot)), asio::detached);
      continue;
    }
    auto strand = socket.get_executor();
    auto transport = std::make_unique<transport::NdjsonTransport>(
        transport::make_tcp_stream(std::move(socket)), transport::TransportKind::tcp,
        context_.config.max_frame_bytes);
    launch(std::make_shared<Connection>(Connection::Strand(strand), std::move(transport), context_, nullptr,
                                        std::move(slot)));
  }
}

asio::awaitable<void> Server::serve_tls(tcp::socket socket, std::shared_ptr<asio::ssl::context> tls,
                                        std::shared_ptr<void> slot) {
  boost::system::error_code ec;
  const tcp::endpoint remote = socket.remote_endpoint(ec);
  const std::string peer =
      "tls:" + (ec ? std::string("?") : remote.address().to_string() + ":" + std::to_string(remote.port()));
  auto stream = std::make_shared<asio::ssl::stream<tcp::socket>>(std::move(socket), *tls);
  // A peer that never finishes the handshake is cut off.
  asio::steady_timer deadline(stream->get_executor(), context_.config.ws_handshake_timeout);
  deadline.async_wait([weak = std::weak_ptr(stream)](boost::system::error_code timer_ec) {
    if (auto s = weak.lock(); s && !timer_ec) {
      boost::system::error_code ignored;
      s->next_layer().close(ignored);
    }
  });
  co_await stream->async_handshake(asio::ssl::stream_base::server, asio::redirect_error(asio::use_awaitable, ec));
  deadline.cancel();
  if (ec) {
    // A plain-text client on a TLS port, an untrusted certificate, a scan.
    spdlog::info("{}: TLS handshake failed: {}", peer, ec.message());
    co_return;
  }
  auto strand = stream->get_executor();
  auto transport = std::make_unique<transport::NdjsonTransport>(transport::make_tls_stream(std::move(*stream), peer),
                                                                transport::TransportKind::tcp,
                                                                context_.config.max_frame_bytes);
  launch(std::make_shared<Connection>(Connection::Strand(strand), std::move(transport), context_, nullptr,
                                      std::move(slot)));
}

void Server::serve_stdio(std::function<void()> on_end) {
  auto strand = asio::make_strand(io_);
  auto transport = std::make_unique<transport::NdjsonTransport>(
      transport::make_stdio_stream(strand), transport::TransportKind::stdio,
      context_.config.max_frame_bytes);
  // The local process that spawned us owns our pipes: no token needed.
  launch(std::make_shared<Connection>(Connection::Strand(strand), std::move(transport), context_,
                                      &auth::Credentials::anonymous()),
         std::move(on_end));
}

void Server::launch(std::shared_ptr<Connection> connection, std::function<void()> on_end) {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    connections_[connection.get()] = connection;
  }
  Connection* key = connection.get();
  asio::co_spawn(connection->strand(), connection->run(),
                 [this, key, connection, on_end = std::move(on_end)](std::exception_ptr e) {
                   if (e) {
                     try {
                       std::rethrow_exception(e);
                     } catch (const std::exception& ex) {
                       spdlog::error("connection failed: {}", ex.what());
                     }
                   }
                   std::function<void()> stopped;
                   {
                     std::lock_guard lock(mutex_);
                     connections_.erase(key);
                     if (stopped_ && connections_.empty()) stopped = std::exchange(on_stopped_, nullptr);
                   }
                   if (on_end) on_end();
                   if (stopped) stopped();
                 });
}

void Server::drain() {
  context_.draining.store(true, std::memory_order_release);
  std::lock_guard lock(mutex_);
  for (auto& listener : listeners_) {
    // The HTTP port stays open: /healthz says "draining" and upgrades are
    // refused. NDJSON listeners close, so new clients are refused at once.
    if (listener->scheme == "ws" || listener->scheme == "wss") continue;
    asio::post(listener->acceptor.get_executor(), [listener] {
      boost::system::error_code ec;
      listener->acceptor.close(ec);
    });
  }
}

void Server::stop(std::function<void()> on_stopped) {
  std::vector<std::shared_ptr<Connection>> live;
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
    if (connections_.empty()) {
      if (on_stopped) asio::post(io_, std::move(on_stopped));
    } else {
      on_stopped_ = std::move(on_stopped);
    }
    for (auto& listener : listeners_) {
      // Close on the acceptor's executor: the accept loop runs there.
      asio::post(listener->acceptor.get_executor(), [listener] {
        boost::system::error_code ec;
        listener->acceptor.close(ec);
      });
    }
    for (auto& [key, weak] : connections_) {
      if (auto connection = weak.lock()) live.push_back(std::move(connection));
    }
    for (auto& [key, close] : http_) close();
  }
  spdlog::info("stopping: {} connection(s) to settle", live.size());
  for (auto& connection : live) connection->stop();
}

std::uint64_t Server::track_http(std::function<void()> close) {
  std::lock_guard lock(mutex_);
  if (stopped_) {
    close();
    return 0;
  }
  http_.emplace(++next_http_, std::move(close));
  return next_http_;
}

void Server::untrack_http(std::uint64_t key) {
  std::lock_guard lock(mutex_);
  http_.erase(key);
}

std::size_t Server::connection_count() const {
  std::lock_guard lock(mutex_);
  return connections_.size();
}

}  // namespace harnessd::server
