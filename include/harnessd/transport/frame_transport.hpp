// What the server needs from a transport: whole frames in, batches of frames
// out. NDJSON streams (stdio, TCP) and WebSocket implement it.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace harnessd::transport {

enum class TransportKind { stdio, tcp, ws };
std::string_view to_string(TransportKind kind);

struct ReadResult {
  enum class Kind {
    frame,      ///< `frame` is one message, valid until the next read
    oversized,  ///< a message over the frame limit was dropped
    end,        ///< the peer finished, the read side failed or was stopped
  };
  Kind kind = Kind::end;
  std::string_view frame;
};

/// Used from the connection's strand only.
class FrameTransport {
 public:
  virtual ~FrameTransport() = default;

  virtual boost::asio::awaitable<ReadResult> read_frame() = 0;

  /// Writes every frame of `blocks`, in order, in as few syscalls as
  /// possible. A block holds one or more frames, each ending in '\n' (a
  /// frame never contains a raw newline). Throws boost::system::system_error
  /// when the peer is gone.
  virtual boost::asio::awaitable<void> write_frames(std::span<const std::string_view> blocks) = 0;

  /// Makes a pending or future read_frame() return `end`; writes go on.
  virtual void stop_reading() = 0;

  /// Ends the connection (graceful where the protocol has a close handshake).
  virtual boost::asio::awaitable<void> close() = 0;

  /// Closes at once, from any handler on the connection's strand (timeouts).
  virtual void force_close() = 0;

  /// Bytes accepted by the peer so far: the write deadline measures
  /// progress with it, so a slow but steady reader is never cut off.
  virtual std::uint64_t bytes_written() const = 0;

  virtual TransportKind kind() const = 0;
  virtual std::string peer() const = 0;
};

}  // namespace harnessd::transport
