// What nodes sharing one store tell each other: a session/cancel,
// session/approve or session/answer that reaches a node where the session
// does not run goes to the node that runs it. Only a store several nodes
// share implements it (EventStore::coordination()). The lease that decides
// which node runs a session is taken per turn by SessionLog::begin_turn.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <functional>
#include <string>

namespace harnessd::store {

class Coordination {
 public:
  virtual ~Coordination() = default;

  /// session/cancel of a session not running here: asks the node that runs
  /// it (if any live node does). True when a node was asked.
  virtual boost::asio::awaitable<bool> forward_cancel(std::string session_id) = 0;
  /// Who acts on cancels forwarded from other nodes (called on a store thread).
  virtual void on_forwarded_cancel(std::function<void(const std::string&)> handler) = 0;

  /// session/approve or session/answer for a turn running on another node:
  /// `message` (at most max_forwarded_bytes) goes to that node. True when a
  /// live node runs the session and was sent it.
  virtual boost::asio::awaitable<bool> forward_decision(std::string session_id, std::string message) = 0;
  /// Who acts on decisions forwarded from other nodes (called on a store thread).
  virtual void on_forwarded_decision(std::function<void(const std::string&)> handler) = 0;

  /// The largest message forward_decision() carries (PostgreSQL's NOTIFY
  /// payload limit, less the envelope).
  static constexpr std::size_t max_forwarded_bytes = 7900;
};

}  // namespace harnessd::store
