#include "harnessd/protocol/messages.hpp"

#include "harnessd/rpc/error_code.hpp"
#include "protocol/json_read.hpp"
#include "util/json_limits.hpp"

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>

namespace harnessd::protocol {
namespace json = boost::json;
using rpc::ErrorCode;
using rpc::RpcError;

namespace {

[[noreturn]] void bad(std::string message) {
  throw RpcError(ErrorCode::invalid_params, std::move(message));
}

/// Params must be an object; absent params read as an empty object.
const json::object& params_object(const json::value& params) {
  static const json::object empty;
  if (params.is_null()) return empty;
  if (!params.is_object()) bad("params must be an object");
  return params.get_object();
}

std::optional<std::string> optional_string(const json::object& obj, std::string_view field) {
  const json::value* v = obj.if_contains(field);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_string()) bad("params." + std::string(field) + " must be a string");
  return std::string(v->get_string());
}

std::optional<std::int64_t> optional_int(const json::object& obj, std::string_view field) {
  const json::value* v = obj.if_contains(field);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64() && v->get_uint64() <= INT64_MAX) return static_cast<std::int64_t>(v->get_uint64());
  bad("params." + std::string(field) + " must be an integer");
}

std::string session_id(const json::object& obj) {
  const json::value* v = obj.if_contains("sessionId");
  if (v == nullptr) bad("params.sessionId is required");
  if (!v->is_string()) bad("params.sessionId must be a string");
  const json::string& id = v->get_string();
  if (id.empty()) bad("params.sessionId must not be empty");
  if (id.size() > max_session_id_bytes) bad("params.sessionId must be at most 256 bytes");
  return std::string(id);
}

std::int64_t page_limit(const json::object& obj, std::int64_t fallback) {
  const std::optional<std::int64_t> limit = optional_int(obj, "limit");
  if (!limit) return fallback;
  if (*limit < 1 || *limit > max_page_limit) bad("params.limit must be within 1..1000");
  return *limit;
}

std::optional<std::int64_t> after_seq(const json::object& obj) {
  const std::optional<std::int64_t> seq = optional_int(obj, "afterSeq");
  if (seq && *seq < -1) bad("params.afterSeq must be -1 or more");
  return seq;
}

}  // namespace

InitializeParams tag_invoke(json::value_to_tag<InitializeParams>, const json::value& params) {
  const json::object& obj = params_object(params);
  InitializeParams out;
  out.cwd = optional_string(obj, "cwd");
  if (out.cwd && out.cwd->empty()) bad("params.cwd must not be empty");
  out.provider = optional_string(obj, "provider");
  out.model = optional_string(obj, "model");
  if (out.model && out.model->empty()) bad("params.model must not be empty");
  out.max_tokens = optional_int(obj, "maxTokens");
  if (out.max_tokens && *out.max_tokens <= 0) bad("params.maxTokens must be a positive integer");
  out.protocol_version = optional_int(obj, "protocolVersion");
  out.auth_token = optional_string(obj, "authToken");
  out.sandbox = optional_string(obj, "sandbox");
  if (out.sandbox && *out.sandbox != "read-only" && *out.sandbox != "workspace-write" &&
      *out.sandbox != "danger-full-access") {
    bad(R"(params.sandbox must be "read-only", "workspace-write" or "danger-full-access")");
  }
  if (const std::optional<std::string> thinking = optional_string(obj, "thinking")) {
    if (*thinking != "enabled" && *thinking != "disabled") bad(R"(params.thinking must be "enabled" or "disabled")");
    out.thinking = *thinking == "enabled";
  }
  out.reasoning_effort = optional_string(obj, "reasoningEffort");
  if (out.reasoning_effort && *out.reasoning_effort != "high" && *out.reasoning_effort != "max") {
    bad(R"(params.reasoningEffort must be "high" or "max")");
  }
  if (const json::value* t = obj.if_contains("temperature"); t != nullptr && !t->is_null()) {
    if (!t->is_number()) bad("params.temperature must be a number");
    const double temperature = t->to_number<double>();
    if (!(temperature >= 0 && temperature <= 2)) bad("params.temperature must be within 0..2");
    out.temperature = temperature;
  }
  if (const json::value* stop = obj.if_contains("stop"); stop != nullptr && !stop->is_null()) {
    if (stop->is_string()) {
      out.stop.emplace_back(stop->get_string());
    } else if (stop->is_array() && stop->get_array().size() <= 16) {
      for (const json::value& s : stop->get_array()) {
        if (!s.is_string() || s.get_string().empty() || s.get_string().size() > 256) {
          bad("params.stop must be a string or an array of at most 16 non-empty strings of at most 256 bytes");
        }
        out.stop.emplace_back(s.get_string());
      }
    } else {
      bad("params.stop must be a string or an array of at most 16 non-empty strings of at most 256 bytes");
    }
  }
  out.max_steps = optional_int(obj, "maxSteps");
  if (out.max_steps && (*out.max_steps < 1 || *out.max_steps > 1000)) bad("params.maxSteps must be within 1..1000");
  out.context_window = optional_int(obj, "contextWindow");
  if (out.context_window && (*out.context_window < 1000 || *out.context_window > 100'000'000)) {
    bad("params.contextWindow must be within 1000..100000000");
  }
  if (const std::optional<std::string> policy = optional_string(obj, "approvalPolicy")) {
    out.approval_policy = parse_approval_policy(*policy);
    if (!out.approval_policy) bad(R"(params.approvalPolicy must be "never" or "ask")");
  }
  if (const std::optional<std::string> mode = optional_string(obj, "onDisconnect")) {
    if (*mode == "continue") {
      out.on_disconnect = OnDisconnect::continue_running;
    } else if (*mode != "cancel") {
      bad(R"(params.onDisconnect must be "cancel" or "continue")");
    }
  }
  if (const json::value* info = obj.if_contains("clientInfo"); info && !info->is_null()) {
    if (!info->is_object()) bad("params.clientInfo must be an object");
    out.client_info = info->get_object();
  }
  return out;
}

