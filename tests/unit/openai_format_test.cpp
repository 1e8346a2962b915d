// The OpenAI-compatible format: request bodies, streamed chunks, and the
// checks that keep hostile provider data out of clients and session logs.
#include "llm/openai_format.hpp"

#include "util/json_limits.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

using namespace harnessd::llm;
namespace json = boost::json;

TEST_CASE("the request body carries the system prompt, history, tools and limits") {
  std::vector<ChatMessage> history{
      {.role = ChatMessage::Role::user, .text = "first"},
      {.role = ChatMessage::Role::assistant, .text = "", .reasoning = "hidden",
       .tool_calls = {{"call_1", "subagent", "{\"prompt\":\"p\"}"}, {"call_2", "subagent", "{}"}}},
      {.role = ChatMessage::Role::tool, .text = "child said", .tool_call_id = "call_1"},
      {.role = ChatMessage::Role::assistant, .text = "done"},
      {.role = ChatMessage::Role::user, .text = "second"},
      {.role = ChatMessage::Role::user, .text = "third"},
  };
  ModelRequest request;
  request.model = "deepseek-chat";
  request.max_tokens = 100;
  request.messages = &history;
  request.tools = std::make_shared<const std::vector<ToolSpec>>(
      std::vector<ToolSpec>{ToolSpec{"subagent", "delegate", json::object{{"type", "object"}}}});
  request.system_prompt = "be brief";
  request.instructions = "<workspace-instructions>rules</workspace-instructions>";
  const json::object body = openai::build_request_body(request);

  CHECK(body.at("model") == "deepseek-chat");
  CHECK(body.at("stream") == true);
  CHECK(body.at("stream_options").at("include_usage") == true);
  CHECK(body.at("max_tokens") == 100);
  CHECK(body.at("tools").at(0).at("function").at("name") == "subagent");
  const json::array& messages = body.at("messages").as_array();
  REQUIRE(messages.size() == 6);
  CHECK(messages[0].at("role") == "system");
  CHECK(messages[0].at("content") == "be brief");
  // The workspace instructions go ahead of the first user message, merged with it.
  CHECK(messages[1].at("content") == "<workspace-instructions>rules</workspace-instructions>\n\nfirst");
  // A tool-calling step's reasoning goes back (thinking mode needs it); the
  // unanswered call_2 is dropped.
  CHECK(messages[2].at("reasoning_content") == "hidden");
  CHECK(messages[2].at("content").is_null());
  REQUIRE(messages[2].at("tool_calls").as_array().size() == 1);
  CHECK(messages[2].at("tool_calls").at(0).at("function").at("arguments") == "{\"prompt\":\"p\"}");
  CHECK(messages[3].at("role") == "tool");
  CHECK(messages[3].at("tool_call_id") == "call_1");
  CHECK(messages[4].at("content") == "done");
  CHECK(messages[5].at("content") == "second\n\nthird");  // consecutive user messages merged
}

namespace {
/// The chunks as their wire objects.
std::vector<json::object> wire(const std::vector<harnessd::protocol::Chunk>& chunks) {
  std::vector<json::object> out;
  for (const auto& chunk : chunks) out.push_back(json::value_from(chunk).as_object());
  return out;
}
}  // namespace

TEST_CASE("streamed chunks become protocol chunks with blocks, usage and finish") {
  openai::StreamDecoder decoder;
  std::vector<harnessd::protocol::Chunk> typed;
  auto& chunks = typed;
  decoder.on_data(R"({"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"think"}}]})", chunks);
  decoder.on_data(R"({"choices":[{"index":0,"delta":{"content":"Hel"}}]})", chunks);
  decoder.on_data(R"({"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]})", chunks);
  decoder.on_data(R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}})", chunks);
  CHECK_FALSE(decoder.on_data("[DONE]", chunks));
  decoder.finish(typed);
  const std::vector<json::object> objects = wire(typed);
  std::vector<std::string> types;
  for (const auto& c : objects) types.emplace_back(c.at("type").as_string());
  CHECK(types == std::vector<std::string>{"block-start", "reasoning-delta", "block-start", "text-delta",
                                          "text-delta", "block-end", "block-end", "usage", "finish"});
  CHECK(objects[2].at("blockType") == "text");
  CHECK(objects[3].at("index") == 1);
  CHECK(objects[7].at("usage").at("outputTokens") == 7);
  CHECK(objects[8].at("reason") == "stop");
}

TEST_CASE("tool call deltas keep id and name from the first piece and stream arguments") {
  openai::StreamDecoder decoder;
  std::vector<harnessd::protocol::Chunk> typed;
  auto& chunks = typed;
  decoder.on_data(R"({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"subagent","arguments":""}}]}}]})", chunks);
  decoder.on_data(R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"pro"}}]}}]})", chunks);
  decoder.on_data(R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"mpt\":1}"}}]},"finish_reason":"tool_calls"}]})", chunks);
  decoder.on_data("[DONE]", chunks);
  decoder.finish(typed);
  const std::vector<json::object> objects = wire(typed);
  CHECK(objects[0].at("blockType") == "tool-call");
  CHECK(objects[1].at("id") == "c1");
  CHECK(objects[1].at("name") == "subagent");
  CHECK_FALSE(objects[2].contains("id"));
  CHECK(objects[2].at("argumentsDelta") == "{\"pro");
  CHECK(objects.back().at("reason") == "tool-calls");
  CHECK(decoder.finish_reason() == "tool_calls");
}

