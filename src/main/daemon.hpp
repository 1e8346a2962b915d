// The daemon's life, in named phases. start() opens the store, registers
// the providers, loads the tools, binds the listeners and says it is ready;
// then the I/O threads run until the stop sequence ends:
//   signal -> begin_drain (no new clients or prompts; running turns get
//   --drain-timeout-ms) -> begin_stop (cancel what still runs, answer,
//   close) -> on_connections_closed (the store and timers wind down) ->
//   the I/O threads return -> finish (the store's threads stop).
// A second signal, or --shutdown-grace-ms after begin_stop, exits at once.
#pragma once

#include "daemon_config.hpp"
#include "util/periodic_task.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace harnessd {

namespace llm {
class ProviderRegistry;
}
namespace mcp {
class Servers;
}
namespace server {
class Metrics;
class Server;
class TlsContext;
struct ServerContext;
}  // namespace server

/// A configuration the daemon cannot start with (exit code 2, like a bad flag).
struct StartupError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Daemon {
 public:
  /// Sets up logging and the process (signals, descriptor limit).
  explicit Daemon(DaemonConfig config);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  /// Starts, serves until stopped, and returns the exit code. Throws
  /// StartupError for a configuration it cannot start with.
  int run();

 private:
  // start phases, in order
  void open_store();
  void start_sessions();
  void configure_server();
  void bind_listeners();
  void refuse_unauthenticated_exposure() const;
  void watch_signals();
  void start_background_work();
  void announce_ready();
  // stop phases
  void on_signal(const boost::system::error_code& ec, int signo);
  void on_reload(const boost::system::error_code& ec);
  void begin_drain();
  void check_drain(const boost::system::error_code& ec);
  void begin_stop();
  void on_connections_closed();
  void finish();

  std::size_t turns_in_flight() const;
  std::uint64_t turns_ended() const;

  // Declaration order is destruction order, reversed. The store outlives
  // the io_context: coroutine frames it destroys at an abrupt stop may still
  // use the store. The io_context outlives everything that owns sockets or
  // timers on it (the providers' pooled connections, the server).
  DaemonConfig config_;
  std::size_t fd_limit_;
  std::string session_root_;
  std::unique_ptr<store::EventStore> store_;
  boost::asio::io_context io_;
  std::unique_ptr<llm::ProviderRegistry> providers_;
  std::unique_ptr<harness::SessionRegistry> sessions_;
  std::unique_ptr<mcp::Servers> mcp_servers_;
  std::unique_ptr<server::Metrics> metrics_;
  std::unique_ptr<server::ServerContext> context_;
  std::unique_ptr<server::Server> server_;
  std::shared_ptr<server::TlsContext> tls_;
  std::vector<std::string> bound_;  ///< every listener's URL, as bound

  // The stop sequence runs on one strand.
  boost::asio::strand<boost::asio::io_context::executor_type> control_;
  boost::asio::signal_set stop_signals_;
  boost::asio::signal_set reload_signal_;
  boost::asio::steady_timer grace_timer_;
  boost::asio::steady_timer drain_timer_;
  std::optional<util::PeriodicTask> housekeeping_;
  std::optional<util::PeriodicTask> watchdog_;  ///< under systemd's watchdog only
  bool draining_ = false;
  bool stopping_ = false;
  bool connections_closed_ = false;  ///< nothing may arm a timer or signal wait again
  bool forced_exit_ = false;  ///< io_context stopped with work pending: see run()
  std::chrono::steady_clock::time_point drain_deadline_;
  std::uint64_t ended_before_drain_ = 0;
};

}  // namespace harnessd
