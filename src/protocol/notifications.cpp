#include "harnessd/protocol/notifications.hpp"

#include "protocol/json_read.hpp"

#include <boost/json/object.hpp>

namespace harnessd::protocol {
namespace json = boost::json;

void tag_invoke(json::value_from_tag, json::value& out, const SessionEventNote& note) {
  out = json::object{{"sessionId", note.session_id}, {"event", note.event}};
}

void tag_invoke(json::value_from_tag, json::value& out, const SubagentStarted& note) {
  out = json::object{{"parentSessionId", note.parent_session_id}, {"childSessionId", note.child_session_id}};
}

void tag_invoke(json::value_from_tag, json::value& out, const SubagentFinished& note) {
  json::object object{{"provider", note.provider},
                      {"agentId", note.child_session_id},
                      {"parentSessionId", note.parent_session_id},
                      {"childSessionId", note.child_session_id},
                      {"status", note.ok ? "ok" : "error"},
                      {"stopReason", to_string(note.stop_reason)}};
  if (note.last_assistant_message) object["lastAssistantMessage"] = *note.last_assistant_message;
  out = std::move(object);
}

SessionEventNote tag_invoke(json::value_to_tag<SessionEventNote>, const json::value& value) {
  const json::object& params = read::object(value, "params");
  const json::object& event = read::object(params, "event");
  (void)read::string(event, "type");
  (void)read::integer(event, "seq");
  return SessionEventNote{.session_id = read::string(params, "sessionId"), .event = event};
}

SubagentStarted tag_invoke(json::value_to_tag<SubagentStarted>, const json::value& value) {
  const json::object& params = read::object(value, "params");
  return SubagentStarted{.parent_session_id = read::string(params, "parentSessionId"),
                         .child_session_id = read::string(params, "childSessionId")};
}

SubagentFinished tag_invoke(json::value_to_tag<SubagentFinished>, const json::value& value) {
  const json::object& params = read::object(value, "params");
  const std::string status = read::string(params, "status");
  if (status != "ok" && status != "error") read::fail("status", "must be \"ok\" or \"error\"");
  const std::optional<TurnEndReason::Kind> stop_reason = parse_turn_end_kind(read::string(params, "stopReason"));
  if (!stop_reason) read::fail("stopReason", "is not a known TurnEndReason kind");
  return SubagentFinished{.provider = read::string(params, "provider"),
                          .child_session_id = read::string(params, "childSessionId"),
                          .parent_session_id = read::string(params, "parentSessionId"),
                          .ok = status == "ok",
                          .stop_reason = *stop_reason,
                          .last_assistant_message = read::optional_string(params, "lastAssistantMessage")};
}

}  // namespace harnessd::protocol
