// The session events of a turn (docs/protocol.md §6) as types, besides
// assistant/chunk (chunk.hpp). The turn builds these; each becomes the
// `data` of its event once, through value_from, at the log's edge.
#pragma once

#include "harnessd/protocol/chunk.hpp"
#include "harnessd/protocol/decisions.hpp"
#include "harnessd/protocol/turn_end.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::protocol {

/// turn/start. A turn is triggered by a user message (the only trigger today).
struct TurnStart {
  static constexpr std::string_view type = "turn/start";
  std::int64_t turn = 0;
};

/// user/message, from the user.
struct UserMessage {
  static constexpr std::string_view type = "user/message";
  boost::json::array content;  ///< the prompt's validated content blocks
};

/// step/start and step/end: the same data, told apart by `type`. Reading
/// data back cannot tell them apart: value_to leaves `type` at step/start,
/// and a reader that needs the edge takes it from the event's `type`.
struct StepEvent {
  static constexpr std::string_view start_type = "step/start";
  static constexpr std::string_view end_type = "step/end";
  std::string_view type = start_type;  ///< start_type or end_type
  std::int64_t turn = 0;
  int step = 0;

  static StepEvent start(std::int64_t turn, int step) { return {start_type, turn, step}; }
  static StepEvent end(std::int64_t turn, int step) { return {end_type, turn, step}; }
};

/// One block of an assistant message: text or reasoning (`text`), or a tool
/// call (`id`, `name`, `arguments`).
struct ContentBlock {
  BlockType type = BlockType::text;
  std::string text;
  std::string id;
  std::string name;
  std::string arguments;
};

/// assistant/chunk: one streamed chunk of a step. The turn writes these on
/// its hot path without this type (append_json); clients and tests read them.
struct AssistantChunk {
  static constexpr std::string_view type = "assistant/chunk";
  std::int64_t turn = 0;
  int step = 0;
  Chunk chunk;
};

struct AssistantMessage {
  static constexpr std::string_view type = "assistant/message";
  std::int64_t turn = 0;
  int step = 0;
  std::vector<ContentBlock> content;
  std::string provider;
  std::string model;
  std::optional<boost::json::object> usage;
};

struct ToolCallEvent {
  static constexpr std::string_view type = "tool/call";
  std::int64_t turn = 0;
  int step = 0;
  std::string call_id;
  std::string name;
  std::string arguments;  ///< JSON text, as the model produced it
};

struct ToolResult {
  static constexpr std::string_view type = "tool/result";
  std::int64_t turn = 0;
  int step = 0;
  std::string call_id;
  std::string text;
  bool is_error = false;
  /// With is_error: what kind of failure (PATH_OUTSIDE_WORKSPACE, ...).
  std::optional<std::string> error_code;
  /// Structured extras for clients (meta.diff, meta.exitCode, ...).
  boost::json::object meta;
};

struct TurnEnd {
  static constexpr std::string_view type = "turn/end";
  std::int64_t turn = 0;
  TurnEndReason reason;
};

/// The conversation is summarized to fit the model's context window.
struct CompactStart {
  static constexpr std::string_view type = "compact/start";
  std::int64_t turn = 0;
};

/// What later requests send instead of the events shadowed_from..shadowed_to.
struct CompactSummary {
  static constexpr std::string_view type = "compact/summary";
  std::string summary;
  std::int64_t shadowed_from = 0;  ///< seqs of the first and last event the summary replaces
  std::int64_t shadowed_to = 0;
  std::int64_t tokens_before = 0;
  std::int64_t tokens_after = 0;
};

struct CompactEnd {
  static constexpr std::string_view type = "compact/end";
  std::int64_t turn = 0;
  std::optional<std::string> error;  ///< why no summary was made
};

/// A tool call waits for a client's decision (approval policy `ask`).
struct ApprovalRequested {
  static constexpr std::string_view type = "approval/requested";
  std::int64_t turn = 0;
  int step = 0;
  std::string call_id;
  std::string approval_id;  ///< what session/approve names
  std::string tool_name;
  std::string arguments;  ///< JSON text, as in tool/call
  std::string reason;     ///< why the call needs a decision, for the person deciding
};

struct ApprovalResolved {
  static constexpr std::string_view type = "approval/resolved";
  std::string approval_id;
  ApprovalOutcome outcome = ApprovalOutcome::rejected;
  DecisionSource source = DecisionSource::client;
};

