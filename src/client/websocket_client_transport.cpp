// The WebSocket client transport: one JSON-RPC message per text frame, over
// TCP (ws://) or TLS (wss://). The only client file that includes Beast
// (compile time on a 2-core machine).
#include "harnessd/client/client_transport.hpp"

#include "client/tls_client.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <boost/beast/websocket/error.hpp>
#include <boost/beast/websocket/stream.hpp>

#include <optional>

namespace harnessd::client {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace ssl = asio::ssl;
using boost::system::error_code;

namespace {

/// `Stream` is beast::tcp_stream (ws://) or beast::ssl_stream of one (wss://).
template <class Stream>
class WebSocketClientTransport final : public ClientTransport {
 public:
  WebSocketClientTransport(websocket::stream<Stream> ws, std::string url)
      : ws_(std::move(ws)), url_(std::move(url)) {}

  asio::awaitable<ReadResult> read_frame() override {
    for (;;) {
      if (ended_) co_return ReadResult{};
      buffer_.clear();
      error_code ec;
      co_await ws_.async_read(buffer_, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        ended_ = true;
        if (ec == websocket::error::closed) {
          const websocket::close_reason& reason = ws_.reason();
          end_ = "connection to " + url_ + " closed by the daemon (code " + std::to_string(reason.code) +
                 (reason.reason.empty() ? "" : ": " + std::string(reason.reason.c_str())) + ")";
        } else if (ec != asio::error::operation_aborted) {
          end_ = "connection to " + url_ + " failed: " + ec.message();
        }
        co_return ReadResult{};
      }
      if (ws_.got_binary()) co_return ReadResult{ReadResult::Kind::oversized, {}};  // not ours: counted as malformed
      current_ = beast::buffers_to_string(buffer_.data());
      co_return ReadResult{ReadResult::Kind::frame, current_};
    }
  }

  asio::awaitable<void> write_frames(std::span<const std::string> frames) override {
    writing_ = true;
    try {
      for (const std::string& frame : frames) {
        co_await ws_.async_write(asio::buffer(frame), asio::use_awaitable);
      }
    } catch (...) {
      writing_ = false;
      throw;
    }
    writing_ = false;
  }

  asio::awaitable<void> close() override {
    error_code ec;
    // Beast allows one write-like operation at a time: a close frame cannot
    // overtake a write in progress, so then the socket just closes.
    if (!closing_ && !writing_ && ws_.is_open()) {
      closing_ = true;
      beast::get_lowest_layer(ws_).expires_after(std::chrono::seconds(5));
      co_await ws_.async_close(websocket::close_code::normal, asio::redirect_error(asio::use_awaitable, ec));
    }
    force_close();
  }

  void force_close() override {
    error_code ec;
    beast::get_lowest_layer(ws_).socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    beast::get_lowest_layer(ws_).close();
  }

  asio::awaitable<std::string> end_reason() override {
    std::string why = end_.empty() ? "connection to " + url_ + " closed" : end_;
    co_return why;
  }

  std::string describe() const override { return url_; }

 private:
  websocket::stream<Stream> ws_;
  std::string url_;
  beast::flat_buffer buffer_;
  std::string current_;
  std::string end_;
  bool ended_ = false;
  bool writing_ = false;
  bool closing_ = false;
};

}  // namespace

namespace {

/// The upgrade on a connected (and for wss, TLS) stream; the deadline of
/// the lowest layer is running.
template <class Stream>
asio::awaitable<std::unique_ptr<ClientTransport>> upgrade(websocket::stream<Stream> ws, util::Url url,
                                                          std::string bearer_token) {
  ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
  ws.set_option(websocket::stream_base::decorator([token = std::move(bearer_token)](websocket::request_type& req) {
    req.set(beast::http::field::user_agent, "harnessd-cpp-client");
    if (!token.empty()) req.set(beast::http::field::authorization, "Bearer " + token);
  }));
  ws.read_message_max(default_client_max_frame_bytes);
  std::string host = url.host_port();
  std::string target = url.target();
  co_await ws.async_handshake(host, target, asio::use_awaitable);
  beast::get_lowest_layer(ws).expires_never();
  ws.text(true);
  // Shown in messages: the query may hold an access token.
  url.query.clear();
  std::string display = url.scheme + "://" + host + url.target();
  std::unique_ptr<ClientTransport> transport =
      std::make_unique<WebSocketClientTransport<Stream>>(std::move(ws), std::move(display));
  co_return transport;
}

}  // namespace

asio::awaitable<std::unique_ptr<ClientTransport>> connect_websocket(asio::any_io_executor executor, util::Url url,
                                                                    ConnectOptions options) {
  const bool tls = url.scheme == "wss";
  // Before any I/O: a bad CA file is a usage error, not a connection failure.
  std::optional<ssl::context> context;
  if (tls) context.emplace(detail::make_tls_context(options));

  asio::ip::tcp::resolver resolver(executor);
  std::string service = std::to_string(url.port);
  auto endpoints = co_await resolver.async_resolve(url.host, service, asio::use_awaitable);
  beast::tcp_stream stream(executor);
  stream.expires_after(detail::connect_timeout);
  co_await stream.async_connect(endpoints, asio::use_awaitable);
  stream.socket().set_option(asio::ip::tcp::no_delay(true));

  std::unique_ptr<ClientTransport> transport;
  if (!tls) {
    websocket::stream<beast::tcp_stream> ws(std::move(stream));
    transport = co_await upgrade(std::move(ws), std::move(url), std::move(options.bearer_token));
    co_return transport;
  }
  websocket::stream<beast::ssl_stream<beast::tcp_stream>> ws(std::move(stream), *context);
  SSL* native = ws.next_layer().native_handle();
  detail::prepare_tls_connection(native, url.host, options, "http/1.1");
  error_code handshake;
  co_await ws.next_layer().async_handshake(ssl::stream_base::client,
                                           asio::redirect_error(asio::use_awaitable, handshake));
  if (handshake) detail::throw_handshake_error(native, handshake, url.host_port());
  transport = co_await upgrade(std::move(ws), std::move(url), std::move(options.bearer_token));
  co_return transport;
}

asio::awaitable<std::unique_ptr<ClientTransport>> connect_websocket(asio::any_io_executor executor, util::Url url) {
  ConnectOptions options;
  std::unique_ptr<ClientTransport> transport =
      co_await connect_websocket(std::move(executor), std::move(url), std::move(options));
  co_return transport;
}

}  // namespace harnessd::client
