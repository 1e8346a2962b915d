// Where a turn's observable output goes. The harness knows nothing of
// JSON-RPC or sockets; the server implements this per prompting connection.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <span>
#include <string>
#include <string_view>

namespace harnessd::harness {

/// Called from session strands (a parent's and its children's), one call at a
/// time per turn tree. Returning means the output is queued in order; that
/// await is the turn's backpressure. Never throws for a vanished client.
class EventSink {
 public:
  virtual ~EventSink() = default;

  /// `events` are serialized events of one session, in order, already
  /// handed to the session log. Returns false once the client is gone: the
  /// turn then has nobody to stream to.
  virtual boost::asio::awaitable<bool> on_events(std::string_view session_id,
                                                 std::span<const std::string> events) = 0;
  virtual boost::asio::awaitable<void> on_subagent_started(std::string_view parent_session_id,
                                                           std::string_view child_session_id) = 0;
  /// `info` holds the subagent.finished fields of protocol §5.
  virtual boost::asio::awaitable<void> on_subagent_finished(boost::json::object info) = 0;
};

}  // namespace harnessd::harness
