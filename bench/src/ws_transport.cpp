// The WebSocket client transport for harness-bench, and the only bench file
// that includes Beast: one JSON-RPC message per text frame, messages read
// into one reused flat_buffer, sends queued and written one message at a time.
#include "client_transport.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket/error.hpp>
#include <boost/beast/websocket/stream.hpp>

#include <deque>

namespace bench {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using asio::ip::tcp;

namespace {

class WsTransport final : public ClientTransport {
 public:
  WsTransport(asio::any_io_executor ex, const Target& target) : ex_(ex), target_(target), ws_(ex) {}

  asio::awaitable<void> open() override {
    tcp::resolver resolver(ex_);
    const std::string port = std::to_string(target_.url.port);
    auto endpoints = co_await resolver.async_resolve(target_.url.host, port, asio::use_awaitable);
    co_await asio::async_connect(ws_.next_layer(), endpoints, asio::use_awaitable);
    ws_.next_layer().set_option(tcp::no_delay(true));
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::request_type& req) { req.set(beast::http::field::user_agent, "harness-bench"); }));
    ws_.auto_fragment(false);
    ws_.read_message_max(0);  // the bench accepts what the server sends
    std::string host = target_.url.host_port();
    std::string path = "/";
    co_await ws_.async_handshake(host, path, asio::use_awaitable);
    ws_.text(true);
  }

  void start_reading(FrameHandler& handler) override {
    handler_ = &handler;
    asio::co_spawn(ex_, read_loop(), asio::detached);
  }

  void send(std::string_view frame) override { queue_.emplace_back(frame); }

  void flush() override {
    if (writing_ || queue_.empty() || closing_ || failed_) return;
    writing_ = true;
    ws_.async_write(asio::buffer(queue_.front()),
                    [this](boost::system::error_code ec, std::size_t) { on_written(ec); });
  }

  void close() override {
    closing_ = true;
    boost::system::error_code ec;
    ws_.next_layer().shutdown(tcp::socket::shutdown_both, ec);
    ws_.next_layer().close(ec);
  }

 private:
  void on_written(boost::system::error_code ec) {
    writing_ = false;
    queue_.pop_front();
    if (ec) {
      if (!closing_ && !failed_) {
        failed_ = true;
        failure_ = "write failed: " + ec.message();
        boost::system::error_code ignored;
        ws_.next_layer().close(ignored);
      }
      return;
    }
    flush();
  }

  asio::awaitable<void> read_loop() {
    std::string why;
    for (;;) {
      buffer_.clear();
      boost::system::error_code ec;
      std::size_t n = co_await ws_.async_read(buffer_, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        why = ec == websocket::error::closed ? "server closed the websocket (code " +
                                                   std::to_string(ws_.reason().code) + ")"
                                             : "read failed: " + ec.message();
        break;
      }
      const Clock::time_point now = Clock::now();
      handler_->on_read(n, now);
      if (!ws_.got_text()) {
        why = "binary message from the server";
        break;
      }
      auto data = buffer_.cdata();
      handler_->on_frame(std::string_view(static_cast<const char*>(data.data()), data.size()), now);
      handler_->on_read_done();
    }
    if (failed_) why = failure_;
    if (!closing_) handler_->on_closed(why);
  }

  asio::any_io_executor ex_;
  Target target_;
  websocket::stream<tcp::socket> ws_;
  FrameHandler* handler_ = nullptr;
  beast::flat_buffer buffer_;
  std::deque<std::string> queue_;
  bool writing_ = false;
  bool closing_ = false;
  bool failed_ = false;
  std::string failure_;
};

}  // namespace

std::unique_ptr<ClientTransport> make_ws_transport(asio::any_io_executor ex, const Target& target) {
  return std::make_unique<WsTransport>(std::move(ex), target);
}

}  // namespace bench
