// NDJSON (one JSON value per line) over a byte stream, for both ends of the
// wire: the daemon's TCP and stdio connections, the client's TCP socket and
// the pipes of a spawned daemon, harness-bench's connections.
#pragma once

#include "harnessd/transport/frame_transport.hpp"
#include "transport/child_process.hpp"
#include "transport/line_framer.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace harnessd::transport {

/// The bytes under NDJSON. Used from one executor (strand) only.
class ByteStream {
 public:
  virtual ~ByteStream() = default;
  /// Returns 0 at end of input: EOF, stop_reading(), or an error, which is
  /// then in `ec`.
  virtual boost::asio::awaitable<std::size_t> read_some(std::span<char> buffer, boost::system::error_code& ec) = 0;
  /// Writes some of `buffers` (one gather write); returns the bytes
  /// written. Throws system_error on failure.
  virtual boost::asio::awaitable<std::size_t> write_some(std::span<const boost::asio::const_buffer> buffers) = 0;
  virtual void stop_reading() = 0;
  /// Ends the writing side only (a pipe's EOF, a socket's FIN); reads go on.
  virtual void close_write() = 0;
  virtual void close() = 0;
  /// Bytes written but still in the kernel's buffers, not taken by the peer.
  virtual std::uint64_t kernel_queued_bytes() const = 0;
  virtual std::string peer() const = 0;
};

/// A connected TCP socket (Nagle off); peer() is "tcp:ADDR:PORT".
std::unique_ptr<ByteStream> make_tcp_stream(boost::asio::ip::tcp::socket socket);

/// Reads `in`, writes `out`: the pipes of a child, or a process's own stdin
/// and stdout. Pipes, ttys, regular files and /dev/null all work: Asio reads
/// descriptors epoll refuses (files) synchronously, which never blocks for
/// such files.
std::unique_ptr<ByteStream> make_pipe_stream(boost::asio::posix::stream_descriptor in,
                                             boost::asio::posix::stream_descriptor out, std::string peer);

/// Reads `child`'s stdout pipe, writes its stdin socket (spawn_child makes
/// stdin a UNIX socket, so writing to a child that stopped reading fails
/// with EPIPE instead of raising SIGPIPE in a host that never ignored it).
/// Takes ownership of both descriptors.
std::unique_ptr<ByteStream> make_child_stream(const boost::asio::any_io_executor& executor, const Child& child,
                                              std::string peer);

/// Whole lines in, batches of lines out, over a ByteStream.
class NdjsonStream {
 public:
  /// Reads continuing a partial line take up to `read_chunk_bytes`; a read
  /// with nothing pending (the one an idle connection sits in) takes
  /// `idle_read_bytes`, so a quiet connection can hold as little as a page.
  NdjsonStream(std::unique_ptr<ByteStream> stream, std::size_t max_frame_bytes,
               std::size_t idle_read_bytes = LineFramer::idle_capacity_bytes,
               std::size_t read_chunk_bytes = 64 * 1024);

  /// The next line (without its terminator), or `oversized`, or `end`. A
  /// last line without '\n' at EOF is still a frame.
  boost::asio::awaitable<ReadResult> read_frame();

  /// The pieces of read_frame(), for a reader that wants to see each read:
  /// fill() reads once (0 at end), next() hands out what it completed.
  boost::asio::awaitable<std::size_t> fill();
  LineFramer::Next next() { return framer_.next(); }

  /// Writes every block in order with gather writes, without copying.
  /// Each block is one or more lines, each ending in '\n'. Throws
  /// system_error when the peer is gone.
  boost::asio::awaitable<void> write_blocks(std::span<const std::string_view> blocks);
  /// Writes every frame in order, each followed by '\n'.
  boost::asio::awaitable<void> write_lines(std::span<const std::string> frames);

  /// Makes a pending or future read end.
  void stop_reading();
  bool read_stopped() const { return read_stopped_; }
  /// Why reading stopped when it was not a clean EOF or a cancel; else empty.
  const std::string& read_error() const { return read_error_; }

  /// Bytes the peer has taken (written minus what still sits in the kernel).
  std::uint64_t bytes_written() const;

  ByteStream& bytes() { return *stream_; }
  const ByteStream& bytes() const { return *stream_; }

 private:
  boost::asio::awaitable<void> write_pieces();

  std::unique_ptr<ByteStream> stream_;
  LineFramer framer_;
  std::size_t idle_read_bytes_;
  std::size_t read_chunk_bytes_;
  std::vector<boost::asio::const_buffer> pieces_;  ///< what one batch writes, in order
  std::uint64_t bytes_written_ = 0;
  std::string read_error_;
  bool read_stopped_ = false;
};

}  // namespace harnessd::transport
