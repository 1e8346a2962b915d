#include "harnessd/llm/openai_format.hpp"

#include <boost/json/serialize.hpp>
#include <doctest/doctest.h>

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
  request.tools.push_back(ToolSpec{"subagent", "delegate", json::object{{"type", "object"}}});
  const json::object body = openai::build_request_body(request, "be brief");

  CHECK(body.at("model") == "deepseek-chat");
  CHECK(body.at("stream") == true);
  CHECK(body.at("stream_options").at("include_usage") == true);
  CHECK(body.at("max_tokens") == 100);
  CHECK(body.at("tools").at(0).at("function").at("name") == "subagent");
  const json::array& messages = body.at("messages").as_array();
  REQUIRE(messages.size() == 6);
  CHECK(messages[0].at("role") == "system");
  CHECK(messages[1].at("content") == "first");
  // Reasoning is never sent back; the unanswered call_2 is dropped.
  CHECK_FALSE(messages[2].as_object().contains("reasoning_content"));
  CHECK(messages[2].at("content").is_null());
  REQUIRE(messages[2].at("tool_calls").as_array().size() == 1);
  CHECK(messages[2].at("tool_calls").at(0).at("function").at("arguments") == "{\"prompt\":\"p\"}");
  CHECK(messages[3].at("role") == "tool");
  CHECK(messages[3].at("tool_call_id") == "call_1");
  CHECK(messages[4].at("content") == "done");
  CHECK(messages[5].at("content") == "second\n\nthird");  // consecutive user messages merged
}

TEST_CASE("streamed chunks become protocol chunks with blocks, usage and finish") {
  openai::StreamDecoder decoder;
  std::vector<json::object> chunks;
  decoder.on_data(R"({"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"think"}}]})", chunks);
  decoder.on_data(R"({"choices":[{"index":0,"delta":{"content":"Hel"}}]})", chunks);
  decoder.on_data(R"({"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]})", chunks);
  decoder.on_data(R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}})", chunks);
  CHECK_FALSE(decoder.on_data("[DONE]", chunks));
  decoder.finish(chunks);
  std::vector<std::string> types;
  for (const auto& c : chunks) types.emplace_back(c.at("type").as_string());
  CHECK(types == std::vector<std::string>{"block-start", "reasoning-delta", "block-start", "text-delta",
                                          "text-delta", "block-end", "block-end", "usage", "finish"});
  CHECK(chunks[2].at("blockType") == "text");
  CHECK(chunks[3].at("index") == 1);
  CHECK(chunks[7].at("usage").at("outputTokens") == 7);
  CHECK(chunks[8].at("reason") == "stop");
}

TEST_CASE("tool call deltas keep id and name from the first piece and stream arguments") {
  openai::StreamDecoder decoder;
  std::vector<json::object> chunks;
  decoder.on_data(R"({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"subagent","arguments":""}}]}}]})", chunks);
  decoder.on_data(R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"pro"}}]}}]})", chunks);
  decoder.on_data(R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"mpt\":1}"}}]},"finish_reason":"tool_calls"}]})", chunks);
  decoder.on_data("[DONE]", chunks);
  decoder.finish(chunks);
  CHECK(chunks[0].at("blockType") == "tool-call");
  CHECK(chunks[1].at("id") == "c1");
  CHECK(chunks[1].at("name") == "subagent");
  CHECK_FALSE(chunks[2].contains("id"));
  CHECK(chunks[2].at("argumentsDelta") == "{\"pro");
  CHECK(chunks.back().at("reason") == "tool-calls");
  CHECK(decoder.finish_reason() == "tool_calls");
}

TEST_CASE("finish reasons map; unknown ones are errors; malformed chunks throw") {
  CHECK(openai::map_finish_reason("length") == FinishReason::length);
  CHECK_FALSE(openai::map_finish_reason("content_filter").has_value());
  openai::StreamDecoder decoder;
  std::vector<json::object> chunks;
  CHECK_THROWS(decoder.on_data("{not json", chunks));
  CHECK_THROWS(decoder.on_data("[1,2]", chunks));
}
