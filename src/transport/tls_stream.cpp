// A ByteStream over TLS: NDJSON on tls:// listeners and for clients of
// tls:// and wss:// daemons.
#include "transport/tls_stream.hpp"

#include "detail/kernel_queue.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cstring>

namespace harnessd::transport {
namespace asio = boost::asio;
using boost::system::error_code;

namespace {

class TlsStream final : public ByteStream {
 public:
  TlsStream(asio::ssl::stream<asio::ip::tcp::socket> stream, std::string peer)
      : stream_(std::move(stream)), peer_(std::move(peer)) {
    error_code ec;
    stream_.next_layer().set_option(asio::ip::tcp::no_delay(true), ec);
  }

  asio::awaitable<std::size_t> read_some(std::span<char> buffer, error_code& ec) override {
    std::size_t n = co_await stream_.async_read_some(asio::buffer(buffer.data(), buffer.size()),
                                                     asio::redirect_error(asio::use_awaitable, ec));
    co_return ec ? 0 : n;
  }

  asio::awaitable<std::size_t> write_some(std::span<const asio::const_buffer> buffers) override {
    // A TLS write seals one buffer into records: the pieces of a batch are
    // gathered first, so a batch is one write rather than one per piece.
    gathered_.clear();
    for (const asio::const_buffer& piece : buffers) {
      const std::size_t room = max_gather_bytes - gathered_.size();
      if (room == 0) break;
      const std::size_t take = std::min(room, piece.size());
      gathered_.append(static_cast<const char*>(piece.data()), take);
    }
    std::size_t n = co_await stream_.async_write_some(asio::buffer(gathered_), asio::use_awaitable);
    co_return n;
  }

  void stop_reading() override {
    error_code ec;
    stream_.next_layer().shutdown(asio::ip::tcp::socket::shutdown_receive, ec);
  }

  void close_write() override {
    error_code ec;
    stream_.next_layer().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  }

  void close() override {
    error_code ec;
    stream_.next_layer().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    stream_.next_layer().close(ec);
  }

  std::string peer() const override { return peer_; }

  std::uint64_t kernel_queued_bytes() const override {
    auto& socket = const_cast<asio::ip::tcp::socket&>(stream_.next_layer());
    return socket.is_open() ? detail::kernel_queued_bytes(socket.native_handle()) : 0;
  }

 private:
  static constexpr std::size_t max_gather_bytes = 64 * 1024;

  asio::ssl::stream<asio::ip::tcp::socket> stream_;
  std::string peer_;
  std::string gathered_;
};

}  // namespace

std::unique_ptr<ByteStream> make_tls_stream(asio::ssl::stream<asio::ip::tcp::socket> stream, std::string peer) {
  return std::make_unique<TlsStream>(std::move(stream), std::move(peer));
}

}  // namespace harnessd::transport
