// The bench's view of one connection: connect, a reader handing whole frames
// to a handler, batched sends. NDJSON (TCP, spawned stdio) and WebSocket
// implement it, so the load driver does not care which one it drives.
#pragma once

#include "harnessd/util/url.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;

/// Receives what a transport reads. All calls happen on the transport's
/// executor (one thread), never concurrently.
class FrameHandler {
 public:
  virtual ~FrameHandler() = default;
  /// One read completed: `bytes` arrived at `now`; frames follow.
  virtual void on_read(std::size_t bytes, Clock::time_point now) = 0;
  /// One complete frame (no trailing newline), valid during the call.
  virtual void on_frame(std::string_view frame, Clock::time_point now) = 0;
  /// Frames of this read are done: a good moment to flush queued sends.
  virtual void on_read_done() = 0;
  /// The reader stopped without close() having been called (EOF, error).
  virtual void on_closed(const std::string& why) = 0;
};

class ClientTransport {
 public:
  virtual ~ClientTransport() = default;

  /// Connects (and handshakes); throws std::exception on failure.
  virtual boost::asio::awaitable<void> open() = 0;
  /// Starts the read loop; it runs until EOF, an error or close().
  virtual void start_reading(FrameHandler& handler) = 0;
  /// Queues one frame; nothing is written before flush().
  virtual void send(std::string_view frame) = 0;
  /// Starts writing what send() queued (one write per batch where the
  /// transport allows). Write errors surface through the reader.
  virtual void flush() = 0;
  /// Ends the connection: stdio closes the server's stdin (it then exits),
  /// sockets close. The reader ends without on_closed().
  virtual void close() = 0;
  /// The server process behind a spawned stdio transport, else -1.
  virtual pid_t child_pid() const { return -1; }
  /// After close(): waits up to `timeout` for a spawned server to exit (kills
  /// it after that) and returns its waitpid status; -1 without a child.
  virtual int reap(std::chrono::milliseconds /*timeout*/) { return -1; }
};

struct Target {
  enum class Kind { tcp, ws, stdio };
  Kind kind = Kind::tcp;
  harnessd::util::Url url;  ///< tcp, ws: the server
  std::string program;  ///< stdio: the server binary
  std::vector<std::string> extra_args;  ///< stdio: after --stdio --store memory
  bool child_stderr = false;            ///< stdio: let the server log to our stderr
};

/// Read buffer size for NDJSON transports (WebSocket grows its own buffer).
std::unique_ptr<ClientTransport> make_tcp_transport(boost::asio::any_io_executor ex, const Target& target,
                                                    std::size_t read_buffer);
std::unique_ptr<ClientTransport> make_stdio_transport(boost::asio::any_io_executor ex, const Target& target,
                                                      std::size_t read_buffer);
std::unique_ptr<ClientTransport> make_ws_transport(boost::asio::any_io_executor ex, const Target& target);


}  // namespace bench
