#include "harnessd/protocol/chunk.hpp"

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

}  // namespace harnessd::protocol
