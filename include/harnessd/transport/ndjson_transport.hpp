// NDJSON framing (one JSON value per line) over a byte stream: TCP sockets
// and the stdio pipe pair.
#pragma once

#include "harnessd/transport/line_framer.hpp"
#include "harnessd/transport/frame_transport.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <boost/asio/buffer.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace harnessd::transport {

/// The bytes under an NdjsonTransport. Strand-confined like the transport.
class ByteStream {
 public:
  virtual ~ByteStream() = default;
  /// Returns 0 at end of input (EOF, error or cancelled).
  virtual boost::asio::awaitable<std::size_t> read_some(std::span<char> buffer) = 0;
  /// Writes some of `buffers` (one gather write); returns the bytes
  /// written. Throws system_error on failure.
  virtual boost::asio::awaitable<std::size_t> write_some(std::span<const boost::asio::const_buffer> buffers) = 0;
  virtual void stop_reading() = 0;
  virtual void close() = 0;
  /// Bytes written but still in the kernel's buffers, not taken by the peer.
  virtual std::uint64_t kernel_queued_bytes() const = 0;
  virtual std::string peer() const = 0;
};

/// A connected TCP socket.
std::unique_ptr<ByteStream> make_tcp_stream(boost::asio::ip::tcp::socket socket);

/// The daemon's stdin and stdout. Pipes, ttys, regular files and /dev/null
/// all work: Asio reads descriptors epoll refuses (files) synchronously,
/// which never blocks for such files.
std::unique_ptr<ByteStream> make_stdio_stream(const boost::asio::any_io_executor& executor);

class NdjsonTransport final : public FrameTransport {
 public:
  NdjsonTransport(std::unique_ptr<ByteStream> stream, TransportKind kind, std::size_t max_frame_bytes);

  boost::asio::awaitable<ReadResult> read_frame() override;
  boost::asio::awaitable<void> write_frames(std::span<const std::string> frames) override;
  void stop_reading() override;
  boost::asio::awaitable<void> close() override;
  void force_close() override;
  TransportKind kind() const override { return kind_; }
  std::string peer() const override { return stream_->peer(); }
  std::uint64_t bytes_written() const override;

 private:
  std::unique_ptr<ByteStream> stream_;
  TransportKind kind_;
  LineFramer framer_;
  std::vector<boost::asio::const_buffer> pieces_;  ///< what one batch writes, in order
  std::uint64_t bytes_written_ = 0;
  bool read_stopped_ = false;
};

}  // namespace harnessd::transport
