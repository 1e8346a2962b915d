// The model-facing view of a conversation: messages rebuilt from session
// events, tool definitions, and what one model call returns.
#pragma once

#include "llm/errc.hpp"

#include <boost/json/object.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace harnessd::llm {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  ///< raw JSON text, as the model produced it
};

struct ChatMessage {
  enum class Role { user, assistant, tool };
  Role role = Role::user;
  std::string text;
  std::string reasoning;              ///< assistant only
  std::vector<ToolCall> tool_calls;   ///< assistant only
  std::string tool_call_id;           ///< tool only: the call this answers
  bool is_error = false;              ///< tool only
};

struct ToolSpec {
  std::string name;
  std::string description;
  boost::json::object parameters;  ///< JSON Schema of the arguments
  std::string guidance;            ///< the tool's section of the system prompt; may be empty
};

/// Why a model is called: a step of a turn, or a summary of the
/// conversation so far (compaction, docs/protocol.md §13).
enum class RequestPurpose { turn, compaction };

/// A session's model settings (initialize); unset ones are not sent, so
/// the endpoint's defaults apply.
struct ModelSettings {
  std::optional<bool> thinking;                 ///< DeepSeek's thinking mode
  std::optional<std::string> reasoning_effort;  ///< "high" or "max"
  std::optional<double> temperature;
  std::vector<std::string> stop;
};

/// One model call: the whole conversation so far plus the tools on offer.
struct ModelRequest {
  std::string model;
  std::optional<std::int64_t> max_tokens;
  const std::vector<ChatMessage>* messages = nullptr;
  /// What the model is offered; shared by every request until the tools
  /// change (ToolRegistry::specs). Null: no tools.
  std::shared_ptr<const std::vector<ToolSpec>> tools;
  RequestPurpose purpose = RequestPurpose::turn;
  ModelSettings settings;
  std::string system_prompt;
  /// Workspace instructions (AGENTS.md), sent ahead of the first user message.
  std::string instructions;
  /// The session's context window in tokens (initialize.contextWindow).
  std::int64_t context_window = 128'000;
};

/// A conversation's size in tokens when the provider reports none: its
/// bytes / 4. Tool definitions are not counted: every request carries the
/// same ones, and the window that matters is the conversation's.
std::int64_t estimate_tokens(const std::vector<ChatMessage>& messages);
/// The same for one message.
std::int64_t estimate_tokens(const ChatMessage& message);

enum class FinishReason {
  stop,        ///< the answer is complete
  tool_calls,  ///< run the requested tools, then call the model again
  length,      ///< stopped at the token limit
  error,       ///< the call failed; see ModelResult::error_*
  cancelled,   ///< the turn was cancelled while the model streamed
};

struct ModelResult {
  FinishReason finish = FinishReason::stop;
  std::string error_message;
  std::string error_code;  ///< the wire's class of the error, e.g. RATE_LIMIT, HTTP_404
  std::error_code error;   ///< the same as an llm::errc, for code that branches on it
};

/// A failed call: `wire` overrides wire_code(code) where the code carries
/// a detail (HTTP_404, FINISH_CONTENT_FILTER).
ModelResult error_result(std::string message, errc code, std::string wire = {});

}  // namespace harnessd::llm
