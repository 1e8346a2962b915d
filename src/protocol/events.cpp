// Each event's `data` object, keys in the documented log order.
#include "harnessd/protocol/events.hpp"

#include "protocol/json_read.hpp"

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

void tag_invoke(json::value_from_tag, json::value& out, const StepEvent& event) {
  out = step_object(event.turn, event.step);
}

void tag_invoke(json::value_from_tag, json::value& out, const AssistantChunk& event) {
  json::object data = step_object(event.turn, event.step);
  data["chunk"] = json::value_from(event.chunk);
  out = std::move(data);
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

// ---------------------------------------------------------------------------
// Reading data back

namespace {

const json::object& data_object(const json::value& data) { return read::object(data, "event data"); }

template <class Enum>
Enum parsed(std::optional<Enum> value, std::string_view field) {
  if (!value) read::fail(field, "has an unknown value");
  return *value;
}

}  // namespace

TurnStart tag_invoke(json::value_to_tag<TurnStart>, const json::value& value) {
  const json::object& data = data_object(value);
  (void)read::object(data, "trigger");
  return TurnStart{.turn = read::integer(data, "turn")};
}

UserMessage tag_invoke(json::value_to_tag<UserMessage>, const json::value& value) {
  return UserMessage{.content = read::array(data_object(value), "content")};
}

StepEvent tag_invoke(json::value_to_tag<StepEvent>, const json::value& value) {
  const json::object& data = data_object(value);
  return StepEvent::start(read::integer(data, "turn"), read::small_integer(data, "step"));
}

AssistantChunk tag_invoke(json::value_to_tag<AssistantChunk>, const json::value& value) {
  const json::object& data = data_object(value);
  return AssistantChunk{.turn = read::integer(data, "turn"),
                        .step = read::small_integer(data, "step"),
                        .chunk = json::value_to<Chunk>(read::field(data, "chunk"))};
}

AssistantMessage tag_invoke(json::value_to_tag<AssistantMessage>, const json::value& value) {
  const json::object& data = data_object(value);
  AssistantMessage event{.turn = read::integer(data, "turn"), .step = read::small_integer(data, "step")};
  for (const json::value& entry : read::array(data, "content")) {
    const json::object& block = read::object(entry, "content block");
    const std::string type = read::string(block, "type");
    ContentBlock out;
    if (type == "tool-call") {
      out.type = BlockType::tool_call;
      out.id = read::string(block, "id");
      out.name = read::string(block, "name");
      out.arguments = read::string(block, "arguments");
    } else if (type == "text" || type == "reasoning") {
      out.type = type == "text" ? BlockType::text : BlockType::reasoning;
      out.text = read::string(block, "text");
    } else {
      read::fail("type", "is not a known content block type");
    }
    event.content.push_back(std::move(out));
  }
  const json::object& provenance = read::object(data, "provenance");
  event.provider = read::string(provenance, "provider");
  event.model = read::string(provenance, "model");
  if (const json::value* usage = read::optional_field(data, "usage")) event.usage = read::object(*usage, "usage");
  return event;
}

ToolCallEvent tag_invoke(json::value_to_tag<ToolCallEvent>, const json::value& value) {
  const json::object& data = data_object(value);
  return ToolCallEvent{.turn = read::integer(data, "turn"),
                       .step = read::small_integer(data, "step"),
                       .call_id = read::string(data, "callId"),
                       .name = read::string(data, "name"),
                       .arguments = read::string(data, "arguments")};
}

ToolResult tag_invoke(json::value_to_tag<ToolResult>, const json::value& value) {
  const json::object& data = data_object(value);
  ToolResult event{.turn = read::integer(data, "turn"),
                   .step = read::small_integer(data, "step"),
                   .call_id = read::string(data, "callId"),
                   .is_error = read::boolean(data, "isError")};
  // The daemon writes one text block; any number read as their concatenation.
  for (const json::value& entry : read::array(data, "content")) {
    const json::object& block = read::object(entry, "content block");
    if (read::string(block, "type") == "text") event.text += read::string(block, "text");
  }
  if (const json::value* error = read::optional_field(data, "error")) {
    event.error_code = read::string(read::object(*error, "error"), "code");
  }
  if (const json::value* meta = read::optional_field(data, "meta")) event.meta = read::object(*meta, "meta");
  return event;
}

TurnEnd tag_invoke(json::value_to_tag<TurnEnd>, const json::value& value) {
  const json::object& data = data_object(value);
  return TurnEnd{.turn = read::integer(data, "turn"), .reason = json::value_to<TurnEndReason>(read::field(data, "reason"))};
}

CompactStart tag_invoke(json::value_to_tag<CompactStart>, const json::value& value) {
  return CompactStart{.turn = read::integer(data_object(value), "turn")};
}

CompactSummary tag_invoke(json::value_to_tag<CompactSummary>, const json::value& value) {
  const json::object& data = data_object(value);
  const json::array& seqs = read::array(data, "shadowedSeqs");
  if (seqs.size() != 2) read::fail("shadowedSeqs", "must hold two seqs");
  return CompactSummary{.summary = read::string(data, "summary"),
                        .shadowed_from = read::integer(seqs[0], "shadowedSeqs"),
                        .shadowed_to = read::integer(seqs[1], "shadowedSeqs"),
                        .tokens_before = read::integer(data, "tokensBefore"),
                        .tokens_after = read::integer(data, "tokensAfter")};
}

CompactEnd tag_invoke(json::value_to_tag<CompactEnd>, const json::value& value) {
  const json::object& data = data_object(value);
  return CompactEnd{.turn = read::integer(data, "turn"), .error = read::optional_string(data, "error")};
}

ApprovalRequested tag_invoke(json::value_to_tag<ApprovalRequested>, const json::value& value) {
  const json::object& data = data_object(value);
  return ApprovalRequested{.turn = read::integer(data, "turn"),
                           .step = read::small_integer(data, "step"),
                           .call_id = read::string(data, "callId"),
                           .approval_id = read::string(data, "approvalId"),
                           .tool_name = read::string(data, "toolName"),
                           .arguments = read::string(data, "arguments"),
                           .reason = read::string(data, "reason")};
}

ApprovalResolved tag_invoke(json::value_to_tag<ApprovalResolved>, const json::value& value) {
  const json::object& data = data_object(value);
  return ApprovalResolved{
      .approval_id = read::string(data, "approvalId"),
      .outcome = parsed(parse_approval_outcome(read::string(data, "outcome")), "outcome"),
      .source = parsed(parse_decision_source(read::string(data, "source")), "source")};
}

QuestionRequested tag_invoke(json::value_to_tag<QuestionRequested>, const json::value& value) {
  const json::object& data = data_object(value);
  return QuestionRequested{.turn = read::integer(data, "turn"),
                           .step = read::small_integer(data, "step"),
                           .call_id = read::string(data, "callId"),
                           .question_id = read::string(data, "questionId"),
                           .questions = read::array(data, "questions")};
}

std::string_view to_string(TodoStatus status) {
  switch (status) {
    case TodoStatus::pending: return "pending";
    case TodoStatus::in_progress: return "in_progress";
    case TodoStatus::completed: return "completed";
  }
  return "pending";
}

std::optional<TodoStatus> parse_todo_status(std::string_view text) {
  if (text == "pending") return TodoStatus::pending;
  if (text == "in_progress") return TodoStatus::in_progress;
  if (text == "completed") return TodoStatus::completed;
  return std::nullopt;
}

void tag_invoke(json::value_from_tag, json::value& out, const ContextMessage& event) {
  out = json::object{{"source", event.source}, {"path", event.path}, {"content", event.content}};
}

void tag_invoke(json::value_from_tag, json::value& out, const RequestHeader& event) {
  json::array tools;
  for (const std::string& name : event.tools) tools.emplace_back(name);
  out = json::object{{"provider", event.provider},
                     {"model", event.model},
                     {"systemPrompt", event.system_prompt},
                     {"tools", std::move(tools)},
                     {"settings", event.settings}};
}

void tag_invoke(json::value_from_tag, json::value& out, const TodoWrite& event) {
  json::array todos;
  for (const TodoItem& todo : event.todos) {
    todos.push_back(json::object{{"content", todo.content}, {"status", to_string(todo.status)}});
  }
  out = json::object{{"todos", std::move(todos)}};
}

ContextMessage tag_invoke(json::value_to_tag<ContextMessage>, const json::value& value) {
  const json::object& data = data_object(value);
  return ContextMessage{.source = read::string(data, "source"),
                        .path = read::string(data, "path"),
                        .content = read::string(data, "content")};
}

RequestHeader tag_invoke(json::value_to_tag<RequestHeader>, const json::value& value) {
  const json::object& data = data_object(value);
  RequestHeader event{.provider = read::string(data, "provider"),
                      .model = read::string(data, "model"),
                      .system_prompt = read::string(data, "systemPrompt"),
                      .settings = read::object(data, "settings")};
  for (const json::value& name : read::array(data, "tools")) event.tools.push_back(read::string(name, "tools"));
  return event;
}

TodoWrite tag_invoke(json::value_to_tag<TodoWrite>, const json::value& value) {
  const json::object& data = data_object(value);
  TodoWrite event;
  for (const json::value& entry : read::array(data, "todos")) {
    const json::object& todo = read::object(entry, "todo");
    event.todos.push_back(TodoItem{.content = read::string(todo, "content"),
                                   .status = parsed(parse_todo_status(read::string(todo, "status")), "status")});
  }
  return event;
}

QuestionResolved tag_invoke(json::value_to_tag<QuestionResolved>, const json::value& value) {
  const json::object& data = data_object(value);
  return QuestionResolved{.question_id = read::string(data, "questionId"),
                          .outcome = parsed(parse_question_outcome(read::string(data, "outcome")), "outcome")};
}

}  // namespace harnessd::protocol