PromptParams tag_invoke(json::value_to_tag<PromptParams>, const json::value& params) {
  const json::object& obj = params_object(params);
  PromptParams out;
  out.session_id = session_id(obj);
  const json::value* blocks = obj.if_contains("contentBlocks");
  if (blocks == nullptr) bad("params.contentBlocks is required");
  if (!blocks->is_array()) bad("params.contentBlocks must be an array");
  if (blocks->get_array().empty()) bad("params.contentBlocks must not be empty");
  std::size_t i = 0;
  for (const json::value& block : blocks->get_array()) {
    const std::string where = "params.contentBlocks[" + std::to_string(i++) + "]";
    if (!block.is_object()) bad(where + " must be an object");
    const json::object& b = block.get_object();
    const json::value* type = b.if_contains("type");
    if (type == nullptr || !type->is_string()) bad(where + ".type must be a string");
    if (type->get_string() != "text") {
      bad(where + ".type \"" + std::string(type->get_string()) + "\" is not supported (v1 accepts \"text\")");
    }
    const json::value* text = b.if_contains("text");
    if (text == nullptr || !text->is_string()) bad(where + ".text must be a string");
    out.content_blocks.push_back(json::object{{"type", "text"}, {"text", text->get_string()}});
  }
  return out;
}

CancelParams tag_invoke(json::value_to_tag<CancelParams>, const json::value& params) {
  return CancelParams{session_id(params_object(params))};
}

ToolsListParams tag_invoke(json::value_to_tag<ToolsListParams>, const json::value& params) {
  (void)params_object(params);
  return {};
}

namespace {

/// A required, non-empty string of at most 256 bytes (an approval or question id).
std::string decision_id(const json::object& obj, std::string_view field) {
  const std::optional<std::string> id = optional_string(obj, field);
  if (!id || id->empty()) bad("params." + std::string(field) + " is required");
  if (id->size() > 256) bad("params." + std::string(field) + " must be at most 256 bytes");
  return *id;
}

std::optional<std::string> decision_text(const json::object& obj, std::string_view field, std::string_view where) {
  std::optional<std::string> text;
  const json::value* v = obj.if_contains(field);
  if (v == nullptr || v->is_null()) return text;
  if (!v->is_string()) bad(std::string(where) + " must be a string");
  if (v->get_string().size() > max_decision_text_bytes) bad(std::string(where) + " must be at most 64 KiB");
  text.emplace(v->get_string());
  return text;
}

Answer read_answer(const json::value& entry, const std::string& where) {
  if (!entry.is_object()) bad(where + " must be an object");
  const json::object& a = entry.get_object();
  Answer answer;
  const json::value* id = a.if_contains("id");
  if (id == nullptr || !id->is_string() || id->get_string().empty()) bad(where + ".id must be a non-empty string");
  answer.id = std::string(id->get_string());
  if (const json::value* selected = a.if_contains("selected"); selected != nullptr && !selected->is_null()) {
    if (!selected->is_array() || selected->get_array().size() > 64) {
      bad(where + ".selected must be an array of at most 64 labels");
    }
    for (const json::value& label : selected->get_array()) {
      if (!label.is_string() || label.get_string().size() > 4096) bad(where + ".selected must hold strings");
      answer.selected.emplace_back(label.get_string());
    }
  }
  answer.custom = decision_text(a, "custom", where + ".custom");
  return answer;
}

}  // namespace

