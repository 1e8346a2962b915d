#include "harnessd/protocol/chunk.hpp"

#include "protocol/json_read.hpp"
#include "util/json_append.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace harnessd::protocol {
namespace json = boost::json;

std::string_view to_string(BlockType type) {
  switch (type) {
    case BlockType::text:
      return "text";
    case BlockType::reasoning:
      return "reasoning";
    case BlockType::tool_call:
      return "tool-call";
  }
  return "text";
}

std::string_view to_string(ChunkFinish reason) {
  switch (reason) {
    case ChunkFinish::stop:
      return "stop";
    case ChunkFinish::tool_calls:
      return "tool-calls";
    case ChunkFinish::length:
      return "length";
    case ChunkFinish::error:
      return "error";
  }
  return "error";
}

namespace {

/// Field order is the wire's: type, index, then the chunk's own fields.
struct Writer {
  std::string& out;

  void head(std::string_view type, int index) {
    out += R"({"type":")";
    out += type;
    out += R"(","index":)";
    util::append_json_int(out, index);
  }
  void field(std::string_view name, std::string_view text) {
    out += ",\"";
    out += name;
    out += "\":";
    util::append_json_string(out, text);
  }

  void operator()(const BlockStart& c) {
    head("block-start", c.index);
    field("blockType", to_string(c.type));
    out += '}';
  }
  void operator()(const TextDelta& c) {
    head("text-delta", c.index);
    field("text", c.text);
    out += '}';
  }
  void operator()(const ReasoningDelta& c) {
    head("reasoning-delta", c.index);
    field("text", c.text);
    out += '}';
  }
  void operator()(const ToolCallDelta& c) {
    head("tool-call-delta", c.index);
    if (!c.id.empty()) field("id", c.id);
    if (!c.name.empty()) field("name", c.name);
    field("argumentsDelta", c.arguments_delta);
    out += '}';
  }
  void operator()(const BlockEnd& c) {
    head("block-end", c.index);
    out += '}';
  }
  void operator()(const UsageChunk& c) {
    out += R"({"type":"usage","usage":)";
    out += json::serialize(c.usage);
    out += '}';
  }
  void operator()(const FinishChunk& c) {
    out += R"({"type":"finish","reason":")";
    out += to_string(c.reason);
    out += "\"}";
  }
};

}  // namespace

void append_json(std::string& out, const Chunk& chunk) { std::visit(Writer{out}, chunk); }

void tag_invoke(json::value_from_tag, json::value& out, const Chunk& chunk) {
  std::string text;
  append_json(text, chunk);
  out = json::parse(text);
}

namespace {

template <class Enum, std::size_t N>
Enum enum_field(const json::object& obj, std::string_view name, const Enum (&values)[N]) {
  const std::string text = read::string(obj, name);
  for (const Enum value : values) {
    if (to_string(value) == text) return value;
  }
  read::fail(name, "has an unknown value");
}

}  // namespace

Chunk tag_invoke(json::value_to_tag<Chunk>, const json::value& value) {
  const json::object& obj = read::object(value, "chunk");
  const std::string type = read::string(obj, "type");
  if (type == "usage") return UsageChunk{read::object(obj, "usage")};
  if (type == "finish") {
    static constexpr ChunkFinish reasons[] = {ChunkFinish::stop, ChunkFinish::tool_calls, ChunkFinish::length,
                                              ChunkFinish::error};
    return FinishChunk{enum_field(obj, "reason", reasons)};
  }
  const int index = read::small_integer(obj, "index");
  if (type == "block-start") {
    static constexpr BlockType types[] = {BlockType::text, BlockType::reasoning, BlockType::tool_call};
    return BlockStart{index, enum_field(obj, "blockType", types)};
  }
  if (type == "text-delta") return TextDelta{index, read::string(obj, "text")};
  if (type == "reasoning-delta") return ReasoningDelta{index, read::string(obj, "text")};
  if (type == "tool-call-delta") {
    return ToolCallDelta{index, read::optional_string(obj, "id").value_or(""),
                         read::optional_string(obj, "name").value_or(""), read::string(obj, "argumentsDelta")};
  }
  if (type == "block-end") return BlockEnd{index};
  read::fail("type", "is not a known chunk type");
}

}  // namespace harnessd::protocol
