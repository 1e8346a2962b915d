// Decoding follows the bad-input table of docs/protocol.md §3 row by row.
#include "harnessd/rpc/codec.hpp"

#include "util/json_limits.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace harnessd::rpc {
namespace json = boost::json;

namespace {

bool is_valid_id(const json::value& id) {
  return id.is_string() || id.is_int64() || id.is_uint64();
}

ErrorReply invalid(json::value id, std::string message) {
  return ErrorReply{std::move(id), ErrorCode::invalid_request, std::move(message), nullptr};
}

}  // namespace

Decoded decode_frame(std::string_view frame) {
  json::error_code ec;
  // The input nesting limit keeps every accepted frame loadable from the
  // session log later (util/json_limits.hpp).
  json::value doc = json::parse(frame, ec, {}, util::input_parse_options());
  if (ec) {
    return ErrorReply{nullptr, ErrorCode::parse_error, "Parse error: " + ec.message(), nullptr};
  }
  if (doc.is_array()) return invalid(nullptr, "batch requests are not supported");
  if (!doc.is_object()) return invalid(nullptr, "Invalid Request: a message must be a JSON object");

  json::object& obj = doc.get_object();
  const json::value* id = obj.if_contains("id");
  const json::value* method = obj.if_contains("method");

  // Directional protocol: responses and notifications from a client are
  // dropped, never matched against anything.
  if (method == nullptr && id != nullptr && (obj.contains("result") || obj.contains("error"))) {
    return Ignored{};
  }

  const json::value* version = obj.if_contains("jsonrpc");
  const bool bad_version = version != nullptr && (!version->is_string() || version->get_string() != "2.0");
  if (method != nullptr && id == nullptr) {
    // A valid notification goes unanswered, but an invalid Request object
    // does not: JSON-RPC 2.0 §5 answers it with -32600 and a null id.
    if (bad_version) return invalid(nullptr, "Invalid Request: jsonrpc must be \"2.0\"");
    if (!method->is_string()) return invalid(nullptr, "Invalid Request: method must be a string");
    return Ignored{};
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

std::string encode_error(const ErrorReply& error) {
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
