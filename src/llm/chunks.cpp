#include "harnessd/llm/chunks.hpp"

namespace harnessd::llm::chunks {
namespace json = boost::json;

namespace {
json::object typed(std::string_view type, int index) {
  json::object chunk;
  chunk["type"] = type;
  chunk["index"] = index;
  return chunk;
}
}  // namespace

json::object block_start(int index, std::string_view block_type) {
  json::object chunk = typed("block-start", index);
  chunk["blockType"] = block_type;
  return chunk;
}

json::object text_delta(int index, std::string_view text) {
  json::object chunk = typed("text-delta", index);
  chunk["text"] = text;
  return chunk;
}

json::object reasoning_delta(int index, std::string_view text) {
  json::object chunk = typed("reasoning-delta", index);
  chunk["text"] = text;
  return chunk;
}

json::object tool_call_delta(int index, std::string_view id, std::string_view name,
                             std::string_view arguments_delta) {
  json::object chunk = typed("tool-call-delta", index);
  if (!id.empty()) chunk["id"] = id;
  if (!name.empty()) chunk["name"] = name;
  chunk["argumentsDelta"] = arguments_delta;
  return chunk;
}

json::object block_end(int index) { return typed("block-end", index); }

json::object usage(json::object usage) {
  json::object chunk;
  chunk["type"] = "usage";
  chunk["usage"] = std::move(usage);
  return chunk;
}

json::object finish(std::string_view reason) {
  json::object chunk;
  chunk["type"] = "finish";
  chunk["reason"] = reason;
  return chunk;
}

}  // namespace harnessd::llm::chunks
