// The provider boundary's UTF-8 rule: every text a provider yields (chunk
// texts, tool call ids, names and arguments, error messages) is valid UTF-8
// before it becomes an event, whatever bytes the model endpoint sent. The
// turn applies it to every chunk of every provider; error_result() to every
// error message.
//
// Each chunk is repaired on its own: a provider must not split a character
// across two deltas. The OpenAI-compatible stream cannot (each delta is a
// JSON string, decoded and validated whole); a provider reading raw bytes
// must hold back an incomplete trailing character itself.
#pragma once

#include "harnessd/protocol/chunk.hpp"
#include "util/utf8.hpp"

#include <variant>

namespace harnessd::llm {

/// Replaces every ill-formed sequence in the chunk's strings by U+FFFD.
inline void make_valid_utf8(protocol::Chunk& chunk) {
  if (auto* text = std::get_if<protocol::TextDelta>(&chunk)) {
    util::make_valid_utf8(text->text);
  } else if (auto* reasoning = std::get_if<protocol::ReasoningDelta>(&chunk)) {
    util::make_valid_utf8(reasoning->text);
  } else if (auto* call = std::get_if<protocol::ToolCallDelta>(&chunk)) {
    util::make_valid_utf8(call->id);
    util::make_valid_utf8(call->name);
    util::make_valid_utf8(call->arguments_delta);
  }
  // UsageChunk holds numbers under fixed keys; the others hold no text.
}

}  // namespace harnessd::llm
