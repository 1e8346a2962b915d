// The size of a conversation for providers that report no usage (the
// scripted one, some local servers): its bytes / 4, the rule of thumb of
// English text in BPE tokens. Counted from the messages, not serialized.
#include "llm/chat.hpp"

namespace harnessd::llm {

namespace {
// Role, keys and punctuation of one message in an OpenAI-style body.
constexpr std::size_t message_overhead_bytes = 32;
}  // namespace

std::int64_t estimate_tokens(const ChatMessage& message) {
  std::size_t bytes = message_overhead_bytes + message.text.size() + message.reasoning.size() +
                      message.tool_call_id.size();
  for (const ToolCall& call : message.tool_calls) {
    bytes += message_overhead_bytes + call.id.size() + call.name.size() + call.arguments.size();
  }
  return static_cast<std::int64_t>(bytes / 4);
}

std::int64_t estimate_tokens(const std::vector<ChatMessage>& messages) {
  std::int64_t tokens = 0;
  for (const ChatMessage& message : messages) tokens += estimate_tokens(message);
  return tokens;
}

}  // namespace harnessd::llm