ApproveParams tag_invoke(json::value_to_tag<ApproveParams>, const json::value& params) {
  const json::object& obj = params_object(params);
  ApproveParams out;
  out.session_id = session_id(obj);
  out.approval_id = decision_id(obj, "approvalId");
  const std::optional<std::string> outcome = optional_string(obj, "outcome");
  if (!outcome) bad("params.outcome is required");
  const std::optional<ApprovalOutcome> parsed = parse_approval_outcome(*outcome);
  if (!parsed || *parsed == ApprovalOutcome::cancelled) {
    bad(R"(params.outcome must be "allowed-once", "allowed-for-session" or "rejected")");
  }
  out.outcome = *parsed;
  out.message = decision_text(obj, "message", "params.message");
  return out;
}

Answer tag_invoke(json::value_to_tag<Answer>, const json::value& answer) { return read_answer(answer, "answer"); }

AnswerParams tag_invoke(json::value_to_tag<AnswerParams>, const json::value& params) {
  const json::object& obj = params_object(params);
  AnswerParams out;
  out.session_id = session_id(obj);
  out.question_id = decision_id(obj, "questionId");
  const json::value* answers = obj.if_contains("answers");
  if (answers == nullptr || !answers->is_array()) bad("params.answers must be an array");
  if (answers->get_array().size() > 64) bad("params.answers must hold at most 64 answers");
  std::size_t i = 0;
  for (const json::value& entry : answers->get_array()) {
    out.answers.push_back(read_answer(entry, "params.answers[" + std::to_string(i++) + "]"));
  }
  return out;
}

void tag_invoke(json::value_from_tag, json::value& out, const ApproveParams& params) {
  json::object obj{{"sessionId", params.session_id},
                   {"approvalId", params.approval_id},
                   {"outcome", to_string(params.outcome)}};
  if (params.message) obj["message"] = *params.message;
  out = std::move(obj);
}

void tag_invoke(json::value_from_tag, json::value& out, const Answer& answer) {
  json::object obj{{"id", answer.id}, {"selected", json::array(answer.selected.begin(), answer.selected.end())}};
  if (answer.custom) obj["custom"] = *answer.custom;
  out = std::move(obj);
}

void tag_invoke(json::value_from_tag, json::value& out, const AnswerParams& params) {
  json::array answers;
  for (const Answer& answer : params.answers) answers.push_back(json::value_from(answer));
  out = json::object{
      {"sessionId", params.session_id}, {"questionId", params.question_id}, {"answers", std::move(answers)}};
}

void tag_invoke(json::value_from_tag, json::value& out, const DecisionResult& result) {
  out = json::object{{"accepted", result.accepted}};
}

void tag_invoke(json::value_from_tag, json::value& out, const ToolInfo& tool) {
  out = json::object{{"name", tool.name},
                     {"description", tool.description},
                     {"inputSchema", tool.input_schema},
                     {"readOnly", tool.read_only},
                     {"source", tool.source}};
}

void tag_invoke(json::value_from_tag, json::value& out, const ToolsListResult& result) {
  json::array tools;
  for (const ToolInfo& tool : result.tools) tools.push_back(json::value_from(tool));
  out = json::object{{"tools", std::move(tools)}};
}

ShutdownParams tag_invoke(json::value_to_tag<ShutdownParams>, const json::value&) {
  return {};  // shutdown ignores whatever params it is sent
}

ListParams tag_invoke(json::value_to_tag<ListParams>, const json::value& params) {
  const json::object& obj = params_object(params);
  return ListParams{.limit = page_limit(obj, 100), .cursor = optional_string(obj, "cursor")};
}

