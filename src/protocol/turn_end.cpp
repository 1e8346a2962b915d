#include "harnessd/protocol/turn_end.hpp"

#include "protocol/json_read.hpp"

#include <boost/json/object.hpp>

namespace harnessd::protocol {
namespace json = boost::json;

std::string_view to_string(TurnStatus status) {
  switch (status) {
    case TurnStatus::ok:
      return "ok";
    case TurnStatus::aborted:
      return "aborted";
    case TurnStatus::error:
      return "error";
  }
  return "error";
}

std::string_view to_string(TurnEndReason::Kind kind) {
  using Kind = TurnEndReason::Kind;
  switch (kind) {
    case Kind::completed:
      return "completed";
    case Kind::aborted:
      return "aborted";
    case Kind::max_tokens:
      return "max-tokens";
    case Kind::error:
      return "error";
    case Kind::interrupted:
      return "interrupted";
  }
  return "error";
}

std::optional<TurnStatus> parse_turn_status(std::string_view text) {
  for (const TurnStatus status : {TurnStatus::ok, TurnStatus::error, TurnStatus::aborted}) {
    if (to_string(status) == text) return status;
  }
  return std::nullopt;
}

std::optional<TurnEndReason::Kind> parse_turn_end_kind(std::string_view text) {
  using Kind = TurnEndReason::Kind;
  for (const Kind kind : {Kind::completed, Kind::aborted, Kind::max_tokens, Kind::error, Kind::interrupted}) {
    if (to_string(kind) == text) return kind;
  }
  return std::nullopt;
}

TurnStatus status_for(const TurnEndReason& reason, bool max_tokens_as_success) {
  using Kind = TurnEndReason::Kind;
  switch (reason.kind) {
    case Kind::completed:
      return TurnStatus::ok;
    case Kind::aborted:
      return TurnStatus::aborted;
    case Kind::max_tokens:
      return max_tokens_as_success ? TurnStatus::ok : TurnStatus::error;
    case Kind::error:
    case Kind::interrupted:
      return TurnStatus::error;
  }
  return TurnStatus::error;
}

void tag_invoke(json::value_from_tag, json::value& out, const TurnEndReason& reason) {
  json::object object;
  object["kind"] = to_string(reason.kind);
  if (reason.kind == TurnEndReason::Kind::aborted) object["reason"] = reason.reason;
  if (reason.kind == TurnEndReason::Kind::error) {
    object["message"] = reason.message;
    if (!reason.code.empty()) object["code"] = reason.code;
    if (reason.step) object["step"] = *reason.step;
  }
  out = std::move(object);
}

TurnEndReason tag_invoke(json::value_to_tag<TurnEndReason>, const json::value& value) {
  const json::object& obj = read::object(value, "reason");
  const std::optional<TurnEndReason::Kind> kind = parse_turn_end_kind(read::string(obj, "kind"));
  if (!kind) read::fail("kind", "is not a known TurnEndReason kind");
  TurnEndReason reason{.kind = *kind};
  if (*kind == TurnEndReason::Kind::aborted) reason.reason = read::string(obj, "reason");
  if (*kind == TurnEndReason::Kind::error) {
    reason.message = read::string(obj, "message");
    reason.code = read::optional_string(obj, "code").value_or("");
    if (const std::optional<std::int64_t> step = read::optional_integer(obj, "step")) {
      if (*step < 0 || *step > INT32_MAX) read::fail("step", "is out of range");
      reason.step = static_cast<int>(*step);
    }
  }
  return reason;
}

}  // namespace harnessd::protocol
