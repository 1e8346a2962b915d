// The golden wire files (tests/wire): each is read into its protocol type
// and written back, and must come out as the same JSON. The table names the
// type of every file; a file it does not name fails, so a new message shape
// cannot skip the check.
#include "harnessd/protocol/chunk.hpp"
#include "harnessd/protocol/events.hpp"
#include "harnessd/protocol/messages.hpp"
#include "harnessd/protocol/notifications.hpp"
#include "harnessd/rpc/codec.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace json = boost::json;
namespace protocol = harnessd::protocol;
namespace rpc = harnessd::rpc;

namespace {

/// A file's JSON read into its type and written back.
using RoundTrip = std::function<json::value(const json::value&)>;

template <class T>
RoundTrip as() {
  return [](const json::value& v) { return json::value_from(json::value_to<T>(v)); };
}

/// An event {type, seq, time, data}: `data` through T, the envelope kept.
template <class T>
RoundTrip event() {
  return [](const json::value& v) {
    const json::object& event = v.as_object();
    REQUIRE(event.size() == 4);
    const std::string type(event.at("type").as_string());
    if constexpr (std::is_same_v<T, protocol::StepEvent>) {
      REQUIRE((type == protocol::StepEvent::start_type || type == protocol::StepEvent::end_type));
    } else {
      REQUIRE(type == T::type);
    }
    return json::value(json::object{{"type", type},
                                    {"seq", event.at("seq").as_int64()},
                                    {"time", event.at("time").as_int64()},
                                    {"data", json::value_from(json::value_to<T>(event.at("data")))}});
  };
}

/// A whole error response frame, through the codec, with its code.
RoundTrip error(rpc::ErrorCode code) {
  return [code](const json::value& v) {
    rpc::Decoded decoded = rpc::decode_frame(json::serialize(v));
    REQUIRE(std::holds_alternative<rpc::ErrorResponse>(decoded));
    const rpc::ErrorResponse& e = std::get<rpc::ErrorResponse>(decoded);
    CHECK(e.code == code);
    return json::parse(rpc::encode_error(e));
  };
}

const std::map<std::string, RoundTrip>& table() {
  using namespace protocol;
  using rpc::ErrorCode;
  static const std::map<std::string, RoundTrip> files{
      {"initialize.params.json", as<InitializeParams>()},
      {"initialize.result.json", as<InitializeResult>()},
      {"session.prompt.params.json", as<PromptParams>()},
      {"session.prompt.result.json", as<PromptResult>()},
      {"session.prompt.result.error.json", as<PromptResult>()},
      {"session.prompt.result.max-tokens.json", as<PromptResult>()},
      {"session.prompt.result.aborted.json", as<PromptResult>()},
      {"session.cancel.params.json", as<CancelParams>()},
      {"session.cancel.result.json", as<CancelResult>()},
      {"shutdown.params.json", as<ShutdownParams>()},
      {"shutdown.result.json", as<ShutdownResult>()},
      {"session.list.params.json", as<ListParams>()},
      {"session.list.result.json", as<ListResult>()},
      {"session.events.params.json", as<EventsParams>()},
      {"session.events.result.json", as<EventsResult>()},
      {"session.subscribe.params.json", as<SubscribeParams>()},
      {"session.subscribe.result.json", as<SubscribeResult>()},
      {"session.unsubscribe.params.json", as<UnsubscribeParams>()},
      {"session.unsubscribe.result.json", as<UnsubscribeResult>()},
      {"tools.list.params.json", as<ToolsListParams>()},
      {"tools.list.result.json", as<ToolsListResult>()},
      {"session.approve.params.json", as<ApproveParams>()},
      {"session.approve.result.json", as<DecisionResult>()},
      {"session.answer.params.json", as<AnswerParams>()},
      {"session.answer.result.json", as<DecisionResult>()},
      {"session.delete.params.json", as<DeleteParams>()},
      {"session.delete.result.json", as<DeleteResult>()},
      {"error.parse-error.json", error(ErrorCode::parse_error)},
      {"error.invalid-request.json", error(ErrorCode::invalid_request)},
      {"error.method-not-found.json", error(ErrorCode::method_not_found)},
      {"error.invalid-params.json", error(ErrorCode::invalid_params)},
      {"error.unknown-session.json", error(ErrorCode::invalid_params)},
      {"error.not-pending.json", error(ErrorCode::invalid_params)},
      {"error.internal-error.json", error(ErrorCode::internal_error)},
      {"error.session-busy.json", error(ErrorCode::session_busy)},
      {"error.not-initialized.json", error(ErrorCode::not_initialized)},
      {"error.shutting-down.json", error(ErrorCode::shutting_down)},
      {"error.unauthorized.json", error(ErrorCode::unauthorized)},
      {"error.overloaded.json", error(ErrorCode::overloaded)},
      {"notification.session.event.json", as<SessionEventNote>()},
      {"notification.subagent.started.json", as<SubagentStarted>()},
      {"notification.subagent.finished.json", as<SubagentFinished>()},
      {"event.turn.start.json", event<TurnStart>()},
      {"event.user.message.json", event<UserMessage>()},
      {"event.step.start.json", event<StepEvent>()},
      {"event.step.end.json", event<StepEvent>()},
      {"event.assistant.chunk.json", event<AssistantChunk>()},
      {"event.assistant.message.json", event<AssistantMessage>()},
      {"event.assistant.message.tool-call.json", event<AssistantMessage>()},
      {"event.tool.call.json", event<ToolCallEvent>()},
      {"event.tool.result.json", event<ToolResult>()},
      {"event.tool.result.error.json", event<ToolResult>()},
      {"event.turn.end.json", event<TurnEnd>()},
      {"event.turn.end.error.json", event<TurnEnd>()},
      {"event.compact.start.json", event<CompactStart>()},
      {"event.compact.summary.json", event<CompactSummary>()},
      {"event.compact.end.json", event<CompactEnd>()},
      {"event.compact.end.error.json", event<CompactEnd>()},
      {"event.approval.requested.json", event<ApprovalRequested>()},
      {"event.approval.resolved.json", event<ApprovalResolved>()},
      {"event.question.requested.json", event<QuestionRequested>()},
      {"event.question.resolved.json", event<QuestionResolved>()},
      {"event.context.message.json", event<ContextMessage>()},
      {"event.request.header.json", event<RequestHeader>()},
      {"event.todo.write.json", event<TodoWrite>()},
      {"chunk.block-start.json", as<Chunk>()},
      {"chunk.text-delta.json", as<Chunk>()},
      {"chunk.reasoning-delta.json", as<Chunk>()},
      {"chunk.tool-call-delta.json", as<Chunk>()},
      {"chunk.tool-call-delta.more.json", as<Chunk>()},
      {"chunk.block-end.json", as<Chunk>()},
      {"chunk.usage.json", as<Chunk>()},
      {"chunk.finish.json", as<Chunk>()},
  };
  return files;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("every golden wire file reads into its protocol type and writes back the same") {
  const std::filesystem::path dir = HARNESSD_WIRE_DIR;
  std::set<std::string> seen;
  for (const std::filesystem::directory_entry& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".json") continue;
    seen.insert(name);
    CAPTURE(name);
    auto it = table().find(name);
    if (it == table().end()) {
      FAIL_CHECK("no type for this wire file: add it to the table in tests/unit/wire_test.cpp");
      continue;
    }
    const json::value golden = json::parse(read_text(entry.path()));
    json::value written;
    try {
      written = it->second(golden);
    } catch (const std::exception& e) {
      FAIL_CHECK("reading it failed: " << e.what());
      continue;
    }
    CHECK_MESSAGE(written == golden, "wrote " << json::serialize(written));
  }
  for (const auto& [name, check] : table()) {
    CAPTURE(name);
    CHECK_MESSAGE(seen.contains(name), "the table names a file tests/wire does not have");
  }
}
