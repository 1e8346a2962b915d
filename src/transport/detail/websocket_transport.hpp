// WebSocket transport: one JSON-RPC message per text frame. Internal: only
// this and the HTTP endpoint include Beast.
#pragma once

#include "corked_stream.hpp"
#include "harnessd/transport/frame_transport.hpp"
#include "util/wakeup.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/websocket/stream.hpp>

#include <chrono>
#include <vector>
#include <memory>
#include <string>

namespace harnessd::transport {

struct WebSocketOptions {
  std::size_t max_message_bytes = 8 * 1024 * 1024;
  std::chrono::milliseconds idle_timeout{60'000};
  bool deflate = false;
  std::size_t deflate_threshold = 1024;
  std::chrono::milliseconds handshake_timeout{10'000};
  std::chrono::milliseconds close_timeout{500};
};

class WebSocketTransport final : public FrameTransport {
 public:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;

  /// `stream` is plain or TLS (after its handshake) and has carried the
  /// upgrade request.
  WebSocketTransport(detail::CorkedStream stream, WebSocketOptions options, std::string peer);

  /// Completes the upgrade. Returns false (and logs) when the handshake fails.
  boost::asio::awaitable<bool> accept(const Request& upgrade);

  boost::asio::awaitable<ReadResult> read_frame() override;
  boost::asio::awaitable<void> write_frames(std::span<const std::string_view> blocks) override;
  void stop_reading() override;
  boost::asio::awaitable<void> close() override;
  void force_close() override;
  TransportKind kind() const override { return TransportKind::ws; }  // wss too
  std::string peer() const override { return peer_; }
  std::uint64_t bytes_written() const override { return ws_.next_layer().bytes_written(); }

 private:
  /// Reads messages ahead of read_frame(), so stop_reading() can end reading
  /// at once while the socket stays open for the close handshake.
  boost::asio::awaitable<void> pump();

  boost::beast::websocket::stream<detail::CorkedStream> ws_;
  WebSocketOptions options_;
  std::string peer_;
  boost::beast::flat_buffer buffer_;
  std::vector<std::string> inbox_;  // FIFO from inbox_head_; no allocation while idle
  std::size_t inbox_head_ = 0;
  std::string current_;
  std::shared_ptr<util::Wakeup> inbox_changed_;
  std::shared_ptr<util::Wakeup> inbox_drained_;
  std::string frame_headers_;                      ///< headers of one batch's frames
  std::vector<boost::asio::const_buffer> pieces_;  ///< headers and payloads, in order
  bool ended_ = false;      // the peer is done or the socket failed
  bool stopped_ = false;    // stop_reading() was called
  bool closing_ = false;    // we sent (or are sending) a close frame
  bool pump_done_ = false;  // pump() has returned; safe to destroy
};

}  // namespace harnessd::transport
