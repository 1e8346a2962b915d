// How a turn ended (TurnEndReason, docs/protocol.md §4) and the prompt
// status each reason maps to: the one place that mapping lives.
#pragma once

#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace harnessd::protocol {

enum class TurnStatus { ok, error, aborted };
std::string_view to_string(TurnStatus status);  ///< "ok", "error", "aborted"
std::optional<TurnStatus> parse_turn_status(std::string_view text);

struct TurnEndReason {
  enum class Kind { completed, aborted, max_tokens, error, interrupted };

  Kind kind = Kind::completed;
  std::string reason;   ///< aborted: why ("cancelled", "connection closed", ...)
  std::string message;  ///< error: what happened
  std::string code;     ///< error: a stable code (RATE_LIMIT, ...); empty: none
  std::optional<int> step;  ///< error: the model step it happened in

  static TurnEndReason completed() { return {}; }
  static TurnEndReason aborted(std::string_view why) { return {Kind::aborted, std::string(why), {}, {}, {}}; }
  static TurnEndReason max_tokens() { return {Kind::max_tokens, {}, {}, {}, {}}; }
  static TurnEndReason error(std::string_view message, std::string_view code = {},
                             std::optional<int> step = std::nullopt) {
    return {Kind::error, {}, std::string(message), std::string(code), step};
  }
  /// The daemon stopped inside the turn; written when its log is next loaded.
  static TurnEndReason interrupted() { return {Kind::interrupted, {}, {}, {}, {}}; }
};

/// "completed", "aborted", "max-tokens", "error", "interrupted".
std::string_view to_string(TurnEndReason::Kind kind);
std::optional<TurnEndReason::Kind> parse_turn_end_kind(std::string_view text);

/// The prompt's status for a reason; max-tokens is an error unless the
/// daemon is told to count it a success.
TurnStatus status_for(const TurnEndReason& reason, bool max_tokens_as_success);

/// `{"kind":KIND,...}` with the fields of that kind.
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const TurnEndReason& reason);
/// Throws std::invalid_argument for another shape or an unknown kind.
TurnEndReason tag_invoke(boost::json::value_to_tag<TurnEndReason>, const boost::json::value& value);

}  // namespace harnessd::protocol
