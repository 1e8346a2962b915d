// Typed params and results of each method (docs/protocol.md §4), with their
// JSON forms as Boost.JSON conversions both ways, so the daemon and clients
// share one definition: `json::value_to<PromptParams>(v)` validates,
// `json::value_from(result)` writes the wire form. Reading params throws
// rpc::RpcError(invalid_params) with a message naming the offending field;
// the daemon answers that as -32602 in one place (its method table).
// Reading a result throws std::invalid_argument naming the field; a client
// reports that as the daemon's fault. Optional fields that are unset are
// not written, so a value read and written back is the canonical form.
#pragma once

#include "harnessd/protocol/decisions.hpp"
#include "harnessd/protocol/session_id.hpp"
#include "harnessd/protocol/turn_end.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::protocol {

/// What happens to a connection's running turns when it drops (§4.6).
enum class OnDisconnect { cancel, continue_running };

struct InitializeParams {
  std::optional<std::string> cwd;
  std::optional<std::string> provider;
  std::optional<std::string> model;
  std::optional<std::int64_t> max_tokens;
  std::optional<std::int64_t> protocol_version;
  std::optional<std::string> auth_token;
  OnDisconnect on_disconnect = OnDisconnect::cancel;
  /// "read-only", "workspace-write" or "danger-full-access" (checked by the
  /// daemon, which knows which modes this listener allows).
  std::optional<std::string> sandbox;
  /// Unset: the listener's default (stdio `never`, network `ask`, or
  /// --approval-policy).
  std::optional<ApprovalPolicy> approval_policy;
  /// The model's context window in tokens; unset: --context-window.
  std::optional<std::int64_t> context_window;
  std::optional<bool> thinking;                 ///< "enabled" / "disabled"
  std::optional<std::string> reasoning_effort;  ///< "high" or "max"
  std::optional<double> temperature;            ///< 0..2
  std::vector<std::string> stop;                ///< at most 16 sequences
  std::optional<std::int64_t> max_steps;        ///< model steps per turn, 1..1000
  /// Who is calling ({name, version}); the daemon only checks it is an object.
  std::optional<boost::json::object> client_info;
};

struct InitializeResult {
  std::string server_name;
  std::string version;
  std::string implementation;
  int protocol_version = 0;
  std::vector<std::string> providers;
  std::vector<std::string> methods;

  /// True when capabilities.methods lists `method` (e.g. "session/subscribe").
  bool supports(std::string_view method) const;
};

struct PromptParams {
  std::string session_id;
  boost::json::array content_blocks;  ///< each {"type":"text","text":STRING}
};

/// The turn's outcome.
struct PromptResult {
  TurnStatus status = TurnStatus::ok;
  TurnEndReason reason;
};

struct CancelParams {
  std::string session_id;
};

struct CancelResult {
  bool cancelled = false;
};

struct ShutdownParams {};
struct ShutdownResult {};

/// Page sizes of session/list and session/events.
inline constexpr std::int64_t max_page_limit = 1000;

struct ListParams {
  std::int64_t limit = 100;
  std::optional<std::string> cursor;  ///< a ListResult::next_cursor
};

/// One session in session/list.
struct SessionSummary {
  std::string session_id;
  std::int64_t created_at = 0;  ///< epoch ms
  std::int64_t updated_at = 0;  ///< epoch ms of the last logged event
  std::int64_t last_seq = -1;   ///< -1: no events yet
  std::int64_t turns = 0;
  bool running = false;
  std::optional<std::string> parent_session_id;
  /// While its turn waits for a client: "approval" or "question".
  std::optional<std::string> waiting;
};

struct ListResult {
  std::vector<SessionSummary> sessions;
  std::optional<std::string> next_cursor;
};

struct EventsParams {
  std::string session_id;
  std::int64_t after_seq = -1;
  std::int64_t limit = 200;
};

/// A page of the log. The events are kept as the log's bytes and written
/// as they are: never parsed and re-serialized, so they stay byte for byte
/// what was notified.
struct EventsResult {
  std::vector<std::string> events;
  std::int64_t last_seq = -1;
  bool more = false;
};

struct SubscribeParams {
  std::string session_id;
  std::optional<std::int64_t> after_seq;  ///< absent: replay nothing
};

struct SubscribeResult {
  std::int64_t last_seq = -1;
};

struct UnsubscribeParams {
  std::string session_id;
};

struct UnsubscribeResult {
  bool unsubscribed = false;
};

struct ToolsListParams {};

/// session/delete: removes an idle session and its log.
struct DeleteParams {
  std::string session_id;
};

struct DeleteResult {
  bool deleted = true;
};

/// Longest `message` of session/approve and `custom` of an answer.
inline constexpr std::size_t max_decision_text_bytes = 64 * 1024;

struct ApproveParams {
  std::string session_id;
  std::string approval_id;
  ApprovalOutcome outcome = ApprovalOutcome::rejected;  ///< never `cancelled`
  std::optional<std::string> message;  ///< with `rejected`: told to the model
};

