// The daemon's notifications besides session.event (docs/protocol.md §5),
// as types with their wire form.
#pragma once

#include "harnessd/protocol/turn_end.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace harnessd::protocol {

inline constexpr std::string_view session_event_method = "session.event";
inline constexpr std::string_view subagent_started_method = "subagent.started";
inline constexpr std::string_view subagent_finished_method = "subagent.finished";

/// session.event's params. The event ({type, seq, time, data}) stays JSON:
/// its data is read with the event's own type (events.hpp) when needed.
struct SessionEventNote {
  std::string session_id;
  boost::json::object event;
};

struct SubagentStarted {
  std::string parent_session_id;
  std::string child_session_id;
};

struct SubagentFinished {
  std::string provider;
  std::string child_session_id;  ///< also sent as agentId
  std::string parent_session_id;
  bool ok = false;  ///< "ok" or "error": an aborted child is an error to its parent
  TurnEndReason::Kind stop_reason = TurnEndReason::Kind::completed;
  std::optional<std::string> last_assistant_message;
};

void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const SessionEventNote& note);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const SubagentStarted& note);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const SubagentFinished& note);

// Read back by clients; throw std::invalid_argument for params of another shape.
SessionEventNote tag_invoke(boost::json::value_to_tag<SessionEventNote>, const boost::json::value& params);
SubagentStarted tag_invoke(boost::json::value_to_tag<SubagentStarted>, const boost::json::value& params);
SubagentFinished tag_invoke(boost::json::value_to_tag<SubagentFinished>, const boost::json::value& params);

}  // namespace harnessd::protocol
