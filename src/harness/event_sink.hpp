// Where a turn's observable output goes. The harness knows nothing of
// JSON-RPC or sockets; the server implements this per prompting connection.
#pragma once

#include <boost/asio/awaitable.hpp>
#include "harnessd/protocol/notifications.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace harnessd::harness {

/// Called from session strands (a parent's and its children's), one call at a
/// time per turn tree. Returning means the output is queued in order; that
/// await is the turn's backpressure. Never throws for a vanished client.
class EventSink {
 public:
  virtual ~EventSink() = default;

  /// What the sink wants around each serialized event of `session_id`, so
  /// that a turn writes every event once, straight into its final form: the
  /// log takes the event, the sink takes the wrapped line.
  struct Envelope {
    std::string before;
    std::string after;
  };
  virtual Envelope envelope(std::string_view session_id) = 0;

  /// `block` holds `count` events of one session, in order, each as
  /// `before + EVENT + after + '\n'`, already handed to the session log.
  /// The block is shared with the session's subscribers and never changes.
  /// Returns false once the client is gone: the turn then has nobody to
  /// stream to.
  virtual boost::asio::awaitable<bool> on_events(std::shared_ptr<const std::string> block, std::size_t count) = 0;
  virtual boost::asio::awaitable<void> on_subagent_started(protocol::SubagentStarted note) = 0;
  virtual boost::asio::awaitable<void> on_subagent_finished(protocol::SubagentFinished note) = 0;
};

}  // namespace harnessd::harness
