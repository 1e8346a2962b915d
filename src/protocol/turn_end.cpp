#include "harnessd/protocol/turn_end.hpp"

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

}  // namespace harnessd::protocol
