// What a turn may wait for from its clients (docs/protocol.md §4.12-§4.13):
// an approval of a tool call under the `ask` policy, and the answers to
// ask_user_question. The names of each choice live here once.
#pragma once

#include <optional>
#include <string_view>

namespace harnessd::protocol {

/// initialize.approvalPolicy: whether tools that may change something wait
/// for a client's decision.
enum class ApprovalPolicy { never, ask };
std::string_view to_string(ApprovalPolicy policy);  ///< "never", "ask"
std::optional<ApprovalPolicy> parse_approval_policy(std::string_view text);

/// How an approval was settled. A client sends one of the first three;
/// `cancelled` is the daemon's, when the turn is cancelled while it waits.
enum class ApprovalOutcome { allowed_once, allowed_for_session, rejected, cancelled };
/// "allowed-once", "allowed-for-session", "rejected", "cancelled".
std::string_view to_string(ApprovalOutcome outcome);
std::optional<ApprovalOutcome> parse_approval_outcome(std::string_view text);

/// Who settled a wait: a client's request, the timeout, or the turn's cancel.
enum class DecisionSource { client, timeout, cancel };
std::string_view to_string(DecisionSource source);  ///< "client", "timeout", "cancel"
std::optional<DecisionSource> parse_decision_source(std::string_view text);

/// How a question was settled.
enum class QuestionOutcome { answered, cancelled, timeout };
std::string_view to_string(QuestionOutcome outcome);  ///< "answered", "cancelled", "timeout"
std::optional<QuestionOutcome> parse_question_outcome(std::string_view text);

}  // namespace harnessd::protocol
