// The OpenAI-compatible chat completions format (DeepSeek and others):
// request bodies built from a conversation, and the streamed chunks turned
// into the protocol's assistant/chunk objects.
#pragma once

#include "llm/chat.hpp"
#include "harnessd/protocol/chunk.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::llm::openai {

/// Replaces every non-finite double (1e400 parses as +inf) inside `value`
/// with null and returns how many it replaced. Boost.JSON would serialize
/// them as Infinity/NaN, which no JSON reader accepts, so provider data is
/// passed through this before it can reach a client or a session log.
std::size_t replace_non_finite(boost::json::value& value);

/// The JSON body of POST /chat/completions with `stream: true`: the
/// request's system prompt, its workspace instructions ahead of the first
/// user message, the conversation, its tools and settings.
boost::json::object build_request_body(const ModelRequest& request);

/// Folds `data:` payloads of one streamed response into protocol chunks.
class StreamDecoder {
 public:
  /// One `data:` payload. Returns false once the stream has said [DONE].
  /// Throws std::runtime_error on a payload that is not a chunk object,
  /// including one nested deeper than util::input_max_depth. Usage fields
  /// that are not finite numbers are left out.
  bool on_data(std::string_view data, std::vector<protocol::Chunk>& chunks);

  /// Closes open blocks and emits usage and finish; call once after [DONE].
  void finish(std::vector<protocol::Chunk>& chunks);

  bool done() const noexcept { return done_; }
  /// The provider's finish_reason ("stop", "tool_calls", "length", ...).
  const std::optional<std::string>& finish_reason() const noexcept { return finish_reason_; }
  bool received_any() const noexcept { return received_any_; }

 private:
  int block_for(std::string_view kind, int tool_index, protocol::BlockType block_type,
                std::vector<protocol::Chunk>& chunks);

  struct OpenBlock {
    std::string kind;  // "text", "reasoning" or "tool"
    int tool_index;
    int index;
  };
  std::vector<OpenBlock> blocks_;
  std::optional<std::string> finish_reason_;
  std::optional<boost::json::object> usage_;
  bool done_ = false;
  bool received_any_ = false;
};

/// What an error response's body says, for a message: the error.message (or
/// error string) of a JSON body, else the body itself cut to
/// `max_raw_bytes` at a character boundary, trailing line breaks dropped.
/// Always valid UTF-8: ill-formed bytes become U+FFFD.
std::string error_detail(std::string_view body, std::size_t max_raw_bytes = 300);

/// Maps an OpenAI finish_reason to ours; nullopt for reasons that are errors.
std::optional<FinishReason> map_finish_reason(std::string_view reason);

}  // namespace harnessd::llm::openai
