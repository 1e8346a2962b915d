// Each event's `data` object, keys in the documented log order.
#include "harnessd/protocol/events.hpp"

#include <cstdint>
#include <stdexcept>

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

void tag_invoke(json::value_from_tag, json::value& out, const CompactStart& event) {
  out = json::object{{"turn", event.turn}};
}

void tag_invoke(json::value_from_tag, json::value& out, const CompactSummary& event) {
  out = json::object{{"summary", event.summary},
                     {"shadowedSeqs", json::array{event.shadowed_from, event.shadowed_to}},
                     {"tokensBefore", event.tokens_before},
                     {"tokensAfter", event.tokens_after}};
}

void tag_invoke(json::value_from_tag, json::value& out, const CompactEnd& event) {
  json::object data{{"turn", event.turn}};
  if (event.error) data["error"] = *event.error;
  out = std::move(data);
}

void tag_invoke(json::value_from_tag, json::value& out, const ApprovalRequested& event) {
  json::object data = step_object(event.turn, event.step);
  data["callId"] = event.call_id;
  data["approvalId"] = event.approval_id;
  data["toolName"] = event.tool_name;
  data["arguments"] = event.arguments;
  data["reason"] = event.reason;
  out = std::move(data);
}

void tag_invoke(json::value_from_tag, json::value& out, const ApprovalResolved& event) {
  out = json::object{{"approvalId", event.approval_id},
                     {"outcome", to_string(event.outcome)},
                     {"source", to_string(event.source)}};
}

void tag_invoke(json::value_from_tag, json::value& out, const QuestionRequested& event) {
  json::object data = step_object(event.turn, event.step);
  data["callId"] = event.call_id;
  data["questionId"] = event.question_id;
  data["questions"] = event.questions;
  out = std::move(data);
}

void tag_invoke(json::value_from_tag, json::value& out, const QuestionResolved& event) {
  out = json::object{{"questionId", event.question_id}, {"outcome", to_string(event.outcome)}};
}

namespace {

const json::object& data_object(const json::value& data) {
  if (!data.is_object()) throw std::invalid_argument("event data must be an object");
  return data.get_object();
}

const json::value& field(const json::object& data, std::string_view name) {
  const json::value* value = data.if_contains(name);
  if (value == nullptr) throw std::invalid_argument("event data lacks \"" + std::string(name) + "\"");
  return *value;
}

std::string string_field(const json::object& data, std::string_view name) {
  const json::value& value = field(data, name);
  if (!value.is_string()) throw std::invalid_argument("\"" + std::string(name) + "\" must be a string");
  return std::string(value.get_string());
}

std::int64_t int_field(const json::object& data, std::string_view name) {
  const json::value& value = field(data, name);
  if (!value.is_int64()) throw std::invalid_argument("\"" + std::string(name) + "\" must be an integer");
  return value.get_int64();
}

int step_field(const json::object& data) {
  const std::int64_t step = int_field(data, "step");
  if (step < 0 || step > INT32_MAX) throw std::invalid_argument("\"step\" is out of range");
  return static_cast<int>(step);
}

}  // namespace

ApprovalRequested tag_invoke(json::value_to_tag<ApprovalRequested>, const json::value& value) {
  const json::object& data = data_object(value);
  return ApprovalRequested{.turn = int_field(data, "turn"),
                           .step = step_field(data),
                           .call_id = string_field(data, "callId"),
                           .approval_id = string_field(data, "approvalId"),
                           .tool_name = string_field(data, "toolName"),
                           .arguments = string_field(data, "arguments"),
                           .reason = string_field(data, "reason")};
}

ApprovalResolved tag_invoke(json::value_to_tag<ApprovalResolved>, const json::value& value) {
  const json::object& data = data_object(value);
  const std::optional<ApprovalOutcome> outcome = parse_approval_outcome(string_field(data, "outcome"));
  if (!outcome) throw std::invalid_argument("unknown approval outcome");
  const std::string source = string_field(data, "source");
  ApprovalResolved event{.approval_id = string_field(data, "approvalId"), .outcome = *outcome};
  if (source == "client") {
    event.source = DecisionSource::client;
  } else if (source == "timeout") {
    event.source = DecisionSource::timeout;
  } else if (source == "cancel") {
    event.source = DecisionSource::cancel;
  } else {
    throw std::invalid_argument("unknown approval source");
  }
  return event;
}

QuestionRequested tag_invoke(json::value_to_tag<QuestionRequested>, const json::value& value) {
  const json::object& data = data_object(value);
  const json::value& questions = field(data, "questions");
  if (!questions.is_array()) throw std::invalid_argument("\"questions\" must be an array");
  return QuestionRequested{.turn = int_field(data, "turn"),
                           .step = step_field(data),
                           .call_id = string_field(data, "callId"),
                           .question_id = string_field(data, "questionId"),
                           .questions = questions.get_array()};
}

QuestionResolved tag_invoke(json::value_to_tag<QuestionResolved>, const json::value& value) {
  const json::object& data = data_object(value);
  const std::string outcome = string_field(data, "outcome");
  QuestionResolved event{.question_id = string_field(data, "questionId")};
  if (outcome == "answered") {
    event.outcome = QuestionOutcome::answered;
  } else if (outcome == "cancelled") {
    event.outcome = QuestionOutcome::cancelled;
  } else if (outcome == "timeout") {
    event.outcome = QuestionOutcome::timeout;
  } else {
    throw std::invalid_argument("unknown question outcome");
  }
  return event;
}

}  // namespace harnessd::protocol
