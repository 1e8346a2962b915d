// Every bad-input row of the protocol (§3) as the codec decodes it.
#include "harnessd/rpc/codec.hpp"
#include "util/json_append.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <doctest/doctest.h>

using namespace harnessd::rpc;
namespace json = boost::json;

namespace {
/// The error a server answers `frame` with.
ErrorResponse expect_error(std::string_view frame) {
  Decoded d = decode_frame(frame);
  REQUIRE_MESSAGE(std::holds_alternative<Invalid>(d), "frame: " << frame);
  CHECK_FALSE(std::get<Invalid>(d).response);
  return std::get<Invalid>(d).error;
}

/// The complaint about a response-shaped frame, which a server drops.
ErrorResponse expect_bad_response(std::string_view frame) {
  Decoded d = decode_frame(frame);
  REQUIRE_MESSAGE(std::holds_alternative<Invalid>(d), "frame: " << frame);
  CHECK(std::get<Invalid>(d).response);
  return std::get<Invalid>(d).error;
}
}  // namespace

TEST_CASE("a well-formed request decodes with its id, method and params") {
  Decoded d = decode_frame(R"({"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"a":1}})");
  REQUIRE(std::holds_alternative<Request>(d));
  const Request& r = std::get<Request>(d);
  CHECK(r.id == json::value(7));
  CHECK(r.method == "session/prompt");
  CHECK(r.params.at("a") == json::value(1));
}

TEST_CASE("jsonrpc may be absent and ids may be strings; params absent reads as null") {
  Decoded d = decode_frame(R"({"id":"abc","method":"initialize"})");
  REQUIRE(std::holds_alternative<Request>(d));
  CHECK(std::get<Request>(d).id == json::value("abc"));
  CHECK(std::get<Request>(d).params.is_null());
}

TEST_CASE("not JSON and invalid UTF-8 are parse errors with a null id") {
  for (std::string_view frame : {std::string_view("garbage"), std::string_view("{\"id\":1,"),
                                 std::string_view("{\"id\":1,\"method\":\"\xff\xfe\"}")}) {
    ErrorResponse e = expect_error(frame);
    CHECK(e.code == ErrorCode::parse_error);
    CHECK(e.id.is_null());
  }
}

TEST_CASE("JSON that is not an object is an invalid request") {
  for (std::string_view frame : {"5", "\"text\"", "null", "true"}) {
    ErrorResponse e = expect_error(frame);
    CHECK(e.code == ErrorCode::invalid_request);
    CHECK(e.id.is_null());
  }
}

TEST_CASE("batches are refused with one error") {
  for (std::string_view frame : {"[]", R"([{"jsonrpc":"2.0","id":1,"method":"initialize"}])"}) {
    ErrorResponse e = expect_error(frame);
    CHECK(e.code == ErrorCode::invalid_request);
    CHECK(e.message == "batch requests are not supported");
  }
}

TEST_CASE("a wrong jsonrpc version is refused, keeping a readable id") {
  ErrorResponse e = expect_error(R"({"jsonrpc":"1.0","id":3,"method":"initialize"})");
  CHECK(e.code == ErrorCode::invalid_request);
  CHECK(e.id == json::value(3));
  CHECK(expect_error(R"({"jsonrpc":2,"id":3,"method":"x"})").code == ErrorCode::invalid_request);
}

TEST_CASE("ids of other types than string or integer are refused with a null id") {
  for (std::string_view frame : {R"({"id":1.5,"method":"x"})", R"({"id":{},"method":"x"})",
                                 R"({"id":true,"method":"x"})", R"({"id":null,"method":"x"})",
                                 R"({"id":[1],"method":"x"})"}) {
    ErrorResponse e = expect_error(frame);
    CHECK(e.code == ErrorCode::invalid_request);
    CHECK(e.id.is_null());
  }
}

TEST_CASE("a method that is not a string is refused with the request id") {
  ErrorResponse e = expect_error(R"({"id":9,"method":42})");
  CHECK(e.code == ErrorCode::invalid_request);
  CHECK(e.id == json::value(9));
  CHECK(expect_error(R"({"id":9})").code == ErrorCode::invalid_request);
  CHECK(expect_error(R"({})").code == ErrorCode::invalid_request);
}

TEST_CASE("responses decode with their id and result or error") {
  Decoded d = decode_frame(R"({"jsonrpc":"2.0","id":1,"result":{"cancelled":true}})");
  REQUIRE(std::holds_alternative<Response>(d));
  CHECK(std::get<Response>(d).id == json::value(1));
  CHECK(std::get<Response>(d).result == json::parse(R"({"cancelled":true})"));

  d = decode_frame(R"({"jsonrpc":"2.0","id":"a","error":{"code":-32001,"message":"busy","data":{"sessionId":"s"}}})");
  REQUIRE(std::holds_alternative<ErrorResponse>(d));
  const ErrorResponse& e = std::get<ErrorResponse>(d);
  CHECK(e.id == json::value("a"));
  CHECK(e.code == ErrorCode::session_busy);
  CHECK(e.message == "busy");
  CHECK(e.data.at("sessionId") == json::value("s"));

  // The answer to an unreadable frame has a null id; codes are any integer.
  d = decode_frame(R"({"jsonrpc":"2.0","id":null,"error":{"code":7,"message":"odd"}})");
  REQUIRE(std::holds_alternative<ErrorResponse>(d));
  CHECK(std::get<ErrorResponse>(d).id.is_null());
  CHECK(static_cast<int>(std::get<ErrorResponse>(d).code) == 7);
  CHECK(std::get<ErrorResponse>(d).data.is_null());
}