EventsParams tag_invoke(json::value_to_tag<EventsParams>, const json::value& params) {
  const json::object& obj = params_object(params);
  EventsParams out;
  out.session_id = session_id(obj);
  out.after_seq = after_seq(obj).value_or(-1);
  out.limit = page_limit(obj, 200);
  return out;
}

SubscribeParams tag_invoke(json::value_to_tag<SubscribeParams>, const json::value& params) {
  const json::object& obj = params_object(params);
  return SubscribeParams{.session_id = session_id(obj), .after_seq = after_seq(obj)};
}

UnsubscribeParams tag_invoke(json::value_to_tag<UnsubscribeParams>, const json::value& params) {
  return UnsubscribeParams{session_id(params_object(params))};
}

void tag_invoke(json::value_from_tag, json::value& out, const InitializeResult& result) {
  json::array providers(result.providers.begin(), result.providers.end());
  json::array methods(result.methods.begin(), result.methods.end());
  out = json::object{
      {"serverInfo", json::object{{"name", result.server_name},
                                  {"version", result.version},
                                  {"implementation", result.implementation}}},
      {"protocolVersion", result.protocol_version},
      {"capabilities", json::object{{"providers", std::move(providers)}, {"methods", std::move(methods)}}}};
}

void tag_invoke(json::value_from_tag, json::value& out, const PromptResult& result) {
  out = json::object{{"status", to_string(result.status)}, {"reason", json::value_from(result.reason)}};
}

void tag_invoke(json::value_from_tag, json::value& out, const CancelResult& result) {
  out = json::object{{"cancelled", result.cancelled}};
}

void tag_invoke(json::value_from_tag, json::value& out, const ShutdownResult&) { out = json::object{}; }

void tag_invoke(json::value_from_tag, json::value& out, const SessionSummary& s) {
  json::object entry{{"sessionId", s.session_id}, {"createdAt", s.created_at}, {"updatedAt", s.updated_at},
                     {"lastSeq", s.last_seq},     {"turns", s.turns},          {"running", s.running}};
  if (s.parent_session_id) entry["parentSessionId"] = *s.parent_session_id;
  if (s.waiting) entry["waiting"] = *s.waiting;
  out = std::move(entry);
}

void tag_invoke(json::value_from_tag, json::value& out, const ListResult& result) {
  json::array sessions;
  sessions.reserve(result.sessions.size());
  for (const SessionSummary& s : result.sessions) sessions.push_back(json::value_from(s));
  json::object obj{{"sessions", std::move(sessions)}};
  if (result.next_cursor) obj["nextCursor"] = *result.next_cursor;
  out = std::move(obj);
}

void tag_invoke(json::value_from_tag, json::value& out, const SubscribeResult& result) {
  out = json::object{{"lastSeq", result.last_seq}};
}

void tag_invoke(json::value_from_tag, json::value& out, const UnsubscribeResult& result) {
  out = json::object{{"unsubscribed", result.unsubscribed}};
}

std::string to_json_text(const EventsResult& result) {
  std::size_t size = 48;
  for (const std::string& event : result.events) size += event.size() + 1;
  std::string out;
  out.reserve(size);
  out += R"({"events":[)";
  for (std::size_t i = 0; i < result.events.size(); ++i) {
    if (i > 0) out += ',';
    out += result.events[i];
  }
  out += R"(],"lastSeq":)";
  out += std::to_string(result.last_seq);
  out += R"(,"more":)";
  out += result.more ? "true" : "false";
  out += '}';
  return out;
}

void tag_invoke(json::value_from_tag, json::value& out, const EventsResult& result) {
  json::array events;
  events.reserve(result.events.size());
  // Log lines may nest deeper than client input (util/json_limits.hpp).
  for (const std::string& event : result.events) {
    events.push_back(json::parse(event, {}, util::log_parse_options()));
  }
  out = json::object{{"events", std::move(events)}, {"lastSeq", result.last_seq}, {"more", result.more}};
}

void tag_invoke(json::value_from_tag, json::value& out, const DeleteResult& result) {
  out = json::object{{"deleted", result.deleted}};
}

bool InitializeResult::supports(std::string_view method) const {
  return std::find(methods.begin(), methods.end(), method) != methods.end();
}

DeleteParams tag_invoke(json::value_to_tag<DeleteParams>, const json::value& params) {
  return DeleteParams{session_id(params_object(params))};
}

