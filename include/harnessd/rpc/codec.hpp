// Pure JSON-RPC codec: one frame of bytes in, a typed message out; typed
// responses and notifications in, compact UTF-8 JSON out. Never touches I/O,
// so every bad-input row of the protocol is unit tested byte by byte.
#pragma once

#include "harnessd/rpc/error_code.hpp"

#include <boost/json/value.hpp>

#include <string>
#include <string_view>
#include <variant>

namespace harnessd::rpc {

/// A request the daemon will execute. `id` is a string or an integer;
/// `params` is null when the frame carried none.
struct Request {
  boost::json::value id;
  std::string method;
  boost::json::value params;
};

/// A frame the daemon must not act on: a client's response or notification.
/// The protocol is directional, so these are dropped without an answer.
struct Ignored {};

/// A frame that is answered with an error response and nothing else.
/// `id` is null when no valid id could be read from the frame.
struct ErrorReply {
  boost::json::value id;
  ErrorCode code;
  std::string message;
  boost::json::value data;
};

using Decoded = std::variant<Request, Ignored, ErrorReply>;

/// Decodes one frame (one NDJSON line or one WebSocket text message).
Decoded decode_frame(std::string_view frame);

/// `{"jsonrpc":"2.0","id":ID,"result":RESULT}`
std::string encode_result(const boost::json::value& id, const boost::json::value& result);
/// The same with RESULT already serialized (valid JSON, copied as it is).
std::string encode_result_json(const boost::json::value& id, std::string_view result_json);

/// `{"jsonrpc":"2.0","id":ID,"error":{"code","message","data"?}}`
std::string encode_error(const ErrorReply& error);

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
