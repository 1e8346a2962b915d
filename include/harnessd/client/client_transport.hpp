// How a Client reaches a daemon: a spawned `harnessd --stdio` child over two
// pipes, a TCP socket (NDJSON), a WebSocket, or either of the last two over
// TLS. The Client only sees whole
// frames; this header never includes Beast.
#pragma once

#include "harnessd/transport/frame_transport.hpp"
#include "harnessd/util/url.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::client {

using transport::ReadResult;

/// Frames in, batches of frames out. Used from one executor only (the
/// Client's); one read and one write may be in flight at the same time.
class ClientTransport {
 public:
  virtual ~ClientTransport() = default;

  /// The next frame; `end` once the peer is gone or the transport was closed.
  virtual boost::asio::awaitable<ReadResult> read_frame() = 0;

  /// Writes every frame in order. Throws boost::system::system_error on failure.
  virtual boost::asio::awaitable<void> write_frames(std::span<const std::string> frames) = 0;

  /// Ends the connection gracefully (close handshake; for a child: stdin EOF,
  /// then a bounded wait for it to exit, escalating to SIGTERM and SIGKILL).
  virtual boost::asio::awaitable<void> close() = 0;

  /// Closes at once; pending reads and writes fail.
  virtual void force_close() = 0;

  /// Called after read_frame() returned `end`: why the connection ended,
  /// e.g. "harnessd (pid 12) exited with status 1". May wait briefly.
  virtual boost::asio::awaitable<std::string> end_reason() = 0;

  /// "stdio:harnessd[pid]", "tcp://127.0.0.1:7879", ... for messages.
  virtual std::string describe() const = 0;
};

/// Largest frame a client accepts from the daemon; longer lines are dropped.
inline constexpr std::size_t default_client_max_frame_bytes = 64 * 1024 * 1024;

struct SpawnOptions {
  /// Path of the daemon binary; a name without '/' is looked up in PATH.
  std::string program = "harnessd";
  /// Arguments after `--stdio`, e.g. {"--store", "memory"}.
  std::vector<std::string> args;
  /// How long close() waits for the child after stdin EOF before SIGTERM
  /// (and as long again before SIGKILL).
  std::chrono::milliseconds exit_grace{3000};
};

/// Starts `program --stdio args...` with its stdout on a pipe and its stdin
/// on a UNIX socket; its stderr is inherited. A child that exits or stops
/// reading fails the pending requests with TransportClosed: the socket is
/// written with MSG_NOSIGNAL, so the host gets no SIGPIPE whatever its
/// disposition. The child runs in its own process group, so a Ctrl-C at the
/// terminal reaches the client, not the daemon. Throws std::system_error
/// when the program cannot be started.
std::unique_ptr<ClientTransport> spawn_stdio(const boost::asio::any_io_executor& executor,
                                             const SpawnOptions& options);

/// How a tls:// or wss:// connection checks the daemon's certificate
/// (ignored for tcp:// and ws://). By default it must chain to the system's
/// trust store and name the URL's host (a DNS name, or an IP address as an
/// IP subjectAltName); TLS 1.2 is the minimum.
struct ConnectOptions {
  /// PEM file of the CA certificates to trust instead of the system's
  /// (e.g. the private CA that signed the daemon's certificate). Empty: the
  /// system trust store.
  std::string ca_file;
  /// Testing only: accept any certificate for any host. The connection is
  /// still encrypted but anyone in the path can read and alter it.
  bool insecure = false;
  /// ws:// and wss://: sent as `Authorization: Bearer TOKEN` on the upgrade
  /// (never in the URL, where proxies and logs would keep it). NDJSON
  /// daemons take the token in initialize (protocol::InitializeParams::auth_token).
  std::string bearer_token;
};

/// Parses `tcp://HOST:PORT`, `tls://HOST:PORT` (NDJSON over TLS),
/// `ws://HOST:PORT[/PATH][?QUERY]` or `wss://HOST:PORT[/PATH][?QUERY]`
/// (WebSocket over TLS); for ws and wss the upgrade request goes to
/// url.target(). Throws std::invalid_argument with a message meant for the
/// user.
util::Url parse_server_url(std::string_view url);

/// Connects to a tcp://, tls://, ws:// or wss:// URL. Throws
/// std::invalid_argument for a bad URL or an unreadable options.ca_file,
/// CertificateError when the daemon's certificate is not trusted, ClientError
/// for another failed TLS handshake and boost::system::system_error when the
/// connection or the WebSocket handshake fails.
boost::asio::awaitable<std::unique_ptr<ClientTransport>> connect_url(boost::asio::any_io_executor executor,
                                                                     std::string url, ConnectOptions options);

/// connect_url() with the default ConnectOptions (the system trust store).
boost::asio::awaitable<std::unique_ptr<ClientTransport>> connect_url(boost::asio::any_io_executor executor,
                                                                     std::string url);

boost::asio::awaitable<std::unique_ptr<ClientTransport>> connect_tcp(boost::asio::any_io_executor executor,
                                                                     std::string host, std::uint16_t port);

/// NDJSON over TLS (a tls:// daemon); errors as connect_url().
boost::asio::awaitable<std::unique_ptr<ClientTransport>> connect_tls(boost::asio::any_io_executor executor,
                                                                     std::string host, std::uint16_t port,
                                                                     ConnectOptions options);

/// A ws:// or (by url.scheme) wss:// URL; options apply to wss. Defined in
/// the one file that includes Beast.
boost::asio::awaitable<std::unique_ptr<ClientTransport>> connect_websocket(boost::asio::any_io_executor executor,
                                                                           util::Url url, ConnectOptions options);

/// connect_websocket() with the default ConnectOptions.
boost::asio::awaitable<std::unique_ptr<ClientTransport>> connect_websocket(boost::asio::any_io_executor executor,
                                                                           util::Url url);

}  // namespace harnessd::client