// ---------------------------------------------------------------------------
// Params as a client sends them: unset optional fields are not written.

namespace {

json::object session_object(const std::string& session_id) { return json::object{{"sessionId", session_id}}; }

template <class T>
void put(json::object& obj, std::string_view name, const std::optional<T>& value) {
  if (value) obj[name] = *value;
}

}  // namespace

void tag_invoke(json::value_from_tag, json::value& out, const InitializeParams& params) {
  json::object obj;
  put(obj, "cwd", params.cwd);
  put(obj, "provider", params.provider);
  put(obj, "model", params.model);
  put(obj, "maxTokens", params.max_tokens);
  put(obj, "protocolVersion", params.protocol_version);
  put(obj, "authToken", params.auth_token);
  // Cancel is the daemon's default, so only the other mode is written.
  if (params.on_disconnect == OnDisconnect::continue_running) obj["onDisconnect"] = "continue";
  put(obj, "sandbox", params.sandbox);
  if (params.approval_policy) obj["approvalPolicy"] = to_string(*params.approval_policy);
  put(obj, "contextWindow", params.context_window);
  if (params.thinking) obj["thinking"] = *params.thinking ? "enabled" : "disabled";
  put(obj, "reasoningEffort", params.reasoning_effort);
  put(obj, "temperature", params.temperature);
  if (!params.stop.empty()) obj["stop"] = json::array(params.stop.begin(), params.stop.end());
  put(obj, "maxSteps", params.max_steps);
  put(obj, "clientInfo", params.client_info);
  out = std::move(obj);
}

void tag_invoke(json::value_from_tag, json::value& out, const PromptParams& params) {
  json::object obj = session_object(params.session_id);
  obj["contentBlocks"] = params.content_blocks;
  out = std::move(obj);
}

void tag_invoke(json::value_from_tag, json::value& out, const CancelParams& params) {
  out = session_object(params.session_id);
}

void tag_invoke(json::value_from_tag, json::value& out, const ShutdownParams&) { out = json::object{}; }

// Page parameters equal to the daemon's defaults are left out, as unset
// optional fields are.
void tag_invoke(json::value_from_tag, json::value& out, const ListParams& params) {
  json::object obj;
  if (params.limit != ListParams{}.limit) obj["limit"] = params.limit;
  put(obj, "cursor", params.cursor);
  out = std::move(obj);
}

void tag_invoke(json::value_from_tag, json::value& out, const EventsParams& params) {
  json::object obj = session_object(params.session_id);
  if (params.after_seq != EventsParams{}.after_seq) obj["afterSeq"] = params.after_seq;
  if (params.limit != EventsParams{}.limit) obj["limit"] = params.limit;
  out = std::move(obj);
}

void tag_invoke(json::value_from_tag, json::value& out, const SubscribeParams& params) {
  json::object obj = session_object(params.session_id);
  put(obj, "afterSeq", params.after_seq);
  out = std::move(obj);
}

void tag_invoke(json::value_from_tag, json::value& out, const UnsubscribeParams& params) {
  out = session_object(params.session_id);
}

void tag_invoke(json::value_from_tag, json::value& out, const ToolsListParams&) { out = json::object{}; }

void tag_invoke(json::value_from_tag, json::value& out, const DeleteParams& params) {
  out = session_object(params.session_id);
}

// ---------------------------------------------------------------------------
// Results as a client reads them.

namespace {

std::vector<std::string> strings(const json::object& obj, std::string_view name) {
  std::vector<std::string> out;
  for (const json::value& v : read::array(obj, name)) out.push_back(read::string(v, name));
  return out;
}

}  // namespace

InitializeResult tag_invoke(json::value_to_tag<InitializeResult>, const json::value& value) {
  const json::object& obj = read::object(value, "initialize result");
  const json::object& info = read::object(obj, "serverInfo");
  InitializeResult out;
  out.server_name = read::string(info, "name");
  out.version = read::optional_string(info, "version").value_or("");
  out.implementation = read::optional_string(info, "implementation").value_or("");
  const std::int64_t version = read::integer(obj, "protocolVersion");
  if (version < 0 || version > INT32_MAX) read::fail("protocolVersion", "is out of range");
  out.protocol_version = static_cast<int>(version);
  // A daemon may predate capabilities: none read as none.
  if (const json::value* caps = read::optional_field(obj, "capabilities")) {
    const json::object& capabilities = read::object(*caps, "capabilities");
    if (read::optional_field(capabilities, "providers")) out.providers = strings(capabilities, "providers");
    if (read::optional_field(capabilities, "methods")) out.methods = strings(capabilities, "methods");
  }
  return out;
}

