// One client connection: a reader that decodes frames and starts one
// coroutine per request, and a writer that drains the Outbox. Requests go
// through the method table (methods.hpp); the connection applies its gates
// (auth, initialize, shutdown) and answers. Everything of the connection
// runs on its strand; turns run on their sessions' strands and reach the
// client only through the Outbox.
#pragma once

#include "harnessd/rpc/codec.hpp"
#include "server/outbox.hpp"
#include "server/server_context.hpp"
#include "harnessd/transport/frame_transport.hpp"
#include "util/wakeup.hpp"
#include "server/client_state.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/json/value.hpp>

#include <memory>
#include <string>

namespace harnessd::server {

struct MethodSpec;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using Strand = boost::asio::strand<boost::asio::any_io_executor>;

  /// `principal`: who the transport already proved the client to be
  /// (WebSocket upgrade, stdio), or nullptr: initialize decides.
  /// `slot`: the connection's place under the connection limits.
  Connection(Strand strand, std::unique_ptr<transport::FrameTransport> transport, ServerContext& context,
             const auth::Principal* principal, std::shared_ptr<void> slot = {});

  /// Serves the connection until it ends. Run it on strand().
  boost::asio::awaitable<void> run();

  /// Thread-safe: cancels this connection's turns, stops reading, answers
  /// what is in flight, then closes.
  void stop();

  const Strand& strand() const noexcept { return strand_; }

 private:
  boost::asio::awaitable<void> writer();
  boost::asio::awaitable<void> handle(rpc::Request request);
  /// Applies the gates of `spec` (nullptr: unknown method), then runs it.
  boost::asio::awaitable<std::string> call(const MethodSpec* spec, const rpc::Request& request);
  /// Sets the client's principal from an initialize's authToken (anyone is
  /// the anonymous administrator when no credentials are configured);
  /// throws -32004 for anything else.
  void authenticate(const MethodSpec* spec, const rpc::Request& request);
  boost::asio::awaitable<void> push(std::string frame);
  /// Closes the connection when the peer accepted no bytes for a whole write
  /// timeout while a write waited.
  void arm_write_deadline();
  /// Closes the connection if it is still not initialized (handshake
  /// timeout), or sends nothing and runs nothing (idle timeout), by then.
  void arm_quiet_deadline(std::chrono::milliseconds timeout);
  void request_finished();

  Strand strand_;
  std::unique_ptr<transport::FrameTransport> transport_;
  ServerContext& context_;
  std::shared_ptr<Outbox> outbox_;
  std::shared_ptr<util::Wakeup> progress_;  ///< a request finished or the writer ended
  boost::asio::steady_timer write_deadline_;
  boost::asio::steady_timer linger_;  ///< subscribed events wait on it to share a write
  boost::asio::steady_timer quiet_deadline_;
  std::string peer_;

  // Strand-only state.
  ClientState client_;
  std::shared_ptr<void> slot_;
  bool auth_refused_ = false;
  /// Before initialize succeeds, a frame that is not a JSON-RPC request ends
  /// a network connection (a browser's cross-site POST, a port scan).
  bool refused_ = false;
  bool shutting_down_ = false;  ///< a shutdown request arrived: later requests get -32003
  bool writer_done_ = false;
  bool writing_ = false;  ///< a batch write is in progress (the deadline runs)
  bool watchdog_armed_ = false;
  std::uint64_t watchdog_bytes_ = 0;  ///< bytes_written() when the watchdog last looked
  std::size_t inflight_ = 0;
  std::size_t shutdowns_inflight_ = 0;
};

}  // namespace harnessd::server
