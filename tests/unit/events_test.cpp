// Each event's data as the log and the wire carry it: keys in the
// documented order, byte for byte.
#include "harnessd/protocol/events.hpp"

#include <boost/json/serialize.hpp>
#include <doctest/doctest.h>

using namespace harnessd::protocol;
namespace json = boost::json;

namespace {
template <class Event>
std::string data_of(const Event& event) {
  return json::serialize(json::value_from(event));
}
}  // namespace

TEST_CASE("turn and step events") {
  CHECK(data_of(TurnStart{3}) == R"({"turn":3,"trigger":{"kind":"message","source":{"kind":"user"}}})");
  CHECK(data_of(UserMessage{json::array{json::object{{"type", "text"}, {"text", "hi"}}}}) ==
        R"({"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}})");
  CHECK(data_of(StepEvent::start(3, 1)) == R"({"turn":3,"step":1})");
  CHECK(data_of(StepEvent::end(3, 1)) == R"({"turn":3,"step":1})");
  CHECK(data_of(TurnEnd{3, TurnEndReason::aborted("cancelled")}) ==
        R"({"turn":3,"reason":{"kind":"aborted","reason":"cancelled"}})");
  CHECK(TurnStart::type == "turn/start");
  CHECK(TurnEnd::type == "turn/end");
}

TEST_CASE("assistant messages list text, reasoning and tool-call blocks in order, usage last") {
  AssistantMessage message{.turn = 0,
                           .step = 2,
                           .content = {ContentBlock{.type = BlockType::reasoning, .text = "hm"},
                                       ContentBlock{.type = BlockType::text, .text = "a\"b"},
                                       ContentBlock{.type = BlockType::tool_call,
                                                    .text = {},
                                                    .id = "c1",
                                                    .name = "subagent",
                                                    .arguments = "{}"}},
                           .provider = "scripted",
                           .model = "scripted-1",
                           .usage = json::object{{"outputTokens", 7}}};
  CHECK(data_of(message) ==
        R"({"turn":0,"step":2,"content":[{"type":"reasoning","text":"hm"},{"type":"text","text":"a\"b"},)"
        R"({"type":"tool-call","id":"c1","name":"subagent","arguments":"{}"}],)"
        R"("provenance":{"provider":"scripted","model":"scripted-1"},"usage":{"outputTokens":7}})");
  message.usage.reset();
  CHECK(data_of(message).ends_with(R"("provenance":{"provider":"scripted","model":"scripted-1"}})"));
}

TEST_CASE("tool calls and results") {
  CHECK(data_of(ToolCallEvent{1, 0, "c1", "subagent", R"({"prompt":"x"})"}) ==
        R"({"turn":1,"step":0,"callId":"c1","name":"subagent","arguments":"{\"prompt\":\"x\"}"})");
  CHECK(data_of(ToolResult{1, 0, "c1", "done", true}) ==
        R"({"turn":1,"step":0,"callId":"c1","content":[{"type":"text","text":"done"}],"isError":true})");
}
