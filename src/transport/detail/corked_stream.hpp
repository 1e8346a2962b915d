// The layer under the WebSocket stream that lets many messages leave in one
// syscall: while a batch is open, Beast's writes land in a buffer that one
// real write then sends. Outside a batch (pings, pongs, close) writes go
// straight through. Beast serialises its own writes, so frames never mix.
// Below it is a TCP stream, plain or TLS (wss://), chosen per connection:
// one WebSocket and HTTP implementation serves both.
#pragma once

#include "kernel_queue.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <boost/beast/websocket/teardown.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <variant>

namespace harnessd::transport::detail {

/// Strand-confined like the WebSocket stream above it.
class CorkedStream {
 public:
  using Plain = boost::beast::tcp_stream;
  using Tls = boost::beast::ssl_stream<boost::beast::tcp_stream>;
  using executor_type = Plain::executor_type;

  explicit CorkedStream(Plain stream) : next_(std::move(stream)) {}
  explicit CorkedStream(Tls stream) : next_(std::move(stream)) {}

  executor_type get_executor() noexcept { return lowest().get_executor(); }
  /// The TCP stream at the bottom (timeouts, the socket).
  Plain& lowest() noexcept {
    return std::visit([](auto& s) -> Plain& { return boost::beast::get_lowest_layer(s); }, next_);
  }
  bool secure() const noexcept { return std::holds_alternative<Tls>(next_); }

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const MutableBuffers& bufs) {
          std::visit([&](auto& s) { s.async_read_some(bufs, std::move(handler)); }, next_);
        },
        token, buffers);
  }

  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const ConstBuffers& bufs) {
          if (!batching_) {
            // Straight through; our own writes wait until it is done (two
            // writes at once on one TCP stream would interleave bytes).
            direct_write_ = true;
            const auto executor = boost::asio::get_associated_executor(handler, get_executor());
            auto done = [this, h = std::move(handler)](boost::system::error_code ec, std::size_t n) mutable {
              direct_write_ = false;
              std::move(h)(ec, n);
            };
            std::visit([&](auto& s) { s.async_write_some(bufs, boost::asio::bind_executor(executor, std::move(done))); },
                       next_);
            return;
          }
          std::size_t n = 0;
          for (auto b : boost::beast::buffers_range_ref(bufs)) {
            pending_.append(static_cast<const char*>(b.data()), b.size());
            n += b.size();
          }
          boost::asio::post(get_executor(),
                            boost::beast::bind_front_handler(std::move(handler), boost::system::error_code{}, n));
        },
        token, buffers);
  }

  /// Starts collecting writes.
  void begin_batch() { batching_ = true; }

  /// Sends everything collected (and whatever arrives meanwhile) in as few
  /// writes as possible, then lets writes through again. Throws on error.
  boost::asio::awaitable<void> flush() {
    struct EndBatch {
      CorkedStream& s;
      ~EndBatch() { s.batching_ = false; }
    } end{*this};
    while (!pending_.empty()) {
      flushing_.swap(pending_);
      pending_.clear();
      // Written piece by piece so that every byte the peer accepts counts
      // as progress for the write deadline.
      std::size_t done = 0;
      while (done < flushing_.size()) {
        done += co_await write_some_next(boost::asio::buffer(flushing_.data() + done, flushing_.size() - done));
        bytes_written_ = bytes_before_ + done;
      }
      bytes_before_ += done;
      flushing_.clear();
      ++writes_;
    }
    if (flushing_.capacity() > (1u << 20)) std::string().swap(flushing_);
  }

  /// Writes `pieces` straight to the socket (one gather write per 64
  /// pieces), counting progress. Call inside a batch, so that Beast's own
  /// frames (pongs) wait in the buffer instead of landing mid-message.
  boost::asio::awaitable<void> write_raw(std::span<boost::asio::const_buffer> pieces) {
    constexpr std::size_t max_pieces_per_write = 64;
    std::size_t first = 0;
    while (first < pieces.size()) {
      const std::size_t count = std::min(pieces.size() - first, max_pieces_per_write);
      std::size_t n = co_await write_some_next(pieces.subspan(first, count));
      bytes_before_ += n;
      bytes_written_ = bytes_before_;
      while (first < pieces.size() && n >= pieces[first].size()) n -= pieces[first++].size();
      if (n > 0) pieces[first] += n;
    }
    ++writes_;
  }

  std::size_t writes() const noexcept { return writes_; }
  /// Bytes the peer has taken: written, minus what the kernel still holds.
  std::uint64_t bytes_written() const {
    auto& socket = const_cast<CorkedStream&>(*this).lowest().socket();
    const std::uint64_t queued = socket.is_open() ? kernel_queued_bytes(socket.native_handle()) : 0;
    return bytes_written_ > queued ? bytes_written_ - queued : 0;
  }

 private:
  template <class ConstBuffers>
  boost::asio::awaitable<std::size_t> write_some_next(const ConstBuffers& buffers) {
    // A frame of Beast's that went straight through (a pong, a close) may
    // still be on its way: let it finish first. Rare and short.
    while (direct_write_) co_await boost::asio::post(co_await boost::asio::this_coro::executor, boost::asio::use_awaitable);
    if (Tls* tls = std::get_if<Tls>(&next_)) {
      // TLS seals one buffer per write: gather the pieces first.
      gathered_.clear();
      for (auto b : boost::beast::buffers_range_ref(buffers)) {
        gathered_.append(static_cast<const char*>(b.data()), b.size());
      }
      std::size_t n = co_await tls->async_write_some(boost::asio::buffer(gathered_), boost::asio::use_awaitable);
      co_return n;
    }
    std::size_t n = co_await std::get<Plain>(next_).async_write_some(buffers, boost::asio::use_awaitable);
    co_return n;
  }

  std::variant<Plain, Tls> next_;
  std::string gathered_;
  std::string pending_;
  std::string flushing_;
  bool batching_ = false;
  bool direct_write_ = false;  ///< a write of Beast's is in flight outside a batch
  std::size_t writes_ = 0;
  std::uint64_t bytes_before_ = 0;  ///< of batches written completely
  std::uint64_t bytes_written_ = 0;
};

// Found by argument-dependent lookup when Beast closes the connection.
inline void beast_close_socket(CorkedStream& stream) { stream.lowest().close(); }

// Found by argument-dependent lookup when the WebSocket closes.
inline void teardown(boost::beast::role_type role, CorkedStream& stream, boost::system::error_code& ec) {
  using boost::beast::websocket::teardown;
  teardown(role, stream.lowest().socket(), ec);
}

// A TLS connection ends at the TCP level too: the WebSocket close frame has
// already said goodbye, and a TLS close_notify would only add a round trip.
template <class TeardownHandler>
void async_teardown(boost::beast::role_type role, CorkedStream& stream, TeardownHandler&& handler) {
  using boost::beast::websocket::async_teardown;
  async_teardown(role, stream.lowest().socket(), std::forward<TeardownHandler>(handler));
}

}  // namespace harnessd::transport::detail
