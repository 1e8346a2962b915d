#include "detail/websocket_transport.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket/error.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace harnessd::transport {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

namespace {
// Messages read ahead of the dispatcher; beyond this the pump waits.
constexpr std::size_t max_inbox_messages = 64;
}  // namespace

WebSocketTransport::WebSocketTransport(detail::CorkedStream stream, WebSocketOptions options, std::string peer)
    : ws_(std::move(stream)),
      options_(options),
      peer_(std::move(peer)),
      inbox_changed_(util::Wakeup::create(ws_.get_executor())),
      inbox_drained_(util::Wakeup::create(ws_.get_executor())) {}

asio::awaitable<bool> WebSocketTransport::accept(const Request& upgrade) {
  ws_.next_layer().lowest().expires_never();
  websocket::stream_base::timeout timeout{};
  timeout.handshake_timeout = options_.handshake_timeout;
  timeout.idle_timeout = options_.idle_timeout;  // pings at half of it, closes when silent
  timeout.keep_alive_pings = true;
  ws_.set_option(timeout);
  ws_.set_option(websocket::stream_base::decorator([](websocket::response_type& res) {
    res.set(beast::http::field::server, "harnessd");
  }));
  if (options_.deflate) {
    websocket::permessage_deflate deflate;
    deflate.server_enable = true;
    deflate.msg_size_threshold = options_.deflate_threshold;
    ws_.set_option(deflate);
  }
  ws_.read_message_max(options_.max_message_bytes);
  ws_.auto_fragment(false);
  // Unfragmented, unmasked server messages are written straight from our
  // buffers; Beast's write buffer only serves deflate. Keeping it small
  // saves memory on every idle connection.
  if (!options_.deflate) ws_.write_buffer_bytes(256);
  boost::system::error_code ec;
  co_await ws_.async_accept(upgrade, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    spdlog::info("{}: websocket handshake failed: {}", peer_, ec.message());
    pump_done_ = true;  // never started
    co_return false;
  }
  ws_.text(true);
  asio::co_spawn(ws_.get_executor(), pump(), asio::detached);
  co_return true;
}

asio::awaitable<void> WebSocketTransport::pump() {
  for (;;) {
    while (inbox_.size() - inbox_head_ >= max_inbox_messages && !stopped_) co_await inbox_drained_->wait();
    boost::system::error_code ec;
    buffer_.clear();
    // The wait for a message reads its first byte alone, then the rest:
    // Beast prepares room for a whole frame (1.5 KiB) in the buffer before
    // anything arrives, and most connections spend their life waiting.
    co_await ws_.async_read_some(buffer_, 1, asio::redirect_error(asio::use_awaitable, ec));
    if (!ec && !ws_.is_message_done()) co_await ws_.async_read(buffer_, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      // message_too_big: Beast has already failed the connection with 1009.
      if (ec != websocket::error::closed && ec != asio::error::operation_aborted) {
        spdlog::info("{}: websocket read ended: {}", peer_, ec.message());
      }
      break;
    }
    if (!ws_.got_text()) {
      spdlog::info("{}: binary frame refused, closing with 1003", peer_);
      closing_ = true;
      co_await ws_.async_close(websocket::close_code::unknown_data,
                               asio::redirect_error(asio::use_awaitable, ec));
      break;
    }
    if (stopped_) continue;  // draining until the close handshake completes
    inbox_.push_back(beast::buffers_to_string(buffer_.data()));
    // An idle connection keeps no read buffer (most connections are idle).
    buffer_.clear();
    buffer_.shrink_to_fit();
    inbox_changed_->notify();
  }
  ended_ = true;
  pump_done_ = true;
  inbox_changed_->notify();
}

asio::awaitable<ReadResult> WebSocketTransport::read_frame() {
  for (;;) {
    if (stopped_) co_return ReadResult{};
    if (inbox_head_ < inbox_.size()) {
      current_ = std::move(inbox_[inbox_head_++]);
      if (inbox_head_ == inbox_.size()) {
        inbox_.clear();
        inbox_head_ = 0;
      }
      inbox_drained_->notify();
      co_return ReadResult{ReadResult::Kind::frame, current_};
    }
    if (ended_) co_return ReadResult{};
    co_await inbox_changed_->wait();
  }
}

