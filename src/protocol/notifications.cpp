#include "harnessd/protocol/notifications.hpp"

#include <boost/json/object.hpp>

namespace harnessd::protocol {
namespace json = boost::json;

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

}  // namespace harnessd::protocol