/// One question's answer in session/answer.
struct Answer {
  std::string id;                     ///< the question's id
  std::vector<std::string> selected;  ///< labels of its options
  std::optional<std::string> custom;  ///< free text
};

struct AnswerParams {
  std::string session_id;
  std::string question_id;
  std::vector<Answer> answers;  ///< empty: the user declined to answer
};

/// The answer to session/approve and session/answer.
struct DecisionResult {
  bool accepted = true;
};

/// One tool the model of this connection's sessions is offered.
struct ToolInfo {
  std::string name;
  std::string description;
  boost::json::object input_schema;
  bool read_only = false;
  std::string source;  ///< "builtin" or "mcp:SERVER"
};

struct ToolsListResult {
  std::vector<ToolInfo> tools;
};

// Params: read by the daemon (throw rpc::RpcError -32602), written by clients.
InitializeParams tag_invoke(boost::json::value_to_tag<InitializeParams>, const boost::json::value& params);
PromptParams tag_invoke(boost::json::value_to_tag<PromptParams>, const boost::json::value& params);
CancelParams tag_invoke(boost::json::value_to_tag<CancelParams>, const boost::json::value& params);
ShutdownParams tag_invoke(boost::json::value_to_tag<ShutdownParams>, const boost::json::value& params);
ListParams tag_invoke(boost::json::value_to_tag<ListParams>, const boost::json::value& params);
EventsParams tag_invoke(boost::json::value_to_tag<EventsParams>, const boost::json::value& params);
SubscribeParams tag_invoke(boost::json::value_to_tag<SubscribeParams>, const boost::json::value& params);
UnsubscribeParams tag_invoke(boost::json::value_to_tag<UnsubscribeParams>, const boost::json::value& params);
ToolsListParams tag_invoke(boost::json::value_to_tag<ToolsListParams>, const boost::json::value& params);
ApproveParams tag_invoke(boost::json::value_to_tag<ApproveParams>, const boost::json::value& params);
Answer tag_invoke(boost::json::value_to_tag<Answer>, const boost::json::value& params);
AnswerParams tag_invoke(boost::json::value_to_tag<AnswerParams>, const boost::json::value& params);
DeleteParams tag_invoke(boost::json::value_to_tag<DeleteParams>, const boost::json::value& params);

void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const InitializeParams& params);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const PromptParams& params);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const CancelParams& params);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const ShutdownParams& params);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const ListParams& params);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const EventsParams& params);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const SubscribeParams& params);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const UnsubscribeParams& params);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const ToolsListParams& params);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const ApproveParams& params);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const Answer& params);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const AnswerParams& params);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const DeleteParams& params);

// Results: written by the daemon, read by clients (throw std::invalid_argument).
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const InitializeResult& result);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const PromptResult& result);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const CancelResult& result);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const ShutdownResult& result);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const SessionSummary& result);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const ListResult& result);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const EventsResult& result);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const SubscribeResult& result);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const UnsubscribeResult& result);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const ToolInfo& result);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const ToolsListResult& result);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const DecisionResult& result);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const DeleteResult& result);

InitializeResult tag_invoke(boost::json::value_to_tag<InitializeResult>, const boost::json::value& result);
PromptResult tag_invoke(boost::json::value_to_tag<PromptResult>, const boost::json::value& result);
CancelResult tag_invoke(boost::json::value_to_tag<CancelResult>, const boost::json::value& result);
ShutdownResult tag_invoke(boost::json::value_to_tag<ShutdownResult>, const boost::json::value& result);
SessionSummary tag_invoke(boost::json::value_to_tag<SessionSummary>, const boost::json::value& result);
ListResult tag_invoke(boost::json::value_to_tag<ListResult>, const boost::json::value& result);
EventsResult tag_invoke(boost::json::value_to_tag<EventsResult>, const boost::json::value& result);
SubscribeResult tag_invoke(boost::json::value_to_tag<SubscribeResult>, const boost::json::value& result);
UnsubscribeResult tag_invoke(boost::json::value_to_tag<UnsubscribeResult>, const boost::json::value& result);
ToolInfo tag_invoke(boost::json::value_to_tag<ToolInfo>, const boost::json::value& result);
ToolsListResult tag_invoke(boost::json::value_to_tag<ToolsListResult>, const boost::json::value& result);
DecisionResult tag_invoke(boost::json::value_to_tag<DecisionResult>, const boost::json::value& result);
DeleteResult tag_invoke(boost::json::value_to_tag<DeleteResult>, const boost::json::value& result);

/// The wire form of the result, serialized, as the daemon sends it: the
/// log's lines are copied in as they are, never parsed and re-serialized.
/// (value_from writes the same JSON, for clients and tests.)
std::string to_json_text(const EventsResult& result);

}  // namespace harnessd::protocol
