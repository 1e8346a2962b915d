// Decoding follows the bad-input table of docs/protocol.md §3 row by row.
#include "harnessd/rpc/codec.hpp"

#include "util/json_limits.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cstdint>

namespace harnessd::rpc {
namespace json = boost::json;

namespace {

bool is_valid_id(const json::value& id) {
  return id.is_string() || id.is_int64() || id.is_uint64();
}

Invalid invalid(json::value id, std::string message) {
  return Invalid{ErrorResponse{std::move(id), ErrorCode::invalid_request, std::move(message), nullptr}};
}

Invalid invalid_response(json::value id, std::string message) {
  Invalid out = invalid(std::move(id), "Invalid Response: " + std::move(message));
  out.response = true;
  return out;
}

/// A frame with `id` and `result` or `error` and no `method`.
Decoded decode_response(json::object& obj, bool bad_version) {
  json::value& id = obj.at("id");
  json::value reply_id = is_valid_id(id) ? id : json::value(nullptr);
  if (bad_version) return invalid_response(std::move(reply_id), "jsonrpc must be \"2.0\"");
  // null: the answer to a frame whose id could not be read.
  if (!id.is_null() && !is_valid_id(id)) return invalid_response(nullptr, "id must be a string, an integer or null");
  json::value* result = obj.if_contains("result");
  json::value* error = obj.if_contains("error");
  if (result != nullptr && error != nullptr) {
    return invalid_response(std::move(reply_id), "a response has either result or error, not both");
  }
  if (result != nullptr) return Response{std::move(id), std::move(*result)};

  json::object* err = error->if_object();
  const json::value* code = err != nullptr ? err->if_contains("code") : nullptr;
  const json::value* message = err != nullptr ? err->if_contains("message") : nullptr;
  if (code == nullptr || !code->is_int64() || code->get_int64() < INT32_MIN || code->get_int64() > INT32_MAX ||
      message == nullptr || !message->is_string()) {
    return invalid_response(std::move(reply_id), "error must be an object with an integer code and a string message");
  }
  ErrorResponse out{std::move(id), static_cast<ErrorCode>(code->get_int64()), std::string(message->get_string()),
                    nullptr};
  if (json::value* data = err->if_contains("data")) out.data = std::move(*data);
  return out;
}

}  // namespace

Decoded decode_frame(std::string_view frame) {
  json::error_code ec;
  // The input nesting limit keeps every accepted frame loadable from the
  // session log later (util/json_limits.hpp).
  json::value doc = json::parse(frame, ec, {}, util::input_parse_options());
  if (ec) {
    return Invalid{ErrorResponse{nullptr, ErrorCode::parse_error, "Parse error: " + ec.message(), nullptr}};
  }
  if (doc.is_array()) return invalid(nullptr, "batch requests are not supported");
  if (!doc.is_object()) return invalid(nullptr, "Invalid Request: a message must be a JSON object");

  json::object& obj = doc.get_object();
  const json::value* id = obj.if_contains("id");
  json::value* method = obj.if_contains("method");
  const json::value* version = obj.if_contains("jsonrpc");
  const bool bad_version = version != nullptr && (!version->is_string() || version->get_string() != "2.0");

  if (method == nullptr && id != nullptr && (obj.contains("result") || obj.contains("error"))) {
    return decode_response(obj, bad_version);
  }

  if (method != nullptr && id == nullptr) {
    // A notification; an invalid one is an invalid Request object, which
    // JSON-RPC 2.0 §5 answers with -32600 and a null id.
    if (bad_version) return invalid(nullptr, "Invalid Request: jsonrpc must be \"2.0\"");
    if (!method->is_string()) return invalid(nullptr, "Invalid Request: method must be a string");
    Notification note{std::string(method->get_string()), nullptr};
    if (json::value* params = obj.if_contains("params")) note.params = std::move(*params);
    return note;
  }

  json::value reply_id = (id != nullptr && is_valid_id(*id)) ? *id : json::value(nullptr);
  if (bad_version) return invalid(std::move(reply_id), "Invalid Request: jsonrpc must be \"2.0\"");
  if (id == nullptr) return invalid(nullptr, "Invalid Request: missing method");
  if (!is_valid_id(*id)) {
    return invalid(nullptr, "Invalid Request: id must be a string or an integer");
  }
  if (method == nullptr) return invalid(std::move(reply_id), "Invalid Request: missing method");
  if (!method->is_string()) {
    return invalid(std::move(reply_id), "Invalid Request: method must be a string");
  }

  Request request;
  request.id = *id;
  request.method = std::string(method->get_string());
  if (json::value* params = obj.if_contains("params")) request.params = std::move(*params);
  return request;
}

std::string encode_result(const json::value& id, const json::value& result) {
  return encode_result_json(id, json::serialize(result));
}

std::string encode_result_json(const json::value& id, std::string_view result_json) {
  std::string out = R"({"jsonrpc":"2.0","id":)";
  out += json::serialize(id);
  out += R"(,"result":)";
  out += result_json;
  out += '}';
  return out;
}

std::string encode_error(const ErrorResponse& error) {
  json::object err;
  err["code"] = static_cast<int>(error.code);
  err["message"] = error.message;
  if (!error.data.is_null()) err["data"] = error.data;
  std::string out = R"({"jsonrpc":"2.0","id":)";
  out += json::serialize(error.id);
  out += R"(,"error":)";
  out += json::serialize(err);
  out += '}';
  return out;
}

std::string encode_notification(std::string_view method, const json::value& params) {
  std::string out = R"({"jsonrpc":"2.0","method":)";
  out += json::serialize(json::string_view(method.data(), method.size()));
  out += R"(,"params":)";
  out += json::serialize(params);
  out += '}';
  return out;
}

EventEnvelope session_event_envelope(std::string_view session_id) {
  EventEnvelope envelope;
  envelope.before = R"({"jsonrpc":"2.0","method":"session.event","params":{"sessionId":)";
  envelope.before += json::serialize(json::string_view(session_id.data(), session_id.size()));
  envelope.before += R"(,"event":)";
  envelope.after = "}}";
  return envelope;
}

std::string encode_session_event(std::string_view session_id, std::string_view event_json) {
  const EventEnvelope envelope = session_event_envelope(session_id);
  std::string out;
  out.reserve(envelope.before.size() + event_json.size() + envelope.after.size());
  out += envelope.before;
  out += event_json;
  out += envelope.after;
  return out;
}

}  // namespace harnessd::rpc
