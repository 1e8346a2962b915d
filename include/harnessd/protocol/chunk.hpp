// The chunks of assistant/chunk events (docs/protocol.md §6) as types.
// Providers build them, the turn loop folds them into the step's message,
// and each is serialized once, straight into its event (append_json).
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>

#include <string>
#include <string_view>
#include <variant>

namespace harnessd::protocol {

enum class BlockType { text, reasoning, tool_call };
/// How a model call finished, as its finish chunk says.
enum class ChunkFinish { stop, tool_calls, length, error };

std::string_view to_string(BlockType type);   ///< "text", "reasoning", "tool-call"
std::string_view to_string(ChunkFinish reason);  ///< "stop", "tool-calls", "length", "error"

struct BlockStart {
  int index = 0;
  BlockType type = BlockType::text;
};
struct TextDelta {
  int index = 0;
  std::string text;
};
struct ReasoningDelta {
  int index = 0;
  std::string text;
};
/// `id` and `name` come with the first delta of a call only (empty: omitted).
struct ToolCallDelta {
  int index = 0;
  std::string id;
  std::string name;
  std::string arguments_delta;
};
struct BlockEnd {
  int index = 0;
};
/// Token counts as the provider reports them (inputTokens, outputTokens, ...).
struct UsageChunk {
  boost::json::object usage;
};
struct FinishChunk {
  ChunkFinish reason = ChunkFinish::stop;
};

using Chunk = std::variant<BlockStart, TextDelta, ReasoningDelta, ToolCallDelta, BlockEnd, UsageChunk, FinishChunk>;

/// Appends the chunk's JSON object, compact, as Boost.JSON would write it.
void append_json(std::string& out, const Chunk& chunk);

/// The chunk's JSON object (tests, tools; the hot path uses append_json).
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const Chunk& chunk);
/// A chunk read back (clients, tests); throws std::invalid_argument for
/// another shape or an unknown chunk type.
Chunk tag_invoke(boost::json::value_to_tag<Chunk>, const boost::json::value& value);

}  // namespace harnessd::protocol