TEST_CASE("finish reasons map; unknown ones are errors; malformed chunks throw") {
  CHECK(openai::map_finish_reason("length") == FinishReason::length);
  CHECK_FALSE(openai::map_finish_reason("content_filter").has_value());
  openai::StreamDecoder decoder;
  std::vector<harnessd::protocol::Chunk> chunks;
  CHECK_THROWS(decoder.on_data("{not json", chunks));
  CHECK_THROWS(decoder.on_data("[1,2]", chunks));
}

TEST_CASE("non-finite doubles become null at any depth; finite numbers stay") {
  json::value v = json::parse(R"({"a":1e400,"b":[-1e400,1.5,{"c":1e999}],"d":7,"e":"1e400"})");
  CHECK(std::isinf(v.at("a").as_double()));
  v.as_object()["nan"] = std::numeric_limits<double>::quiet_NaN();
  CHECK(openai::replace_non_finite(v) == 4);
  CHECK(json::serialize(v) == R"({"a":null,"b":[null,1.5E0,{"c":null}],"d":7,"e":"1e400","nan":null})");
  CHECK(openai::replace_non_finite(v) == 0);

  json::value scalar = std::numeric_limits<double>::infinity();
  CHECK(openai::replace_non_finite(scalar) == 1);
  CHECK(scalar.is_null());

  // Deeper than any parser limit: the walk does not recurse.
  json::value deep = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 1000; ++i) {
    json::array wrapper;
    wrapper.emplace_back(std::move(deep));
    deep = std::move(wrapper);
  }
  CHECK(openai::replace_non_finite(deep) == 1);
  CHECK(json::serialize(deep).find("Infinity") == std::string::npos);
}

namespace {
std::vector<json::object> decode_usage(std::string_view usage_json) {
  openai::StreamDecoder decoder;
  std::vector<harnessd::protocol::Chunk> chunks;
  decoder.on_data(R"({"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]})", chunks);
  decoder.on_data(std::string(R"({"choices":[],"usage":)") + std::string(usage_json) + "}", chunks);
  decoder.on_data("[DONE]", chunks);
  decoder.finish(chunks);
  return wire(chunks);
}

const json::object* usage_of(const std::vector<json::object>& chunks) {
  for (const auto& c : chunks) {
    if (c.at("type") == "usage") return &c.at("usage").as_object();
  }
  return nullptr;
}
}  // namespace

TEST_CASE("a huge usage number is left out, never serialized as Infinity") {
  const auto chunks = decode_usage(R"({"prompt_tokens":1e400,"completion_tokens":3,"total_tokens":-1e400})");
  const json::object* usage = usage_of(chunks);
  REQUIRE(usage != nullptr);
  CHECK(*usage == json::object{{"outputTokens", 3}});
  for (const auto& c : chunks) CHECK(json::serialize(c).find("Infinity") == std::string::npos);
}

TEST_CASE("usage fields that are not numbers are left out; no field left means no usage chunk") {
  const auto chunks = decode_usage(R"({"prompt_tokens":[[[[1]]]],"completion_tokens":"5","total_tokens":null})");
  CHECK(usage_of(chunks) == nullptr);
  CHECK(chunks.back().at("type") == "finish");
  CHECK(chunks.back().at("reason") == "stop");

  const auto fractional = decode_usage(R"({"prompt_tokens":2.5,"completion_tokens_details":{"reasoning_tokens":4}})");
  const json::object* usage = usage_of(fractional);
  REQUIRE(usage != nullptr);
  CHECK(usage->at("inputTokens") == 2.5);
  CHECK(usage->at("reasoningTokens") == 4);
}

TEST_CASE("chunks nest at most input_max_depth levels") {
  // The chunk object and its usage object are two levels; n arrays more.
  const auto usage_nested = [](std::size_t arrays) {
    return std::string(R"({"choices":[],"usage":{"prompt_tokens":)") + std::string(arrays, '[') + "1" +
           std::string(arrays, ']') + "}}";
  };
  const std::size_t fits = harnessd::util::input_max_depth - 2;
  openai::StreamDecoder decoder;
  std::vector<harnessd::protocol::Chunk> chunks;
  CHECK(decoder.on_data(usage_nested(fits), chunks));
  try {
    decoder.on_data(usage_nested(fits + 1), chunks);
    FAIL("a chunk deeper than the input limit was accepted");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("deeper") != std::string::npos);
  }
  decoder.on_data("[DONE]", chunks);
  decoder.finish(chunks);
  CHECK(usage_of(wire(chunks)) == nullptr);
}