/// ask_user_question waits for session/answer.
struct QuestionRequested {
  static constexpr std::string_view type = "question/requested";
  std::int64_t turn = 0;
  int step = 0;
  std::string call_id;
  std::string question_id;
  /// As the model asked them: [{id, question, header?, options?: [{label, description?}], multi_select?}].
  boost::json::array questions;
};

struct QuestionResolved {
  static constexpr std::string_view type = "question/resolved";
  std::string question_id;
  QuestionOutcome outcome = QuestionOutcome::answered;
};

/// One workspace instruction file (AGENTS.md) as the model was sent it;
/// logged when first sent in the session and after it changed.
struct ContextMessage {
  static constexpr std::string_view type = "context/message";
  std::string source = "AGENTS.md";
  std::string path;
  std::string content;
};

/// What frames the following requests, logged when it changes: the system
/// prompt, the offered tools' names and the request settings.
struct RequestHeader {
  static constexpr std::string_view type = "request/header";
  std::string provider;
  std::string model;
  std::string system_prompt;
  std::vector<std::string> tools;
  /// contextWindow, and whichever of thinking, reasoningEffort, temperature,
  /// stop, maxTokens and maxSteps are set.
  boost::json::object settings;
};

enum class TodoStatus { pending, in_progress, completed };
std::string_view to_string(TodoStatus status);
std::optional<TodoStatus> parse_todo_status(std::string_view text);

struct TodoItem {
  std::string content;
  TodoStatus status = TodoStatus::pending;
};

/// The session's checklist as todo_write replaced it.
struct TodoWrite {
  static constexpr std::string_view type = "todo/write";
  std::vector<TodoItem> todos;
};

// Each event's `data` object, both ways: value_from writes it as the log
// and the notifications carry it; value_to reads it back (clients, the
// session's replay of its log) and throws std::invalid_argument for data of
// another shape.
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const TurnStart& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const UserMessage& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const StepEvent& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const AssistantChunk& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const AssistantMessage& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const ToolCallEvent& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const ToolResult& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const TurnEnd& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const CompactStart& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const CompactSummary& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const CompactEnd& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const ApprovalRequested& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const ApprovalResolved& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const QuestionRequested& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const QuestionResolved& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const ContextMessage& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const RequestHeader& event);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const TodoWrite& event);

TurnStart tag_invoke(boost::json::value_to_tag<TurnStart>, const boost::json::value& data);
UserMessage tag_invoke(boost::json::value_to_tag<UserMessage>, const boost::json::value& data);
StepEvent tag_invoke(boost::json::value_to_tag<StepEvent>, const boost::json::value& data);
AssistantChunk tag_invoke(boost::json::value_to_tag<AssistantChunk>, const boost::json::value& data);
AssistantMessage tag_invoke(boost::json::value_to_tag<AssistantMessage>, const boost::json::value& data);
ToolCallEvent tag_invoke(boost::json::value_to_tag<ToolCallEvent>, const boost::json::value& data);
ToolResult tag_invoke(boost::json::value_to_tag<ToolResult>, const boost::json::value& data);
TurnEnd tag_invoke(boost::json::value_to_tag<TurnEnd>, const boost::json::value& data);
CompactStart tag_invoke(boost::json::value_to_tag<CompactStart>, const boost::json::value& data);
CompactSummary tag_invoke(boost::json::value_to_tag<CompactSummary>, const boost::json::value& data);
CompactEnd tag_invoke(boost::json::value_to_tag<CompactEnd>, const boost::json::value& data);
ApprovalRequested tag_invoke(boost::json::value_to_tag<ApprovalRequested>, const boost::json::value& data);
ApprovalResolved tag_invoke(boost::json::value_to_tag<ApprovalResolved>, const boost::json::value& data);
QuestionRequested tag_invoke(boost::json::value_to_tag<QuestionRequested>, const boost::json::value& data);
QuestionResolved tag_invoke(boost::json::value_to_tag<QuestionResolved>, const boost::json::value& data);
ContextMessage tag_invoke(boost::json::value_to_tag<ContextMessage>, const boost::json::value& data);
RequestHeader tag_invoke(boost::json::value_to_tag<RequestHeader>, const boost::json::value& data);
TodoWrite tag_invoke(boost::json::value_to_tag<TodoWrite>, const boost::json::value& data);

}  // namespace harnessd::protocol