TEST_CASE("malformed responses are invalid, marked as responses, with the id when readable") {
  ErrorResponse e = expect_bad_response(R"({"jsonrpc":"2.0","id":1,"error":{"code":1}})");
  CHECK(e.id == json::value(1));
  CHECK(e.message == "Invalid Response: error must be an object with an integer code and a string message");
  e = expect_bad_response(R"({"jsonrpc":"2.0","id":2,"result":{},"error":{"code":1,"message":"x"}})");
  CHECK(e.id == json::value(2));
  CHECK(e.message == "Invalid Response: a response has either result or error, not both");
  CHECK(expect_bad_response(R"({"id":3,"error":"boom"})").id == json::value(3));
  CHECK(expect_bad_response(R"({"id":4,"error":{"code":1.5,"message":"x"}})").id == json::value(4));
  CHECK(expect_bad_response(R"({"jsonrpc":"1.0","id":5,"result":1})").message ==
        "Invalid Response: jsonrpc must be \"2.0\"");
  CHECK(expect_bad_response(R"({"id":[1],"result":1})").id.is_null());
}

TEST_CASE("notifications decode with their method and params") {
  Decoded d = decode_frame(R"({"jsonrpc":"2.0","method":"note","params":{"a":1}})");
  REQUIRE(std::holds_alternative<Notification>(d));
  CHECK(std::get<Notification>(d).method == "note");
  CHECK(std::get<Notification>(d).params.at("a") == json::value(1));
  d = decode_frame(R"({"method":"note"})");
  REQUIRE(std::holds_alternative<Notification>(d));
  CHECK(std::get<Notification>(d).params.is_null());
}

TEST_CASE("an invalid Request object without id is answered -32600 with a null id (JSON-RPC 2.0 §5)") {
  for (const char* frame : {R"({"jsonrpc":"2.0","method":1,"params":"bar"})", R"({"method":null})",
                            R"({"jsonrpc":"2.0","method":{}})"}) {
    CAPTURE(frame);
    ErrorResponse e = expect_error(frame);
    CHECK(e.code == ErrorCode::invalid_request);
    CHECK(e.id.is_null());
    CHECK(e.message == "Invalid Request: method must be a string");
  }
  for (const char* frame : {R"({"jsonrpc":"3.0","method":"x"})", R"({"jsonrpc":2,"method":"x"})"}) {
    CAPTURE(frame);
    ErrorResponse e = expect_error(frame);
    CHECK(e.code == ErrorCode::invalid_request);
    CHECK(e.id.is_null());
    CHECK(e.message == "Invalid Request: jsonrpc must be \"2.0\"");
  }
}

TEST_CASE("encoded frames are compact, keep non-ASCII raw and never contain a newline") {
  const std::string result = encode_result(json::value(1), json::object{{"text", "h\xC3\xA9\nllo"}});
  CHECK(result == "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"text\":\"h\xC3\xA9\\nllo\"}}");
  const std::string error = encode_error({json::value("x"), ErrorCode::session_busy, "busy", json::object{{"sessionId", "s"}}});
  CHECK(json::parse(error).at("error").at("code") == json::value(-32001));
  CHECK(json::parse(error).at("error").at("data").at("sessionId") == json::value("s"));
  CHECK(encode_error({nullptr, ErrorCode::parse_error, "bad", nullptr}).find("\"data\"") == std::string::npos);
  const std::string note = encode_session_event("a\"b", R"({"type":"turn/start","seq":0})");
  const json::value parsed = json::parse(note);
  CHECK(parsed.at("method") == json::value("session.event"));
  CHECK(parsed.at("params").at("sessionId") == json::value("a\"b"));
  CHECK(parsed.at("params").at("event").at("seq") == json::value(0));
}

TEST_CASE("append_json_string escapes exactly as Boost.JSON's serializer") {
  std::string all_bytes;
  for (int c = 0; c < 256; ++c) all_bytes += static_cast<char>(c);
  for (const std::string_view text :
       {std::string_view(), std::string_view("plain"), std::string_view("q\"b\\s/\b\f\n\r\t\x01\x1f\x7f"),
        std::string_view("h\xC3\xA9llo \xF0\x9F\x98\x80"), std::string_view(all_bytes)}) {
    // Appends: what is already in `out` stays.
    std::string out = "[";
    harnessd::util::append_json_string(out, text);
    const std::string expected = json::serialize(json::string_view(text.data(), text.size()));
    CHECK(out.front() == '[');
    CHECK(std::string_view(out).substr(1) == expected);
  }
  std::string number;
  harnessd::util::append_json_int(number, -9007199254740993);
  CHECK(number == "-9007199254740993");
}
