// The listener: one connection of its own LISTENs on the channels other
// nodes NOTIFY this one on (a cancel of a session whose turn runs here, a
// decision for it) and hands what arrives to the store's handlers. The
// connection is also the store's health probe: its loss is reported, and
// it reconnects until the store stops.
#pragma once

#include "store/pg/connection.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

namespace harnessd::store::pg {

/// The payload is the session's id.
inline constexpr std::string_view cancel_channel = "harnessd_cancel";
/// The payload is the decision's message.
inline constexpr std::string_view decision_channel = "harnessd_decision";

class Listener {
 public:
  /// Connects like Connection::open(executor, conninfo, idle_in_transaction)
  /// until `stopping` is set. `report_health` is told how each attempt went.
  Listener(boost::asio::any_io_executor executor, std::string conninfo, std::chrono::milliseconds idle_in_transaction,
           const std::atomic<bool>& stopping, std::function<void(std::string)> report_health);

  /// Starts the listening coroutine (on a strand of its own). It runs on a
  /// raw `this`: the owner keeps the listener alive until it ends.
  void start();
  /// Thread-safe. The handlers run on the listener's strand.
  void on_cancel(std::function<void(const std::string&)> handler);
  void on_decision(std::function<void(const std::string&)> handler);
  /// Thread-safe: ends the wait for notifications, so that the listener
  /// sees `stopping`.
  void begin_stop();

  std::uint64_t cancels_received() const noexcept { return cancels_received_.load(); }

 private:
  boost::asio::awaitable<void> run();

  boost::asio::any_io_executor executor_;
  std::string conninfo_;
  std::chrono::milliseconds idle_in_transaction_;
  const std::atomic<bool>& stopping_;
  std::function<void(std::string)> report_health_;
  std::atomic<std::uint64_t> cancels_received_{0};

  std::mutex mutex_;
  std::function<void(const std::string&)> on_cancel_;
  std::function<void(const std::string&)> on_decision_;
  Connection* listening_ = nullptr;  ///< run()'s connection (under mutex_)
};

}  // namespace harnessd::store::pg
