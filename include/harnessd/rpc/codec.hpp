// Pure JSON-RPC codec: one frame of bytes in, a typed message out (requests,
// responses, error responses and notifications: both ends use it); typed
// messages in, compact UTF-8 JSON out. Never touches I/O,
// so every bad-input row of the protocol is unit tested byte by byte.
#pragma once

#include "harnessd/rpc/error_code.hpp"

#include <boost/json/value.hpp>

#include <string>
#include <string_view>
#include <variant>

namespace harnessd::rpc {

/// A request (`id` and `method`). `id` is a string or an integer; `params`
/// is null when the frame carried none.
struct Request {
  boost::json::value id;
  std::string method;
  boost::json::value params;
};

/// A successful response (`id` and `result`, no `method`).
struct Response {
  boost::json::value id;
  boost::json::value result;
};

/// An error response (`id` and `error`, no `method`). `id` is null when the
/// daemon could not read one from the frame it answers. `code` may be one
/// ErrorCode does not name: it holds whatever integer the peer sent.
struct ErrorResponse {
  boost::json::value id;
  ErrorCode code;
  std::string message;
  boost::json::value data;
};

/// A notification (`method`, no `id`). `params` is null when absent.
struct Notification {
  std::string method;
  boost::json::value params;
};

/// A frame that is none of the above. `error` is what a server answers
/// (docs/protocol.md §3), with the frame's id when it has a valid one.
/// `response` marks a frame shaped as a response (`id` and `result` or
/// `error`, no `method`) whose content is wrong: a server drops it without
/// an answer, as it drops every response; a client fails the request that
/// id names.
struct Invalid {
  ErrorResponse error;
  bool response = false;
};

using Decoded = std::variant<Request, Response, ErrorResponse, Notification, Invalid>;

/// Decodes one frame (one NDJSON line or one WebSocket text message) of
/// either direction. The daemon executes Requests, answers Invalid frames
/// that are not responses, and drops the rest; a client matches Responses
/// and ErrorResponses to its requests and hands Notifications on.
Decoded decode_frame(std::string_view frame);

/// `{"jsonrpc":"2.0","id":ID,"result":RESULT}`
std::string encode_result(const boost::json::value& id, const boost::json::value& result);
/// The same with RESULT already serialized (valid JSON, copied as it is).
std::string encode_result_json(const boost::json::value& id, std::string_view result_json);

/// `{"jsonrpc":"2.0","id":ID,"error":{"code","message","data"?}}`
std::string encode_error(const ErrorResponse& error);

/// `{"jsonrpc":"2.0","method":METHOD,"params":PARAMS}`
std::string encode_notification(std::string_view method, const boost::json::value& params);

/// `session.event` built around an already serialized event, so the event is
/// serialized once for both the session log and every notification.
std::string encode_session_event(std::string_view session_id, std::string_view event_json);

/// The bytes before and after an event in its session.event notification:
/// `before + EVENT + after` is encode_session_event(session_id, EVENT).
struct EventEnvelope {
  std::string before;
  std::string after;
};
EventEnvelope session_event_envelope(std::string_view session_id);

}  // namespace harnessd::rpc
