#include "harnessd/protocol/messages.hpp"

#include "harnessd/rpc/error_code.hpp"

#include <boost/json/parse.hpp>
#include <doctest/doctest.h>

using namespace harnessd::protocol;
using harnessd::rpc::ErrorCode;
using harnessd::rpc::RpcError;
namespace json = boost::json;

namespace {
std::string invalid_params_message(auto parse, std::string_view params) {
  try {
    parse(json::parse(params));
  } catch (const RpcError& e) {
    CHECK(e.code() == ErrorCode::invalid_params);
    return e.what();
  }
  FAIL("no error for " << params);
  return {};
}
}  // namespace

TEST_CASE("prompt params: every invalid field is named") {
  auto parse = [](const json::value& v) { return json::value_to<PromptParams>(v); };
  CHECK(invalid_params_message(parse, "[]") == "params must be an object");
  CHECK(invalid_params_message(parse, "{}") == "params.sessionId is required");
  CHECK(invalid_params_message(parse, R"({"sessionId":5})") == "params.sessionId must be a string");
  CHECK(invalid_params_message(parse, R"({"sessionId":""})") == "params.sessionId must not be empty");
  CHECK(invalid_params_message(parse, R"({"sessionId":")" + std::string(257, 'x') + R"("})") ==
        "params.sessionId must be at most 256 bytes");
  CHECK(invalid_params_message(parse, R"({"sessionId":"s"})") == "params.contentBlocks is required");
  CHECK(invalid_params_message(parse, R"({"sessionId":"s","contentBlocks":[]})") ==
        "params.contentBlocks must not be empty");
  CHECK(invalid_params_message(parse, R"({"sessionId":"s","contentBlocks":[{"type":"image"}]})")
            .find("params.contentBlocks[0].type") == 0);
  CHECK(invalid_params_message(parse, R"({"sessionId":"s","contentBlocks":[{"type":"text"}]})") ==
        "params.contentBlocks[0].text must be a string");
}

TEST_CASE("prompt params: valid input keeps only the known fields") {
  PromptParams p = json::value_to<PromptParams>(json::parse(
      R"({"sessionId":"s","contentBlocks":[{"type":"text","text":"hi","extra":1}]})"));
  CHECK(p.session_id == "s");
  CHECK(p.content_blocks.size() == 1);
  CHECK_FALSE(p.content_blocks[0].as_object().contains("extra"));
}

TEST_CASE("initialize params are all optional and validated when present") {
  InitializeParams empty = json::value_to<InitializeParams>(json::value(nullptr));
  CHECK_FALSE(empty.provider.has_value());
  auto parse = [](const json::value& v) { return json::value_to<InitializeParams>(v); };
  CHECK(invalid_params_message(parse, R"({"maxTokens":0})") == "params.maxTokens must be a positive integer");
  CHECK(invalid_params_message(parse, R"({"maxTokens":1.5})") == "params.maxTokens must be an integer");
  CHECK(invalid_params_message(parse, R"({"provider":1})") == "params.provider must be a string");
  CHECK(invalid_params_message(parse, R"({"clientInfo":"x"})") == "params.clientInfo must be an object");
  InitializeParams full = json::value_to<InitializeParams>(json::parse(
      R"({"cwd":"/tmp","provider":"scripted","model":"m","maxTokens":10,"protocolVersion":1,"authToken":"t"})"));
  CHECK(*full.max_tokens == 10);
  CHECK(*full.auth_token == "t");
}

TEST_CASE("session/list, session/events and session/subscribe params: defaults and bounds") {
  auto list = [](const json::value& v) { return json::value_to<ListParams>(v); };
  const ListParams defaults = list(json::value());
  CHECK(defaults.limit == 100);
  CHECK_FALSE(defaults.cursor);
  CHECK(invalid_params_message(list, R"({"limit":0})") == "params.limit must be within 1..1000");
  CHECK(invalid_params_message(list, R"({"limit":1001})") == "params.limit must be within 1..1000");
  CHECK(invalid_params_message(list, R"({"limit":"5"})") == "params.limit must be an integer");
  CHECK(invalid_params_message(list, R"({"cursor":5})") == "params.cursor must be a string");

  auto events = [](const json::value& v) { return json::value_to<EventsParams>(v); };
  const EventsParams e = events(json::parse(R"({"sessionId":"s"})"));
  CHECK(e.after_seq == -1);
  CHECK(e.limit == 200);
  CHECK(invalid_params_message(events, R"({"sessionId":"s","afterSeq":-2})") == "params.afterSeq must be -1 or more");
  CHECK(invalid_params_message(events, R"({"afterSeq":3})") == "params.sessionId is required");

  auto subscribe = [](const json::value& v) { return json::value_to<SubscribeParams>(v); };
  CHECK_FALSE(subscribe(json::parse(R"({"sessionId":"s"})")).after_seq);
  CHECK(subscribe(json::parse(R"({"sessionId":"s","afterSeq":-1})")).after_seq == -1);
}

TEST_CASE("initialize onDisconnect is cancel or continue") {
  auto init = [](const json::value& v) { return json::value_to<InitializeParams>(v); };
  CHECK(init(json::parse("{}")).on_disconnect == OnDisconnect::cancel);
  CHECK(init(json::parse(R"({"onDisconnect":"continue"})")).on_disconnect == OnDisconnect::continue_running);
  CHECK(init(json::parse(R"({"onDisconnect":"cancel"})")).on_disconnect == OnDisconnect::cancel);
  CHECK(invalid_params_message(init, R"({"onDisconnect":"stay"})") ==
        R"(params.onDisconnect must be "cancel" or "continue")");
}

TEST_CASE("a page of events is written with the log's bytes as they are") {
  const EventsResult page{.events = {R"({"seq":3,"x":1.50})", R"({"seq":4})"}, .last_seq = 9, .more = true};
  CHECK(to_json_text(page) == R"({"events":[{"seq":3,"x":1.50},{"seq":4}],"lastSeq":9,"more":true})");
  CHECK(to_json_text(EventsResult{}) == R"({"events":[],"lastSeq":-1,"more":false})");
}
