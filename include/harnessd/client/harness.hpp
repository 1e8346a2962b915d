// One conversation turn as a value: Harness::run subscribes to the session,
// sends session/prompt and returns the outcome together with every
// notification the turn produced, the way the Python SDK's session.run does.
#pragma once

#include "harnessd/client/client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::client {

struct TurnResult {
  std::string session_id;
  std::string status;          ///< "ok", "error" or "aborted"
  boost::json::object reason;  ///< TurnEndReason, e.g. {"kind":"completed"}
  /// Text blocks of the last assistant/message event of this session.
  std::string final_response;
  /// `event` of every session.event of this session, in order (seq contiguous).
  std::vector<boost::json::object> events;
  /// Every notification of the turn (child sessions and subagent.* included)
  /// received before the response, in arrival order.
  std::vector<Notification> notifications;
  std::string raw_response;  ///< the response frame as received
};

/// Runs turns over a Client it does not own. Same threading rules as Client.
class Harness {
 public:
  explicit Harness(Client& client) : client_(client) {}

  /// Sends `input` as a text prompt to `session_id` and waits for the turn to
  /// settle. `on_notification`, if set, sees each notification of the turn as
  /// it arrives (streaming). Throws RpcError (e.g. -32001 session busy),
  /// ProtocolError or TransportClosed.
  boost::asio::awaitable<TurnResult> run(std::string session_id, std::string input,
                                         NotificationHandler on_notification = {});

  Client& client() const { return client_; }

 private:
  Client& client_;
};

/// Concatenated text blocks of the last assistant/message event in `events`
/// ("" when there is none).
std::string final_response_of(std::span<const boost::json::object> events);

/// The text of a text-delta chunk of `session_id` (not of its children), or
/// nullopt for any other notification.
std::optional<std::string_view> text_delta_of(const Notification& notification, std::string_view session_id);

}  // namespace harnessd::client
