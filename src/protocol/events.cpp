// Each event's `data` object, keys in the documented log order.
#include "harnessd/protocol/events.hpp"

namespace harnessd::protocol {
namespace json = boost::json;

namespace {
json::object from_user() { return json::object{{"kind", "user"}}; }

json::object step_object(std::int64_t turn, int step) { return json::object{{"turn", turn}, {"step", step}}; }
}  // namespace

void tag_invoke(json::value_from_tag, json::value& out, const TurnStart& event) {
  out = json::object{{"turn", event.turn}, {"trigger", json::object{{"kind", "message"}, {"source", from_user()}}}};
}

void tag_invoke(json::value_from_tag, json::value& out, const UserMessage& event) {
  out = json::object{{"content", event.content}, {"source", from_user()}};
}

void tag_invoke(json::value_from_tag, json::value& out, const StepStart& event) {
  out = step_object(event.turn, event.step);
}

void tag_invoke(json::value_from_tag, json::value& out, const StepEnd& event) {
  out = step_object(event.turn, event.step);
}

void tag_invoke(json::value_from_tag, json::value& out, const AssistantMessage& event) {
  json::array content;
  for (const ContentBlock& block : event.content) {
    if (block.type == BlockType::tool_call) {
      content.push_back(json::object{
          {"type", to_string(block.type)}, {"id", block.id}, {"name", block.name}, {"arguments", block.arguments}});
    } else {
      content.push_back(json::object{{"type", to_string(block.type)}, {"text", block.text}});
    }
  }
  json::object data = step_object(event.turn, event.step);
  data["content"] = std::move(content);
  data["provenance"] = json::object{{"provider", event.provider}, {"model", event.model}};
  if (event.usage) data["usage"] = *event.usage;
  out = std::move(data);
}

void tag_invoke(json::value_from_tag, json::value& out, const ToolCallEvent& event) {
  json::object data = step_object(event.turn, event.step);
  data["callId"] = event.call_id;
  data["name"] = event.name;
  data["arguments"] = event.arguments;
  out = std::move(data);
}

void tag_invoke(json::value_from_tag, json::value& out, const ToolResult& event) {
  json::object data = step_object(event.turn, event.step);
  data["callId"] = event.call_id;
  data["content"] = json::array{json::object{{"type", "text"}, {"text", event.text}}};
  data["isError"] = event.is_error;
  if (event.is_error && event.error_code) {
    data["error"] = json::object{{"code", *event.error_code}, {"message", event.text}};
  }
  if (!event.meta.empty()) data["meta"] = event.meta;
  out = std::move(data);
}

void tag_invoke(json::value_from_tag, json::value& out, const TurnEnd& event) {
  out = json::object{{"turn", event.turn}, {"reason", json::value_from(event.reason)}};
}

}  // namespace harnessd::protocol
