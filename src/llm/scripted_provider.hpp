// The keyless, deterministic `scripted` model (protocol §9): it answers from
// directives in the newest user message, for demos, tests and benchmarks.
#pragma once

#include "llm/provider.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::llm {

/// What a user message asks the scripted model to do.
struct Script {
  enum class Action { echo, reply, chunks, subagent, tools, error, max_tokens, context, invalid };
  Action action = Action::echo;
  /// @tool NAME JSON lines, in order: one step's tool calls.
  struct ToolCall {
    std::string name;
    std::string arguments;  ///< a JSON object, as written
  };
  std::vector<ToolCall> tool_calls;
  std::string text;               ///< echo/reply text, subagent prompt, error message
  std::int64_t chunk_count = 1;
  std::size_t chunk_bytes = 0;
  std::int64_t delay_ms = 0;      ///< before each chunk
};

/// Pure parser of the directives; an unusable directive gives Action::invalid
/// with `text` saying why.
Script parse_script(std::string_view user_text);

/// The bytes of chunk `i` of `@chunks`: the letter 'a' + i % 26, `bytes` times.
std::string scripted_chunk_text(std::int64_t i, std::size_t bytes);

class ScriptedProvider final : public Provider {
 public:
  std::string_view name() const override { return "scripted"; }
  std::string default_model() const override { return "scripted-1"; }
  std::optional<std::int64_t> context_window(std::string_view) const override { return std::nullopt; }
  boost::asio::awaitable<ModelResult> stream(const ModelRequest& request, ChunkSink& sink,
                                             CancelScope& cancel) override;
};

}  // namespace harnessd::llm