namespace {

/// Appends the header of an unmasked, final text frame (RFC 6455 §5.2): a
/// server's messages need no mask, so header + payload is the whole frame.
void append_text_frame_header(std::string& out, std::size_t size) {
  out += static_cast<char>(0x81);  // FIN, opcode 1 (text)
  if (size < 126) {
    out += static_cast<char>(size);
  } else if (size < 65536) {
    out += static_cast<char>(126);
    out += static_cast<char>(size >> 8);
    out += static_cast<char>(size & 0xFF);
  } else {
    out += static_cast<char>(127);
    for (int shift = 56; shift >= 0; shift -= 8) out += static_cast<char>((size >> shift) & 0xFF);
  }
}

}  // namespace

asio::awaitable<void> WebSocketTransport::write_frames(std::span<const std::string_view> blocks) {
  if (!options_.deflate) {
    // Frames are written by hand, payloads from where they are: one gather
    // write for the batch, no copy, no Beast operation per message. Beast's
    // own frames (pongs) meanwhile wait in the corked layer. Headers are
    // collected first and pointed at afterwards, as frame_headers_ may move
    // while it grows: until then a header piece holds its offset.
    frame_headers_.clear();
    pieces_.clear();
    for (const std::string_view block : blocks) {
      std::size_t start = 0;
      while (start < block.size()) {
        const char* newline = static_cast<const char*>(std::memchr(block.data() + start, '\n', block.size() - start));
        const std::size_t end = newline ? static_cast<std::size_t>(newline - block.data()) : block.size();
        const std::size_t header_at = frame_headers_.size();
        append_text_frame_header(frame_headers_, end - start);
        pieces_.emplace_back(reinterpret_cast<const void*>(header_at), frame_headers_.size() - header_at);
        pieces_.emplace_back(block.data() + start, end - start);
        start = end + 1;
      }
    }
    for (std::size_t i = 0; i < pieces_.size(); i += 2) {
      const auto header_at = reinterpret_cast<std::uintptr_t>(pieces_[i].data());
      pieces_[i] = asio::const_buffer(frame_headers_.data() + header_at, pieces_[i].size());
    }
    ws_.next_layer().begin_batch();
    co_await ws_.next_layer().write_raw(pieces_);
    co_await ws_.next_layer().flush();
    if (pieces_.capacity() > 4096) std::vector<asio::const_buffer>().swap(pieces_);
    if (frame_headers_.capacity() > 16384) std::string().swap(frame_headers_);
    co_return;
  }
  // With permessage-deflate, Beast compresses each message; the corked layer
  // below sends them together.
  ws_.next_layer().begin_batch();
  for (const std::string_view block : blocks) {
    std::size_t start = 0;
    while (start < block.size()) {
      const std::size_t newline = block.find('\n', start);
      const std::size_t end = newline == std::string_view::npos ? block.size() : newline;
      co_await ws_.async_write(asio::buffer(block.data() + start, end - start), asio::use_awaitable);
      start = end + 1;
    }
  }
  co_await ws_.next_layer().flush();
}

void WebSocketTransport::stop_reading() {
  stopped_ = true;
  inbox_changed_->notify();
  inbox_drained_->notify();
}

asio::awaitable<void> WebSocketTransport::close() {
  // The close handshake waits for the peer (its close frame, then its FIN
  // during teardown); a peer that never answers is cut off after a moment.
  asio::steady_timer deadline(ws_.get_executor(), options_.close_timeout);
  deadline.async_wait([this](boost::system::error_code ec) {
    if (!ec) force_close();
  });
  boost::system::error_code ec;
  if (!closing_ && ws_.is_open()) {
    closing_ = true;
    stopped_ = true;
    co_await ws_.async_close(websocket::close_code::normal, asio::redirect_error(asio::use_awaitable, ec));
  }
  // pump() still reads until the handshake ends; it uses this object.
  while (!pump_done_) co_await inbox_changed_->wait();
  deadline.cancel();
  ws_.next_layer().lowest().socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  ws_.next_layer().lowest().close();
}

void WebSocketTransport::force_close() { ws_.next_layer().lowest().close(); }

}  // namespace harnessd::transport