PromptResult tag_invoke(json::value_to_tag<PromptResult>, const json::value& value) {
  const json::object& obj = read::object(value, "session/prompt result");
  const std::optional<TurnStatus> status = parse_turn_status(read::string(obj, "status"));
  if (!status) read::fail("status", "must be \"ok\", \"error\" or \"aborted\"");
  return PromptResult{.status = *status, .reason = json::value_to<TurnEndReason>(read::field(obj, "reason"))};
}

CancelResult tag_invoke(json::value_to_tag<CancelResult>, const json::value& value) {
  return CancelResult{read::boolean(read::object(value, "session/cancel result"), "cancelled")};
}

ShutdownResult tag_invoke(json::value_to_tag<ShutdownResult>, const json::value& value) {
  (void)read::object(value, "shutdown result");
  return {};
}

SessionSummary tag_invoke(json::value_to_tag<SessionSummary>, const json::value& value) {
  const json::object& obj = read::object(value, "session/list entry");
  return SessionSummary{.session_id = read::string(obj, "sessionId"),
                        .created_at = read::integer(obj, "createdAt"),
                        .updated_at = read::integer(obj, "updatedAt"),
                        .last_seq = read::integer(obj, "lastSeq"),
                        .turns = read::integer(obj, "turns"),
                        .running = read::boolean(obj, "running"),
                        .parent_session_id = read::optional_string(obj, "parentSessionId"),
                        .waiting = read::optional_string(obj, "waiting")};
}

ListResult tag_invoke(json::value_to_tag<ListResult>, const json::value& value) {
  const json::object& obj = read::object(value, "session/list result");
  ListResult out;
  for (const json::value& entry : read::array(obj, "sessions")) out.sessions.push_back(json::value_to<SessionSummary>(entry));
  out.next_cursor = read::optional_string(obj, "nextCursor");
  return out;
}

EventsResult tag_invoke(json::value_to_tag<EventsResult>, const json::value& value) {
  const json::object& obj = read::object(value, "session/events result");
  EventsResult out;
  for (const json::value& entry : read::array(obj, "events")) {
    const json::object& event = read::object(entry, "event");
    (void)read::string(event, "type");
    (void)read::integer(event, "seq");
    out.events.push_back(json::serialize(event));
  }
  out.last_seq = read::integer(obj, "lastSeq");
  out.more = read::boolean(obj, "more");
  return out;
}

SubscribeResult tag_invoke(json::value_to_tag<SubscribeResult>, const json::value& value) {
  return SubscribeResult{read::integer(read::object(value, "session/subscribe result"), "lastSeq")};
}

UnsubscribeResult tag_invoke(json::value_to_tag<UnsubscribeResult>, const json::value& value) {
  return UnsubscribeResult{read::boolean(read::object(value, "session/unsubscribe result"), "unsubscribed")};
}

ToolInfo tag_invoke(json::value_to_tag<ToolInfo>, const json::value& value) {
  const json::object& obj = read::object(value, "tool");
  return ToolInfo{.name = read::string(obj, "name"),
                  .description = read::optional_string(obj, "description").value_or(""),
                  .input_schema = read::object(obj, "inputSchema"),
                  .read_only = read::boolean(obj, "readOnly"),
                  .source = read::optional_string(obj, "source").value_or("builtin")};
}

ToolsListResult tag_invoke(json::value_to_tag<ToolsListResult>, const json::value& value) {
  const json::object& obj = read::object(value, "tools/list result");
  ToolsListResult out;
  for (const json::value& entry : read::array(obj, "tools")) out.tools.push_back(json::value_to<ToolInfo>(entry));
  return out;
}

DecisionResult tag_invoke(json::value_to_tag<DecisionResult>, const json::value& value) {
  return DecisionResult{read::boolean(read::object(value, "decision result"), "accepted")};
}

DeleteResult tag_invoke(json::value_to_tag<DeleteResult>, const json::value& value) {
  return DeleteResult{read::boolean(read::object(value, "session/delete result"), "deleted")};
}

}  // namespace harnessd::protocol
