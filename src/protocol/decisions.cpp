#include "harnessd/protocol/decisions.hpp"

#include <array>
#include <utility>

namespace harnessd::protocol {

namespace {

constexpr std::array<std::pair<ApprovalPolicy, std::string_view>, 2> policies{{
    {ApprovalPolicy::never, "never"},
    {ApprovalPolicy::ask, "ask"},
}};

constexpr std::array<std::pair<ApprovalOutcome, std::string_view>, 4> outcomes{{
    {ApprovalOutcome::allowed_once, "allowed-once"},
    {ApprovalOutcome::allowed_for_session, "allowed-for-session"},
    {ApprovalOutcome::rejected, "rejected"},
    {ApprovalOutcome::cancelled, "cancelled"},
}};

template <class Enum, std::size_t N>
std::string_view name_in(const std::array<std::pair<Enum, std::string_view>, N>& names, Enum value) {
  for (const auto& [candidate, name] : names) {
    if (candidate == value) return name;
  }
  return {};
}

template <class Enum, std::size_t N>
std::optional<Enum> value_in(const std::array<std::pair<Enum, std::string_view>, N>& names, std::string_view text) {
  for (const auto& [value, name] : names) {
    if (name == text) return value;
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(ApprovalPolicy policy) { return name_in(policies, policy); }
std::optional<ApprovalPolicy> parse_approval_policy(std::string_view text) { return value_in(policies, text); }

std::string_view to_string(ApprovalOutcome outcome) { return name_in(outcomes, outcome); }
std::optional<ApprovalOutcome> parse_approval_outcome(std::string_view text) { return value_in(outcomes, text); }

std::string_view to_string(DecisionSource source) {
  switch (source) {
    case DecisionSource::client: return "client";
    case DecisionSource::timeout: return "timeout";
    case DecisionSource::cancel: return "cancel";
  }
  return {};
}

std::string_view to_string(QuestionOutcome outcome) {
  switch (outcome) {
    case QuestionOutcome::answered: return "answered";
    case QuestionOutcome::cancelled: return "cancelled";
    case QuestionOutcome::timeout: return "timeout";
  }
  return {};
}

std::optional<DecisionSource> parse_decision_source(std::string_view text) {
  for (const DecisionSource source : {DecisionSource::client, DecisionSource::timeout, DecisionSource::cancel}) {
    if (to_string(source) == text) return source;
  }
  return std::nullopt;
}

std::optional<QuestionOutcome> parse_question_outcome(std::string_view text) {
  for (const QuestionOutcome outcome : {QuestionOutcome::answered, QuestionOutcome::cancelled, QuestionOutcome::timeout}) {
    if (to_string(outcome) == text) return outcome;
  }
  return std::nullopt;
}

}  // namespace harnessd::protocol
