// The WebSocket client transport: one JSON-RPC message per text frame. The
// only client file that includes Beast (compile time on a 2-core machine).
#include "harnessd/client/client_transport.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket/error.hpp>
#include <boost/beast/websocket/stream.hpp>

namespace harnessd::client {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using boost::system::error_code;

namespace {

constexpr std::chrono::seconds connect_timeout{10};

class WebSocketClientTransport final : public ClientTransport {
 public:
  WebSocketClientTransport(websocket::stream<beast::tcp_stream> ws, std::string url)
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
  websocket::stream<beast::tcp_stream> ws_;
  std::string url_;
  beast::flat_buffer buffer_;
  std::string current_;
  std::string end_;
  bool ended_ = false;
  bool writing_ = false;
  bool closing_ = false;
};

}  // namespace

asio::awaitable<std::unique_ptr<ClientTransport>> connect_websocket(asio::any_io_executor executor, util::Url url) {
  asio::ip::tcp::resolver resolver(executor);
  std::string service = std::to_string(url.port);
  auto endpoints = co_await resolver.async_resolve(url.host, service, asio::use_awaitable);
  beast::tcp_stream stream(executor);
  stream.expires_after(connect_timeout);
  co_await stream.async_connect(endpoints, asio::use_awaitable);
  stream.socket().set_option(asio::ip::tcp::no_delay(true));

  websocket::stream<beast::tcp_stream> ws(std::move(stream));
  ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
  ws.set_option(websocket::stream_base::decorator([](websocket::request_type& req) {
    req.set(beast::http::field::user_agent, "harnessd-cpp-client");
  }));
  ws.read_message_max(default_client_max_frame_bytes);
  std::string host = url.host_port();
  std::string target = url.target();
  co_await ws.async_handshake(host, target, asio::use_awaitable);
  beast::get_lowest_layer(ws).expires_never();
  ws.text(true);
  // Shown in messages: the query may hold an access token.
  url.query.clear();
  std::string display = "ws://" + host + url.target();
  std::unique_ptr<ClientTransport> transport =
      std::make_unique<WebSocketClientTransport>(std::move(ws), std::move(display));
  co_return transport;
}

}  // namespace harnessd::client
